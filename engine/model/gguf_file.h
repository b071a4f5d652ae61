// Reader for one GGUF file (llama.cpp's checkpoint format, versions 2 and 3), memory-mapped and
// read-only. Layout, all little-endian:
//   "GGUF", u32 version, u64 tensor count, u64 metadata count,
//   metadata: {string key, u32 value type, value}*   (strings: u64 length + UTF-8 bytes;
//             arrays: u32 element type, u64 count, elements),
//   tensor infos: {string name, u32 n_dims, u64 dims[n_dims], u32 ggml type, u64 offset}*,
//   padding to general.alignment (default 32), then the data; each offset is relative to the
//   data's start and a multiple of the alignment.
// dims[0] varies fastest: a matrix of R rows and C columns has dims {C, R}. open() validates
// everything against the file before returning: counts, lengths, types, shapes, offsets, sizes
// and overlaps, so a tensor's bytes are always inside the mapping. Immutable once opened;
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/model/gguf_types.h"
#include "engine/model/mapped_file.h"

namespace offgen {

// The type of a metadata value (gguf_type in the format's documentation).
enum class GgufValueType : std::uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::f32;
  std::vector<std::int64_t> dims;  // as stored: dims[0] is the contiguous one
  const std::byte* data = nullptr;
  std::size_t bytes = 0;

  std::int64_t numel() const;
  // Rows of dims[0] elements each (the product of the other dims).
  std::int64_t rows() const;
  // The PyTorch / Hugging Face shape: dims reversed.
  std::vector<std::int64_t> shape() const;
};

class GgufFile {
 public:
  // Throws offgen::Error naming the file and the problem: not GGUF, an unsupported version, a
  // truncated header, a bad length, count, type, shape, offset or size.
  static std::unique_ptr<GgufFile> open(const std::filesystem::path& path);
  // The same for a file's bytes held in memory (copied; `name` stands for the path in messages).
  static std::unique_ptr<GgufFile> from_bytes(std::span<const std::byte> bytes,
                                              const std::string& name);

  const std::filesystem::path& path() const { return file_.path(); }
  std::uint32_t version() const { return version_; }
  // Metadata values as JSON: integers, floats (as double), bools, strings, arrays of those.
  const nlohmann::json* find(const std::string& key) const;
  const std::map<std::string, nlohmann::json>& metadata() const { return metadata_; }
  const std::map<std::string, GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* tensor(const std::string& name) const;

  // Typed metadata lookups: nullopt when the key is absent; offgen::Error naming the file and
  // key when it is present with another type.
  std::optional<std::int64_t> integer(const std::string& key) const;
  std::optional<double> number(const std::string& key) const;
  std::optional<bool> boolean(const std::string& key) const;
  std::optional<std::string> string(const std::string& key) const;
  // The same, but a missing key is an error saying the file lacks it.
  std::int64_t required_integer(const std::string& key) const;
  std::string required_string(const std::string& key) const;
  // An array of `count` elements (nullptr when absent); an error when it is not an array, its
  // elements are not of `kind`, or, with count >= 0, its length differs.
  enum class Element { string, integer, number };
  const nlohmann::json* array(const std::string& key, Element kind, std::int64_t count = -1) const;

 private:
  explicit GgufFile(MappedFile file) : file_(std::move(file)) {}
  void parse();

  MappedFile file_;
  std::uint32_t version_ = 0;
  std::map<std::string, nlohmann::json> metadata_;
  std::map<std::string, GgufTensor> tensors_;
};

}  // namespace offgen
