// Holds a model's weights on a device: all resident on the gpu tier, or each layer split by bytes
// between the gpu tier, pinned host memory and a disk file (the offloaded parts stream in per
// layer, the disk part through a disk_read stream that runs ahead of the copy stream). Loading
// streams each block (the globals, then layer by layer) through double-buffered pinned staging into
// device memory on the h2d-weights stream, converting to fp16 on host threads while the previous
// block copies.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/device/device.h"
#include "engine/model/model_weights.h"
#include "engine/model/opt_config.h"
#include "engine/model/weight_source.h"
#include "offload/disk_file.h"
#include "scheduler/placement.h"
#include "scheduler/weight_layout.h"

namespace offgen {

class WeightStore {
 public:
  // Weights not on the gpu tier stream in per layer (WeightStreamer); the disk share goes to a
  // file under `disk_folder`. Throws offgen::Error for a missing / mis-shaped tensor (naming it),
  // ParameterError for a bad placement or a disk share without a folder, OutOfMemoryError when a
  // tier's budget is exceeded.
  WeightStore(Device& device, const OptConfig& config, const WeightSource& source,
              const WeightPlacement& placement = {}, const std::filesystem::path& disk_folder = {});
  ~WeightStore();
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // Pointers the forward pass reads. With streaming, layers[l] points wherever bind_layer() last
  // put layer l (a WeightStreamer slot).
  const ModelWeights& weights() const { return weights_; }
  std::uint64_t bytes() const { return bytes_; }

  // Whether any layer has weights off the gpu tier (then layers run from streamer slots).
  bool streamed() const { return streamed_; }
  std::uint64_t gpu_bytes() const;        // weights resident on the gpu tier
  std::uint64_t offloaded_bytes() const;  // weights off the gpu tier, copied in every pass
  std::uint64_t offloaded_bytes(int layer) const;
  std::uint64_t disk_bytes() const;  // of which on disk
  // Where each tier holds the weights (the streamer's slots included).
  const WeightLayout& layout() const { return layout_; }
  // Enqueues on `stream` the copies that assemble layer `layer` contiguously at dst (its resident
  // part device-to-device, its pinned part host-to-device). Its disk part is read by a host task
  // on the device's disk_read stream into one of two pinned staging buffers (after the copy that
  // last read that buffer has run), and `stream` waits for the read before copying it the same
  // way; nothing blocks the calling thread. A read that failed is rethrown here, on the calling
  // thread, by the next call (and by check_disk_reads).
  void load_layer(int layer, Half* dst, Stream& stream);
  // With a disk part: enqueues on `stream` a host task that throws (a sticky stream error, seen
  // by the stream's synchronize()) if any disk read issued before it has failed. Enqueue it after
  // work that waited for those reads, so it runs after them. No-op without a disk part.
  void check_disk_reads(Stream& stream);
  // Points weights().layers[layer] at a copy of the layer assembled at `base`.
  void bind_layer(int layer, const Half* base);

 private:
  struct LayerBlock {
    Buffer resident;   // gpu tier: the layer's first resident_elements
    Buffer offloaded;  // pinned: the next pinned_elements
    std::size_t resident_elements = 0;
    std::size_t pinned_elements = 0;
    std::size_t disk_elements = 0;  // the rest, at disk_offset in disk_
    std::uint64_t disk_offset = 0;
    std::vector<std::function<void(const Half*)>> binders;
  };

  // The first failed disk read's message, shared with queued reads and checks.
  struct ReadFailure {
    std::mutex mutex;
    std::string message;  // empty: no read has failed
    void set(const std::string& what);
    std::string get();
  };
  void rethrow_read_failure() const;

  Device& device_;
  std::unique_ptr<DiskFile> disk_;
  Buffer disk_staging_[2];                       // pinned, DiskFile-aligned inside
  std::unique_ptr<Event> disk_staging_free_[2];  // recorded on the copy stream after its copy
  std::unique_ptr<Event> disk_read_done_[2];     // recorded on disk_read after the read
  std::shared_ptr<ReadFailure> read_failure_ = std::make_shared<ReadFailure>();
  int next_staging_ = 0;
  WeightLayout layout_;
  Buffer globals_;  // embeddings, positions, projections, final norm: always resident
  std::vector<LayerBlock> layers_;
  ModelWeights weights_;
  std::uint64_t bytes_ = 0;
  bool streamed_ = false;
};

}  // namespace offgen
