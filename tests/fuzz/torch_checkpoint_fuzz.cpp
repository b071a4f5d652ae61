// Fuzzes the torch.save reader with whole files: the zip directory (classic and zip64), local
// headers, the pickle, storages and tensor layouts. An accepted file describes only bytes inside
// itself: every tensor is converted in full (out of a heap copy of exactly the input, so
// AddressSanitizer sees any byte past it) and its size must be shape x dtype. Bad files must fail
// with offgen::Error only.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/error.h"
#include "engine/model/tensor_shape.h"
#include "engine/model/torch_checkpoint.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using offgen::TorchCheckpointFile;
  std::unique_ptr<TorchCheckpointFile> file;
  try {
    file = TorchCheckpointFile::from_bytes(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz");
  } catch (const offgen::Error&) {
    return 0;
  }
  for (const auto& [name, tensor] : file->tensors()) {
    OFFGEN_FUZZ_EXPECT(tensor.name == name, name);
    const auto numel = offgen::shape_numel(tensor.shape);
    OFFGEN_FUZZ_EXPECT(numel.has_value(), name);
    OFFGEN_FUZZ_EXPECT(
        tensor.bytes == static_cast<std::size_t>(*numel) * offgen::dtype_size(tensor.dtype), name);
    OFFGEN_FUZZ_EXPECT(tensor.bytes <= size, name);
    std::vector<offgen::Half> values(static_cast<std::size_t>(*numel));
    offgen::convert_to_f16(tensor, values.data());
  }
  return 0;
}
