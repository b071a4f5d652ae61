// Fuzzes the GGUF reader with whole files: the header, metadata of every type (nested arrays,
// lengths, counts), tensor infos (dims, types, offsets, alignment, overlaps). An accepted file
// must describe only bytes inside itself: every tensor of a type offgen reads is dequantized in
// full (out of a heap copy of exactly the input, so AddressSanitizer sees any byte past it).
// Then the model config and the tokenizer document are built from the metadata, which must
// either succeed or fail with offgen::Error.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/error.h"
#include "engine/model/gguf_checkpoint.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_tokenizer.h"
#include "engine/model/gguf_types.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::unique_ptr<offgen::GgufFile> file;
  try {
    file = offgen::GgufFile::from_bytes(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz");
  } catch (const offgen::Error&) {
    return 0;
  }
  std::vector<float> values;
  for (const auto& [name, tensor] : file->tensors()) {
    const auto info = offgen::ggml_type_info(static_cast<std::uint32_t>(tensor.type));
    if (!info || !info->dequantizable) continue;
    values.resize(static_cast<std::size_t>(tensor.numel()));
    offgen::dequantize_gguf(tensor.type, tensor.data, values.data(), tensor.numel());
  }
  try {
    offgen::GgufCheckpoint::config_of(*file);
  } catch (const offgen::Error&) {
  }
  try {
    offgen::gguf_tokenizer_document(*file);
  } catch (const offgen::Error&) {
  }
  return 0;
}
