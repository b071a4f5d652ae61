#include "scheduler/weight_image.h"

#include "engine/core/error.h"
#include "engine/core/half.h"

namespace offgen {
namespace {

std::uint64_t aligned(std::uint64_t bytes) {
  return (bytes + kWeightImageAlignment - 1) / kWeightImageAlignment * kWeightImageAlignment;
}

// A vector of the block after `image`'s last part: back to back with the vector before it when the
// block keeps them so (a fused bias: a binder points at the first and the kernels read on).
WeightImage::Part vector_part(const WeightImage& image, const WeightBlock::Piece& piece,
                              std::size_t elements) {
  WeightImage::Part part;
  part.element_offset = piece.offset;
  part.elements = elements;
  part.offset = image.bytes;
  if (!image.parts.empty()) {
    const WeightImage::Part& previous = image.parts.back();
    if (!previous.packed && !previous.int8 &&
        previous.element_offset + previous.elements == piece.offset) {
      part.offset = previous.offset + previous.elements * sizeof(Half);
    }
  }
  return part;
}

std::size_t elements_of(const WeightBlock::Piece& piece) {
  std::size_t n = 1;
  for (const std::int64_t d : piece.shape) n *= static_cast<std::size_t>(d);
  return n;
}

// int8: binder by binder, so a fused matrix becomes one blob.
WeightImage int8_image(const WeightBlock& block) {
  WeightImage image;
  image.storage = Storage::int8;
  for (std::size_t b = 0; b < block.binders.size(); ++b) {
    const WeightBlock::Binder& binder = block.binders[b];
    const std::size_t first = binder.piece, end = block.binder_end(b);
    const WeightBlock::Piece& head = block.pieces[first];
    if (binder.int8_slot == nullptr || head.shape.size() != 2) {
      for (std::size_t p = first; p < end; ++p) {
        const WeightImage::Part part =
            vector_part(image, block.pieces[p], elements_of(block.pieces[p]));
        image.bytes = aligned(part.offset + part.elements * sizeof(Half));
        image.parts.push_back(part);
      }
      continue;
    }
    WeightImage::Part part;
    part.element_offset = head.offset;
    part.int8 = true;
    part.offset = image.bytes;
    part.int8_shape.cols = head.shape[1];
    for (std::size_t p = first; p < end; ++p) {
      part.int8_shape.rows += block.pieces[p].shape[0];
      part.elements += elements_of(block.pieces[p]);
    }
    image.bytes = aligned(part.offset + part.int8_shape.bytes());
    image.parts.push_back(part);
    for (std::size_t p = first + 1; p < end; ++p) {
      WeightImage::Part later;
      later.element_offset = block.pieces[p].offset;
      later.elements = elements_of(block.pieces[p]);
      later.offset = part.offset;
      later.int8 = true;
      later.within = true;
      image.parts.push_back(later);
    }
  }
  // Binders cover the block's pieces in order (weight_blocks.h), so parts[i] is piece i's.
  OFFGEN_CHECK(image.parts.size() == block.pieces.size() &&
                   (block.binders.empty() || block.binders.front().piece == 0),
               "int8 weight image: the block's binders do not cover its pieces in order");
  return image;
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
    case Storage::int8:
      return int8_image(block);
  }
  for (const WeightBlock::Piece& piece : block.pieces) {
    // FlexGen compresses the weights of rank 2 and keeps vectors as they are.
    if (piece.shape.size() != 2) {
      const WeightImage::Part part = vector_part(image, piece, elements_of(piece));
      image.bytes = aligned(part.offset + part.elements * sizeof(Half));
      image.parts.push_back(part);
      continue;
    }
    WeightImage::Part part;
    part.element_offset = piece.offset;
    part.elements = elements_of(piece);
    part.offset = image.bytes;
    part.packed = true;
    part.shape = {.outer = 1, .dim = piece.shape[0], .inner = piece.shape[1]};
    part.params_offset = aligned(part.offset + part.shape.data_bytes());
    image.bytes = aligned(part.params_offset + part.shape.param_count() * sizeof(Half));
    image.parts.push_back(part);
  }
  return image;
}

}  // namespace offgen
