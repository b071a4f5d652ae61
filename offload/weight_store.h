// Holds a model's weights on a device: all resident on the gpu tier, or each layer's image split
// by bytes between the gpu tier, pinned host memory and a disk file (the offloaded parts stream in
// per layer, the disk part through a disk_read stream that runs ahead of the copy stream). Loading
// streams each block (the globals, then layer by layer) through double-buffered pinned staging into
// device memory on the h2d-weights stream, converting to fp16 on host threads while the previous
// block copies. With int4 weights (engine/core/compression.h) each layer's image is packed on the
// host as it loads (scheduler/weight_image.h), and bind_layer expands it into one fp16 block on
// the compute stream before the layer's kernels; the globals are rounded through the same
// quantization at load (the values FlexGen's compressed embeddings give) and kept in fp16.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/core/compression.h"
#include "engine/core/parameter_error.h"
#include "engine/device/device.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/model/weight_blocks.h"
#include "engine/model/weight_source.h"
#include "kernels/ops.h"
#include "offload/disk_file.h"
#include "scheduler/placement.h"
#include "scheduler/weight_image.h"
#include "scheduler/weight_layout.h"

namespace offgen {

// Why int8 weights cannot run on a cuda device, its parameters named by `name`.
std::string int8_weights_need_the_cpu(ParameterNamer name);

class WeightStore {
 public:
  // Weights not on the gpu tier stream in per layer (WeightStreamer); the disk share goes to a
  // file under `disk_folder`. Throws offgen::Error for a missing / mis-shaped tensor (naming it),
  // ParameterError for a bad placement or a disk share without a folder, OutOfMemoryError when a
  // tier's budget is exceeded. int4 storage needs `ops` (of `device`) to expand layers with; int8
  // storage needs the cpu device (ParameterError otherwise).
  WeightStore(Device& device, const ModelConfig& config, const WeightSource& source,
              const WeightPlacement& placement = {}, const std::filesystem::path& disk_folder = {},
              Storage storage = Storage::fp16, Ops* ops = nullptr);
  ~WeightStore();
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // Pointers the forward pass reads. With streaming, layers[l] points wherever bind_layer() last
  // put layer l (a WeightStreamer slot).
  const ModelWeights& weights() const { return weights_; }
  std::uint64_t bytes() const { return bytes_; }

  // Whether any layer has weights off the gpu tier (then layers run from streamer slots).
  bool streamed() const { return streamed_; }
  // Whether layers are kept packed (int4): each is expanded by bind_layer before its kernels, so a
  // WeightStreamer runs every pass even when nothing streams. int8 layers are packed too, but
  // bound where they lie (the cpu device multiplies them in int8).
  bool expands() const { return layout_.storage == Storage::int4; }
  bool packs() const { return layout_.storage != Storage::fp16; }
  std::uint64_t gpu_bytes() const;        // weights resident on the gpu tier (and the expanded
                                          // layer's block)
  std::uint64_t offloaded_bytes() const;  // weights off the gpu tier, copied in every pass
  std::uint64_t offloaded_bytes(int layer) const;
  std::uint64_t disk_bytes() const;  // of which on disk
  // Where each tier holds the weights (the streamer's slots included).
  const WeightLayout& layout() const { return layout_; }
  // Enqueues on `stream` the copies that assemble layer `layer`'s image contiguously at dst (its
  // resident part device-to-device, its pinned part host-to-device). Its disk part is read by a
  // host task on the device's disk_read stream into one of two pinned staging buffers (after the
  // copy that last read that buffer has run), and `stream` waits for the read before copying it the
  // same way; nothing blocks the calling thread. A read that failed is rethrown here, on the
  // calling thread, by the next call (and by check_disk_reads).
  void load_layer(int layer, std::byte* dst, Stream& stream);
  // With a disk part: enqueues on `stream` a host task that throws (a sticky stream error, seen
  // by the stream's synchronize()) if any disk read issued before it has failed. Enqueue it after
  // work that waited for those reads, so it runs after them. No-op without a disk part.
  void check_disk_reads(Stream& stream);
  // Points weights().layers[layer] at the layer whose image is at `image` (a copy assembled by
  // load_layer, or resident_image). An int8 image's matrices bind as they lie (their fp16 slots
  // null). An int4 image's matrices are first expanded into the store's
  // fp16 block by kernels the store's ops enqueue on the compute stream, and its vectors are read
  // where the image holds them, so the pointers are valid for work enqueued there after this call
  // while the image stays (a streamer slot: until it is released).
  void bind_layer(int layer, const std::byte* image);
  // The image of a layer that does not stream (all of it on the gpu tier).
  const std::byte* resident_image(int layer) const;

 private:
  struct LayerBlock {
    Buffer resident;   // gpu tier: the image's first resident_bytes
    Buffer offloaded;  // pinned: the next pinned_bytes
    std::uint64_t resident_bytes = 0;
    std::uint64_t pinned_bytes = 0;
    std::uint64_t disk_bytes = 0;  // the rest, at disk_offset in disk_
    std::uint64_t disk_offset = 0;
    WeightBlock block;  // its tensors and the slots of weights_.layers[l] they bind to
  };

  // The first failed disk read's message, shared with queued reads and checks.
  struct ReadFailure {
    std::mutex mutex;
    std::string message;  // empty: no read has failed
    void set(const std::string& what);
    std::string get();
  };
  void rethrow_read_failure() const;

  // Rounds the globals' 2-D tensors (fp16, at `host`) through int4 and back, in place.
  void round_globals_through_int4(const WeightBlock& globals, Half* host) const;
  // Points `block`'s slots into the int8 image at `image`.
  void bind_int8(const WeightBlock& block, const std::byte* image) const;
  // Packs a layer block (fp16, at `host`) into its image at `image`.
  void pack_layer(const Half* host, std::byte* image) const;

  Device& device_;
  Ops* ops_;
  WeightImage image_;  // every layer's (their shapes are alike)
  Buffer expanded_;    // int4: the fp16 block the bound layer is expanded into
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
