// Fuzzes the safetensors reader with whole files: header length, header JSON, dtypes, shapes,
// data_offsets and overlaps. An accepted file must describe only bytes inside itself: every tensor
// is read in full (out of a heap copy of exactly the input, so AddressSanitizer sees any byte past
// it) and its size must be shape x dtype. Bad files must fail with offgen::Error only.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/core/error.h"
#include "engine/model/safetensors.h"
#include "tests/fuzz/tensor_file_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using offgen::SafetensorsFile;
  std::unique_ptr<SafetensorsFile> file;
  try {
    file = SafetensorsFile::from_bytes(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz");
  } catch (const offgen::Error&) {
    return 0;
  }
  offgen::fuzz::expect_readable_tensors(*file, size, offgen::fuzz::SharedBytes::forbidden);
  return 0;
}
