// Where the model's weights come from: a checkpoint on disk or deterministic dummy values.
// Names are canonical Hugging Face OPT names without the "model." prefix, e.g.
// "decoder.layers.3.fc1.weight", "decoder.embed_tokens.weight".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/core/half.h"

namespace offgen {

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // True when the source holds a tensor of that name.
  virtual bool contains(const std::string& name) const = 0;
  // Converts tensor `name` to fp16 into dst (numel(shape) elements). Throws offgen::Error naming
  // the tensor (and file) if it is missing or its shape differs from `shape`.
  // Thread-safe: the weight store calls it from several threads for different tensors.
  virtual void read_f16(const std::string& name, std::span<const std::int64_t> shape,
                        Half* dst) const = 0;
  // Human-readable origin for messages and reports ("/models/opt-1.3b",
  // "opt-125m (dummy weights, seed 0)").
  virtual std::string describe() const = 0;
};

}  // namespace offgen
