#include "engine/model/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "engine/core/error.h"
#include "engine/core/json_brief.h"
#include "engine/core/json_integer.h"
#include "engine/model/little_endian.h"
#include "engine/model/tensor_shape.h"

namespace offgen {
namespace {

using Json = nlohmann::json;

constexpr std::size_t kHeaderLengthBytes = 8;
constexpr int kMaxHeaderDepth = 64;

// The safetensors dtype names offgen reads; every other name (F64, I64, U8, BOOL, F8_*, ...) is
// refused by name because the engine computes in fp16 and would have to guess a conversion.
std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "F16") return DType::f16;
  if (name == "BF16") return DType::bf16;
  if (name == "F32") return DType::f32;
  return std::nullopt;
}

struct Extent {
  std::uint64_t begin;
  std::uint64_t end;
  const std::string* name;
};

struct ParsedEntry {
  StoredTensor tensor;
  std::uint64_t begin;
  std::uint64_t end;
};

// Validates one header entry against the data region and returns the tensor it describes.
ParsedEntry parse_entry(const std::string& where, const std::string& name, const Json& entry,
                        const std::byte* data, std::uint64_t data_size) {
  if (!entry.is_object()) {
    fail("{}: tensor '{}': entry must be an object with dtype, shape and data_offsets, got {}",
         where, name, json_brief(entry));
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(field)) fail("{}: tensor '{}' has no '{}'", where, name, field);
  }

  const Json& dtype_json = entry["dtype"];
  if (!dtype_json.is_string()) {
    fail("{}: tensor '{}': dtype must be a string, got {}", where, name, json_brief(dtype_json));
  }
  const auto dtype = parse_dtype(dtype_json.get<std::string>());
  if (!dtype) {
    fail("{}: unsupported dtype '{}' for tensor '{}' (offgen reads F16, BF16 and F32)", where,
         dtype_json.get<std::string>(), name);
  }

  const Json& shape_json = entry["shape"];
  if (!shape_json.is_array()) {
    fail("{}: tensor '{}': shape must be an array of integers, got {}", where, name,
         json_brief(shape_json));
  }
  std::vector<std::int64_t> shape;
  for (const Json& dim : shape_json) {
    if (!dim.is_number_integer()) {
      fail("{}: tensor '{}': shape must be an array of integers, got {}", where, name,
           json_brief(shape_json));
    }
    if (dim.is_number_unsigned() &&
        dim.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      fail("{}: tensor '{}': dimension {} in shape {} is too large", where, name, json_brief(dim),
           json_brief(shape_json));
    }
    const auto value = dim.get<std::int64_t>();
    if (value < 0) {
      fail("{}: tensor '{}' has negative dimension {} in shape {}", where, name, value,
           json_brief(shape_json));
    }
    shape.push_back(value);
  }
  // Byte counts are kept within int64 so later pointer and size arithmetic cannot wrap.
  const auto numel = shape_numel(shape);
  std::int64_t signed_bytes = 0;
  if (!numel || __builtin_mul_overflow(*numel, static_cast<std::int64_t>(dtype_size(*dtype)),
                                       &signed_bytes)) {
    fail("{}: tensor '{}': shape {} has too many elements", where, name, json_brief(shape_json));
  }
  const auto expected_bytes = static_cast<std::uint64_t>(signed_bytes);

  const Json& offsets = entry["data_offsets"];
  std::optional<std::uint64_t> begin, end;
  if (offsets.is_array() && offsets.size() == 2) {
    begin = json_integer<std::uint64_t>(offsets[0]);
    end = json_integer<std::uint64_t>(offsets[1]);
  }
  if (!begin || !end) {
    fail("{}: tensor '{}': data_offsets must be [begin, end] with non-negative integers, got {}",
         where, name, json_brief(offsets));
  }
  if (*begin > *end) {
    fail("{}: tensor '{}': data_offsets [{}, {}] begin after they end", where, name, *begin, *end);
  }
  if (*end > data_size) {
    fail(
        "{}: tensor '{}': data_offsets [{}, {}] run past the end of the data ({} bytes after the "
        "header; is the file truncated?)",
        where, name, *begin, *end, data_size);
  }
  if (*end - *begin != expected_bytes) {
    fail("{}: tensor '{}': data_offsets [{}, {}] span {} bytes but shape {} of {} needs {}", where,
         name, *begin, *end, *end - *begin, format_shape(shape), dtype_json.get<std::string>(),
         expected_bytes);
  }

  ParsedEntry parsed{{}, *begin, *end};
  parsed.tensor.name = name;
  parsed.tensor.dtype = *dtype;
  parsed.tensor.shape = std::move(shape);
  parsed.tensor.data = data + *begin;
  parsed.tensor.bytes = static_cast<std::size_t>(expected_bytes);
  return parsed;
}

