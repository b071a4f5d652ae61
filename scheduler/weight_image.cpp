#include "scheduler/weight_image.h"

#include "engine/core/half.h"

namespace offgen {
namespace {

std::uint64_t aligned(std::uint64_t bytes) {
  return (bytes + kWeightImageAlignment - 1) / kWeightImageAlignment * kWeightImageAlignment;
}

}  // namespace

WeightImage weight_image(const WeightBlock& block, Storage storage) {
  WeightImage image;
  image.storage = storage;
  switch (storage) {
    case Storage::fp16:
      image.bytes = block.elements * sizeof(Half);
      return image;
    case Storage::int4:
      break;
  }
  for (const WeightBlock::Piece& piece : block.pieces) {
    WeightImage::Part part;
    part.element_offset = piece.offset;
    part.elements = 1;
    for (const std::int64_t d : piece.shape) part.elements *= static_cast<std::size_t>(d);
    part.offset = image.bytes;
    // FlexGen compresses the weights of rank 2 and keeps vectors as they are.
    part.packed = piece.shape.size() == 2;
    // Vectors the block keeps back to back (a fused q / k / v bias) stay so in the image: a
    // binder points at the first and the kernels read on.
    if (!part.packed && !image.parts.empty()) {
      const WeightImage::Part& previous = image.parts.back();
      if (!previous.packed && previous.element_offset + previous.elements == piece.offset) {
        part.offset = previous.offset + previous.elements * sizeof(Half);
      }
    }
    if (part.packed) {
      part.shape = {.outer = 1, .dim = piece.shape[0], .inner = piece.shape[1]};
      part.params_offset = aligned(part.offset + part.shape.data_bytes());
      image.bytes = aligned(part.params_offset + part.shape.param_count() * sizeof(Half));
    } else {
      image.bytes = aligned(part.offset + part.elements * sizeof(Half));
    }
    image.parts.push_back(part);
  }
  return image;
}

}  // namespace offgen
