// Holds a model's weights on a device. Today every weight is resident on the gpu tier; the
// offloading runtime splits them across tiers. Loading streams each block (the globals, then
// layer by layer) through double-buffered pinned staging into device memory on the h2d-weights
// stream, converting to fp16 on host threads while the previous block copies.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/device/device.h"
#include "engine/model/opt_config.h"
#include "engine/model/weight_source.h"
#include "offload/model_weights.h"

namespace offgen {

class WeightStore {
 public:
  // Throws offgen::Error for a missing / mis-shaped tensor (naming it), OutOfMemoryError when the
  // weights do not fit the gpu tier's budget.
  WeightStore(Device& device, const OptConfig& config, const WeightSource& source);

  const ModelWeights& weights() const { return weights_; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  std::vector<Buffer> blocks_;  // one per layer, plus one for the embeddings and final norms
  ModelWeights weights_;
  std::uint64_t bytes_ = 0;
};

}  // namespace offgen