// Two tensors sharing bytes would alias silently; the format forbids it, so refuse the file.
void check_no_overlap(const std::string& where, std::vector<Extent>& extents) {
  std::erase_if(extents, [](const Extent& e) { return e.begin == e.end; });
  std::ranges::sort(extents, [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  const Extent* furthest = nullptr;  // the extent reaching furthest so far
  for (const Extent& extent : extents) {
    if (furthest && extent.begin < furthest->end) {
      fail("{}: tensors '{}' (bytes {}..{}) and '{}' (bytes {}..{}) overlap", where,
           *furthest->name, furthest->begin, furthest->end, *extent.name, extent.begin, extent.end);
    }
    if (!furthest || extent.end > furthest->end) furthest = &extent;
  }
}

void check_file_size(const std::string& where, std::size_t size) {
  if (size < kHeaderLengthBytes) {
    fail("{}: file is {} bytes, too short for a safetensors file (the header length alone is 8)",
         where, size);
  }
}

std::map<std::string, StoredTensor> parse_file(const std::string& where, const std::byte* bytes,
                                               std::size_t size) {
  check_file_size(where, size);
  const auto header_length = load_little_endian<std::uint64_t>(bytes);
  if (header_length > size - kHeaderLengthBytes) {
    fail("{}: header length {} runs past the end of the file ({} bytes; is it truncated?)", where,
         header_length, size);
  }
  const auto* text = reinterpret_cast<const char*>(bytes + kHeaderLengthBytes);
  // Printing a value for a message recurses once per level of nesting, so a header nested a
  // million deep would overflow the stack; real headers are three levels deep.
  const auto limit_depth = [&where](int depth, Json::parse_event_t event, const Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxHeaderDepth) {
      fail("{}: header is nested more than {} levels deep", where, kMaxHeaderDepth);
    }
    return true;
  };
  Json header;
  try {
    header = Json::parse(text, text + header_length, limit_depth);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    fail("{}: header is not valid JSON: {}", where, e.what());
  }
  if (!header.is_object())
    fail("{}: header must be a JSON object, got {}", where, json_brief(header));

  const std::byte* data = bytes + kHeaderLengthBytes + header_length;
  const std::uint64_t data_size = size - kHeaderLengthBytes - header_length;
  std::map<std::string, StoredTensor> tensors;
  std::vector<Extent> extents;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;  // free-form string map (format, producer); unused
    ParsedEntry parsed = parse_entry(where, name, entry, data, data_size);
    const auto inserted = tensors.emplace(name, std::move(parsed.tensor)).first;
    extents.push_back(Extent{parsed.begin, parsed.end, &inserted->first});
  }
  check_no_overlap(where, extents);
  return tensors;
}

}  // namespace

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  return parse(MappedFile::open(path));
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::from_bytes(std::span<const std::byte> bytes,
                                                             const std::string& name) {
  return parse(MappedFile::copy_of(bytes, name));
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::parse(MappedFile file) {
  const std::span<const std::byte> bytes = file.bytes();
  auto tensors = parse_file(file.path().string(), bytes.data(), bytes.size());
  return std::unique_ptr<SafetensorsFile>(new SafetensorsFile(std::move(file), std::move(tensors)));
}

}  // namespace offgen
