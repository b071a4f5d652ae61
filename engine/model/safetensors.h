// Reader for one .safetensors file (memory-mapped, read-only). Format: 8-byte little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {}},
// then the data. Everything in the header is validated against the file before any tensor is used.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "engine/model/tensor_file.h"

namespace offgen {

class SafetensorsFile final : public TensorFile {
 public:
  // Throws offgen::Error naming the file and the problem: too short, header length past the end,
  // bad JSON, unknown dtype, offsets out of range / overlapping / not matching shape × dtype size.
  static std::unique_ptr<SafetensorsFile> open(const std::filesystem::path& path);
  // The same for a file's bytes held in memory (copied; `name` stands for the path in messages).
  static std::unique_ptr<SafetensorsFile> from_bytes(std::span<const std::byte> bytes,
                                                     const std::string& name);

 private:
  using TensorFile::TensorFile;
  static std::unique_ptr<SafetensorsFile> parse(MappedFile file);
};

}  // namespace offgen
