// How a model's weights lie in device memory: the globals (embeddings, positions, projections,
// final norm) as one contiguous block and each decoder layer as another, tensors back to back,
// each 128-element aligned so vector loads never straddle tensors, q / k / v fused into one
// matrix. A block's binders receive its base address once it is on the device and publish the
// tensors' pointers into ModelWeights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/core/half.h"
#include "engine/model/model_weights.h"
#include "engine/model/opt_config.h"

namespace offgen {

struct WeightBlock {
  struct Piece {
    std::string name;
    std::vector<std::int64_t> shape;
    std::size_t offset = 0;  // elements
  };
  std::vector<Piece> pieces;
  std::size_t elements = 0;
  std::vector<std::function<void(const Half*)>> binders;

  // Adds a tensor; returns its element offset inside the block.
  std::size_t add(std::string name, std::vector<std::int64_t> shape);
  // Adds a tensor and remembers to point `slot` at it.
  void add(std::string name, std::vector<std::int64_t> shape, const Half** slot);
  // q, k, v stacked into one [3·rows, cols] matrix (or [3·rows] bias) at consecutive offsets.
  void add_fused_qkv(const std::string& prefix, const std::string& suffix,
                     std::vector<std::int64_t> shape, const Half** slot);
};

// The globals' block; its binders point `w`'s global tensors into it.
WeightBlock global_weight_block(const OptConfig& c, ModelWeights& w);
// Decoder layer `index`'s block; its binders point `l`'s tensors into it. Every OPT layer has the
// same shapes, so every layer's block has the same size.
WeightBlock layer_weight_block(const OptConfig& c, int index, LayerWeights& l);

}  // namespace offgen
