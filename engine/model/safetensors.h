// Reader for one .safetensors file (memory-mapped, read-only). Format: 8-byte little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {}},
// then the data. Everything in the header is validated against the file before any tensor is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/half.h"

namespace offgen {

class SafetensorsFile {
 public:
  struct Tensor {
    std::string name;
    DType dtype = DType::f16;  // F16, BF16, F32 accepted; anything else is an error
    std::vector<std::int64_t> shape;
    const std::byte* data = nullptr;  // into the mapping, valid while the file object lives
    std::size_t bytes = 0;
  };

  // Throws offgen::Error naming the file and the problem: too short, header length past the end,
  // bad JSON, unknown dtype, offsets out of range / overlapping / not matching shape × dtype size.
  static std::unique_ptr<SafetensorsFile> open(const std::filesystem::path& path);
  // The same for a file's bytes held in memory (copied; `name` stands for the path in messages).
  static std::unique_ptr<SafetensorsFile> from_bytes(std::span<const std::byte> bytes,
                                                     const std::string& name);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  const Tensor* find(const std::string& name) const;

  // Converts any accepted dtype to fp16 (round to nearest even). dst holds numel elements (may be
  // null when there are none).
  static void convert_to_f16(const Tensor& tensor, Half* dst);

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  void* mapping_ = nullptr;
  std::size_t mapping_size_ = 0;
  std::vector<std::byte> owned_;  // from_bytes()'s copy
  std::map<std::string, Tensor> tensors_;
};

}  // namespace offgen
