// Holds a model's weights on a device: all resident on the gpu tier, or each layer split by bytes
// between the gpu tier and pinned host memory (the offloaded part streams in per layer). Loading
// streams each block (the globals, then layer by layer) through double-buffered pinned staging into
// device memory on the h2d-weights stream, converting to fp16 on host threads while the previous
// block copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/device/device.h"
#include "engine/model/opt_config.h"
#include "engine/model/weight_source.h"
#include "offload/model_weights.h"

namespace offgen {

class WeightStore {
 public:
  // gpu_fraction: the share of each layer's weight bytes kept on the gpu tier; the rest lives in
  // pinned host memory and is streamed in per layer (WeightStreamer). Throws offgen::Error for a
  // missing / mis-shaped tensor (naming it), OutOfMemoryError when a tier's budget is exceeded.
  WeightStore(Device& device, const OptConfig& config, const WeightSource& source,
              double gpu_fraction = 1.0);
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // Pointers the forward pass reads. With streaming, layers[l] points wherever bind_layer() last
  // put layer l (a WeightStreamer slot).
  const ModelWeights& weights() const { return weights_; }
  std::uint64_t bytes() const { return bytes_; }

  // Whether any layer has weights off the gpu tier (then layers run from streamer slots).
  bool streamed() const { return streamed_; }
  std::uint64_t gpu_bytes() const;        // weights resident on the gpu tier
  std::uint64_t offloaded_bytes() const;  // weights in pinned memory, copied in every pass
  std::uint64_t offloaded_bytes(int layer) const;
  // Elements of the largest layer: the size of one streaming slot.
  std::size_t largest_layer_elements() const { return largest_layer_; }
  // Enqueues on `stream` the copies that assemble layer `layer` contiguously at dst (its resident
  // part device-to-device, its offloaded part host-to-device).
  void load_layer(int layer, Half* dst, Stream& stream) const;
  // Points weights().layers[layer] at a copy of the layer assembled at `base`.
  void bind_layer(int layer, const Half* base);

 private:
  struct LayerBlock {
    Buffer resident;   // gpu tier: the layer's first resident_elements
    Buffer offloaded;  // pinned: the rest
    std::size_t elements = 0;
    std::size_t resident_elements = 0;
    std::vector<std::function<void(const Half*)>> binders;
  };

  Device& device_;
  Buffer globals_;  // embeddings, positions, projections, final norm: always resident
  std::vector<LayerBlock> layers_;
  ModelWeights weights_;
  std::uint64_t bytes_ = 0;
  std::size_t largest_layer_ = 0;
  bool streamed_ = false;
};

}  // namespace offgen
