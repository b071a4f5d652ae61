// How a model's weights lie in device memory: the globals (embeddings, positions, projections,
// final norm, an untied LM head) as one contiguous block and each decoder layer as another, tensors
// back to back, each 128-element aligned so vector loads never straddle tensors, q / k / v fused
// into one matrix. A block's binders name the slots of ModelWeights its tensors go to; once the
// block is on the device, binding publishes the tensors' pointers there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/half.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace offgen {

struct WeightBlock {
  struct Piece {
    std::string name;
    std::vector<std::int64_t> shape;
    std::size_t offset = 0;  // elements
  };
  // A slot of ModelWeights and the piece it points at (q of a fused q / k / v); a decoder
  // layer's matrices also name the slot their int8 form binds to (int8 weights).
  struct Binder {
    std::size_t piece = 0;
    const Half** slot = nullptr;
    kernels::Int8Matrix* int8_slot = nullptr;
  };
  std::vector<Piece> pieces;
  std::size_t elements = 0;
  std::vector<Binder> binders;

  // Points every slot at its piece in a copy of the block at `base`.
  void bind(const Half* base) const;

  // Adds a tensor; returns its element offset inside the block.
  std::size_t add(std::string name, std::vector<std::int64_t> shape);
  // Adds a tensor and remembers to point `slot` (and with int8 weights `int8_slot`) at it.
  void add(std::string name, std::vector<std::int64_t> shape, const Half** slot,
           kernels::Int8Matrix* int8_slot = nullptr);
  // Tensors stacked along dim 0 into one matrix (or vector) at consecutive offsets — q, k, v into
  // [q rows + k rows + v rows, cols]; gate and up into [2·ffn, cols] — with `slot` at the first.
  struct Part {
    std::string name;
    std::vector<std::int64_t> shape;
  };
  void add_fused(const std::vector<Part>& parts, const Half** slot,
                 kernels::Int8Matrix* int8_slot = nullptr);
  // The pieces [first, end) that binder `b` binds: one, or a fused matrix's parts.
  std::size_t binder_end(std::size_t b) const;
};

// The globals' block; its binders point `w`'s global tensors into it.
WeightBlock global_weight_block(const ModelConfig& c, ModelWeights& w);
// Decoder layer `index`'s block; its binders point `l`'s tensors into it. Every layer of a model
// has the same shapes, so every layer's block has the same size. LLaMA-family layers fuse q, k, v
// (k and v of kv_heads each) and gate, up like OPT's q, k, v.
WeightBlock layer_weight_block(const ModelConfig& c, int index, LayerWeights& l);

}  // namespace offgen
