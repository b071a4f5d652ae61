// Fuzzes the safetensors reader with whole files: header length, header JSON, dtypes, shapes,
// data_offsets and overlaps. An accepted file must describe only bytes inside itself: every tensor
// is read in full (out of a heap copy of exactly the input, so AddressSanitizer sees any byte past
// it) and its size must be shape x dtype. Bad files must fail with offgen::Error only.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/half.h"
#include "engine/model/safetensors.h"
#include "engine/model/tensor_shape.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using offgen::SafetensorsFile;
  std::unique_ptr<SafetensorsFile> file;
  try {
    file = SafetensorsFile::from_bytes(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz");
  } catch (const offgen::Error&) {
    return 0;
  }
  std::size_t total = 0;
  for (const auto& [name, tensor] : file->tensors()) {
    OFFGEN_FUZZ_EXPECT(tensor.name == name, name);
    OFFGEN_FUZZ_EXPECT(file->find(name) == &tensor, name);
    const auto numel = offgen::shape_numel(tensor.shape);
    OFFGEN_FUZZ_EXPECT(numel.has_value(), name);
    OFFGEN_FUZZ_EXPECT(
        tensor.bytes == static_cast<std::size_t>(*numel) * offgen::dtype_size(tensor.dtype), name);
    total += tensor.bytes;
    OFFGEN_FUZZ_EXPECT(total <= size, "tensors hold more bytes than the file");
    std::vector<offgen::Half> values(static_cast<std::size_t>(*numel));
    convert_to_f16(tensor, values.data());
  }
  return 0;
}
