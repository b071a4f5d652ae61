// How a decoder layer's weights lie in the bytes the weight store keeps, moves and streams (its
// image). With fp16 storage the image is the layer's block of engine/model/weight_blocks.h
// itself. With int4 storage every 2-D tensor is packed in FlexGen's format, grouped along HF's
// output dimension (kernels/quantize_args.h: codes, then their [scale, min] pairs), and every 1-D
// tensor (biases, layer norms) stays fp16, as FlexGen keeps them; each part starts at a
// 256-byte step, but vectors the block keeps back to back (a fused bias) stay back to back. Before
// such a layer's kernels run its matrices are expanded into a block of the fp16 layout, and its
// vectors are read where the image holds them (WeightStore::bind_layer); the kernels never see the
// packing. With int8 storage each matrix a binder binds — a fused q / k / v or gate / up as one —
// is one blob of kernels/int8_matrix.h at a 256-byte step, which the cpu device's kernels read
// where it lies; vectors are laid out as with int4.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/core/compression.h"
#include "engine/model/weight_blocks.h"
#include "kernels/int8_matrix.h"
#include "kernels/quantize_args.h"

namespace offgen {

// Parts of an image start at multiples of this many bytes (128 fp16 elements, the blocks' own
// alignment), so vector loads never straddle parts and a byte split never cuts an element.
inline constexpr std::uint64_t kWeightImageAlignment = 256;

struct WeightImage {
  struct Part {
    std::size_t element_offset = 0;  // where the tensor lies in the fp16 block, in elements
    std::size_t elements = 0;
    std::uint64_t offset = 0;   // where it lies in the image, in bytes
    bool packed = false;        // FlexGen's codes at `offset`, its [scale, min] at params_offset
    kernels::QuantShape shape;  // packed: outer 1, dim = the tensor's rows, inner = its columns
    std::uint64_t params_offset = 0;
    // int8: the blob of the matrix that starts at this piece (its fused parts included), or
    // `within` for a later part of a fused matrix, which lies inside the blob before it.
    bool int8 = false;
    bool within = false;
    kernels::Int8Shape int8_shape;
  };
  Storage storage = Storage::fp16;
  std::vector<Part> parts;  // one per piece of the block, in order (packed only; fp16 needs no map)
  std::uint64_t bytes = 0;  // the whole image
};

WeightImage weight_image(const WeightBlock& block, Storage storage);

}  // namespace offgen
