// Fuzzes the torch.save reader with whole files: the zip directory (classic and zip64), local
// headers, the pickle, storages and tensor layouts. An accepted file describes only bytes inside
// itself: every tensor is converted in full (out of a heap copy of exactly the input, so
// AddressSanitizer sees any byte past it) and its size must be shape x dtype. Bad files must fail
// with offgen::Error only.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/core/error.h"
#include "engine/model/torch_checkpoint.h"
#include "tests/fuzz/tensor_file_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using offgen::TorchCheckpointFile;
  std::unique_ptr<TorchCheckpointFile> file;
  try {
    file = TorchCheckpointFile::from_bytes(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz");
  } catch (const offgen::Error&) {
    return 0;
  }
  offgen::fuzz::expect_readable_tensors(*file, size, offgen::fuzz::SharedBytes::allowed);
  return 0;
}
