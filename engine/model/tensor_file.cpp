#include "engine/model/tensor_file.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>

#include "engine/core/error.h"

namespace offgen {
namespace {

// Converts elements [begin, end) of a non-fp16 tensor through an aligned float buffer: the
// mapping gives no alignment guarantee for F32 data, and the bulk converter uses F16C.
void convert_range_via_float(const StoredTensor& tensor, Half* dst, std::size_t begin,
                             std::size_t end) {
  constexpr std::size_t kChunk = 2048;
  alignas(64) float buffer[kChunk];
  for (std::size_t start = begin; start < end; start += kChunk) {
    const std::size_t count = std::min(kChunk, end - start);
    if (tensor.dtype == DType::f32) {
      std::memcpy(buffer, tensor.data + start * sizeof(float), count * sizeof(float));
    } else {
      for (std::size_t i = 0; i < count; ++i) {
        BFloat16 value;
        std::memcpy(&value.bits, tensor.data + (start + i) * sizeof(BFloat16), sizeof(BFloat16));
        buffer[i] = bf16_to_float(value);
      }
    }
    float_to_half(buffer, dst + start, count);
  }
}

}  // namespace

const StoredTensor* TensorFile::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void convert_to_f16(const StoredTensor& tensor, Half* dst) {
  OFFGEN_CHECK(
      tensor.dtype == DType::f16 || tensor.dtype == DType::bf16 || tensor.dtype == DType::f32,
      "tensor '{}': cannot convert {} to fp16", tensor.name, dtype_name(tensor.dtype));
  const std::size_t element_size = dtype_size(tensor.dtype);
  const std::size_t numel = tensor.bytes / element_size;
  if (numel == 0) return;  // dst may be null then, and memcpy must not see a null pointer
  const auto convert = [&](std::size_t begin, std::size_t end) {
    if (tensor.dtype == DType::f16) {
      std::memcpy(dst + begin, tensor.data + begin * element_size, (end - begin) * sizeof(Half));
    } else {
      convert_range_via_float(tensor, dst, begin, end);
    }
  };
  // Small tensors (biases, layer norms) are not worth waking the thread pool for.
  constexpr std::size_t kParallelGrain = std::size_t{1} << 16;
  if (numel <= 4 * kParallelGrain) {
    convert(0, numel);
    return;
  }
  tbb::parallel_for(
      tbb::blocked_range<std::size_t>(0, numel, kParallelGrain),
      [&](const tbb::blocked_range<std::size_t>& range) { convert(range.begin(), range.end()); });
}

}  // namespace offgen
