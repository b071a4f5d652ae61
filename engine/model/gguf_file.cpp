// See gguf_file.h. Every count and length read from the file is checked against the bytes that
// remain before anything is allocated for it, so a corrupt file fails with a message instead of
// reading out of bounds or asking for terabytes.
#include "engine/model/gguf_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "engine/core/error.h"
#include "engine/core/json_brief.h"
#include "engine/model/little_endian.h"

namespace offgen {
namespace {

using Json = nlohmann::json;

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr std::uint64_t kDefaultAlignment = 32;
constexpr std::uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
// Arrays may hold arrays; nothing published nests them, and each level costs stack.
constexpr int kMaxArrayDepth = 4;

using ValueType = GgufValueType;

// The smallest number of bytes a value of `type` takes (strings: the length field).
std::uint64_t min_bytes(ValueType type) {
  switch (type) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::boolean:
      return 1;
    case ValueType::u16:
    case ValueType::i16:
      return 2;
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::f32:
      return 4;
    case ValueType::string:
    case ValueType::u64:
    case ValueType::i64:
    case ValueType::f64:
      return 8;
    case ValueType::array:
      return 12;
  }
  return 1;
}

class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, std::string name)
      : bytes_(bytes), name_(std::move(name)) {}

  std::uint64_t position() const { return pos_; }
  std::uint64_t remaining() const { return bytes_.size() - pos_; }
  const std::string& name() const { return name_; }

  template <typename... Args>
  [[noreturn]] void error(fmt::format_string<Args...> format, Args&&... args) const {
    fail("{}: {} (at byte {})", name_, fmt::format(format, std::forward<Args>(args)...), pos_);
  }

  void need(std::uint64_t n, std::string_view what) const {
    if (n > remaining()) {
      error("the file ends inside {} ({} bytes needed, {} left): it is truncated", what, n,
            remaining());
    }
  }

  template <std::unsigned_integral T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    const T value = load_little_endian<T>(bytes_.data() + pos_);
    pos_ += sizeof(T);
    return value;
  }

  std::string read_string(std::string_view what) {
    const auto length = read<std::uint64_t>(what);
    need(length, what);
    std::string text(reinterpret_cast<const char*>(bytes_.data() + pos_),
                     static_cast<std::size_t>(length));
    pos_ += length;
    return text;
  }

  void skip_to(std::uint64_t position) { pos_ = position; }

 private:
  std::span<const std::byte> bytes_;
  std::string name_;
  std::uint64_t pos_ = 0;
};

template <typename T, typename U>
T bit_cast_from(U bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

Json read_value(Cursor& in, ValueType type, const std::string& key, int depth) {
  switch (type) {
    case ValueType::u8:
      return in.read<std::uint8_t>(key);
    case ValueType::i8:
      return static_cast<std::int8_t>(in.read<std::uint8_t>(key));
    case ValueType::u16:
      return in.read<std::uint16_t>(key);
    case ValueType::i16:
      return static_cast<std::int16_t>(in.read<std::uint16_t>(key));
    case ValueType::u32:
      return in.read<std::uint32_t>(key);
    case ValueType::i32:
      return static_cast<std::int32_t>(in.read<std::uint32_t>(key));
    case ValueType::u64:
      return in.read<std::uint64_t>(key);
    case ValueType::i64:
      return static_cast<std::int64_t>(in.read<std::uint64_t>(key));
    case ValueType::f32:
      return static_cast<double>(bit_cast_from<float>(in.read<std::uint32_t>(key)));
    case ValueType::f64:
      return bit_cast_from<double>(in.read<std::uint64_t>(key));
    case ValueType::boolean: {
      const auto b = in.read<std::uint8_t>(key);
      if (b > 1) in.error("metadata '{}': a bool must be 0 or 1, got {}", key, b);
      return b == 1;
    }
    case ValueType::string:
      return in.read_string(fmt::format("metadata '{}'", key));
    case ValueType::array: {
      if (depth >= kMaxArrayDepth) {
        in.error("metadata '{}': arrays nested deeper than {}", key, kMaxArrayDepth);
      }
      const auto element = in.read<std::uint32_t>(key);
      if (element > static_cast<std::uint32_t>(ValueType::f64)) {
        in.error("metadata '{}': unknown array element type {}", key, element);
      }
      const auto count = in.read<std::uint64_t>(key);
      const auto element_type = static_cast<ValueType>(element);
      if (count > in.remaining() / min_bytes(element_type)) {
        in.error("metadata '{}': an array of {} elements cannot fit in the {} bytes left", key,
                 count, in.remaining());
      }
      Json array = Json::array();
      array.get_ref<Json::array_t&>().reserve(static_cast<std::size_t>(count));
      for (std::uint64_t i = 0; i < count; ++i) {
        array.push_back(read_value(in, element_type, key, depth + 1));
      }
      return array;
    }
  }
  in.error("metadata '{}': unknown value type {}", key, static_cast<std::uint32_t>(type));
}

std::string_view kind_name(GgufFile::Element kind) {
  switch (kind) {
    case GgufFile::Element::string:
      return "strings";
    case GgufFile::Element::integer:
      return "integers";
    case GgufFile::Element::number:
      return "numbers";
  }
  return "?";
}

bool is_kind(const Json& value, GgufFile::Element kind) {
  switch (kind) {
    case GgufFile::Element::string:
      return value.is_string();
    case GgufFile::Element::integer:
      return value.is_number_integer();
    case GgufFile::Element::number:
      return value.is_number();
  }
  return false;
}

// A metadata value for a message: an array (a vocabulary of 50k strings) by its length.
std::string brief_value(const Json& value) {
  if (value.is_array()) return fmt::format("an array of {}", value.size());
  return json_brief(value);
}

}  // namespace

std::int64_t GgufTensor::numel() const {
  std::int64_t n = 1;
  for (const std::int64_t d : dims) n *= d;
  return n;
}

std::int64_t GgufTensor::rows() const {
  return dims.empty() ? 1 : numel() / dims[0];
}

std::vector<std::int64_t> GgufTensor::shape() const {
  return {dims.rbegin(), dims.rend()};
}

std::unique_ptr<GgufFile> GgufFile::open(const std::filesystem::path& path) {
  std::unique_ptr<GgufFile> file(new GgufFile(MappedFile::open(path)));
  file->parse();
  return file;
}

std::unique_ptr<GgufFile> GgufFile::from_bytes(std::span<const std::byte> bytes,
                                               const std::string& name) {
  std::unique_ptr<GgufFile> file(new GgufFile(MappedFile::copy_of(bytes, name)));
  file->parse();
  return file;
}

void GgufFile::parse() {
  const std::span<const std::byte> bytes = file_.bytes();
  Cursor in(bytes, file_.path().string());
  if (bytes.size() < 4 || load_little_endian<std::uint32_t>(bytes.data()) != kMagic) {
    fail("{}: not a GGUF file (it does not start with \"GGUF\")", in.name());
  }
  in.skip_to(4);
  version_ = in.read<std::uint32_t>("the version");
  if (version_ != 2 && version_ != 3) {
    in.error("GGUF version {} is not supported; offgen reads versions 2 and 3{}", version_,
             version_ == 1 ? " (convert version 1 files with llama.cpp's tools)" : "");
  }
  const auto tensor_count = in.read<std::uint64_t>("the tensor count");
  const auto kv_count = in.read<std::uint64_t>("the metadata count");
  // Each entry takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor info at least
  // 8 + 4 + 4 + 8.
  if (kv_count > in.remaining() / 13) {
    in.error("{} metadata entries cannot fit in a file of {} bytes", kv_count, bytes.size());
  }
  for (std::uint64_t i = 0; i < kv_count; ++i) {
    std::string key = in.read_string("a metadata key");
    const auto type = in.read<std::uint32_t>(key);
    if (type > static_cast<std::uint32_t>(ValueType::f64)) {
      in.error("metadata '{}': unknown value type {}", key, type);
    }
    Json value = read_value(in, static_cast<ValueType>(type), key, 0);
    if (!metadata_.emplace(key, std::move(value)).second) {
      in.error("metadata key '{}' appears twice", key);
    }
  }
  std::uint64_t alignment = kDefaultAlignment;
  if (const auto align = integer("general.alignment")) {
    if (*align <= 0 || (*align & (*align - 1)) != 0) {
      fail("{}: general.alignment {} is not a power of two", in.name(), *align);
    }
    alignment = static_cast<std::uint64_t>(*align);
  }
  if (tensor_count > in.remaining() / 24) {
    in.error("{} tensors cannot fit in a file of {} bytes", tensor_count, bytes.size());
  }
  struct Pending {
    std::string name;
    std::uint64_t offset;
  };
  std::vector<Pending> pending;
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor tensor;
    tensor.name = in.read_string("a tensor name");
    const auto n_dims = in.read<std::uint32_t>(tensor.name);
    if (n_dims == 0 || n_dims > kMaxDims) {
      in.error("tensor '{}' has {} dimensions; GGUF tensors have 1 to {}", tensor.name, n_dims,
               kMaxDims);
    }
    std::int64_t numel = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto dim = in.read<std::uint64_t>(tensor.name);
      if (dim == 0 || dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          static_cast<std::int64_t>(dim) > std::numeric_limits<std::int64_t>::max() / numel) {
        in.error("tensor '{}' has a bad dimension {}", tensor.name, dim);
      }
      tensor.dims.push_back(static_cast<std::int64_t>(dim));
      numel *= static_cast<std::int64_t>(dim);
    }
    const auto type = in.read<std::uint32_t>(tensor.name);
    const auto info = ggml_type_info(type);
    if (!info) in.error("tensor '{}' has an unknown ggml type {}", tensor.name, type);
    tensor.type = static_cast<GgmlType>(type);
    if (tensor.dims[0] % info->block != 0) {
      in.error("tensor '{}' ({}) has rows of {} elements, not a multiple of the type's block of {}",
               tensor.name, info->name, tensor.dims[0], info->block);
    }
    const auto blocks = static_cast<std::uint64_t>(numel / info->block);
    if (blocks > bytes.size() / info->block_bytes) {
      in.error("tensor '{}' ({} elements of {}) is larger than the whole file", tensor.name, numel,
               info->name);
    }
    tensor.bytes = static_cast<std::size_t>(blocks * info->block_bytes);
    const auto offset = in.read<std::uint64_t>(tensor.name);
    if (offset % alignment != 0) {
      in.error("tensor '{}' starts at data offset {}, not a multiple of the alignment {}",
               tensor.name, offset, alignment);
    }
    pending.push_back({tensor.name, offset});
    const std::string name = tensor.name;
    if (!tensors_.emplace(name, std::move(tensor)).second) {
      in.error("tensor '{}' appears twice", name);
    }
  }
  const std::uint64_t data_start = (in.position() + alignment - 1) / alignment * alignment;
  if (data_start > bytes.size() && tensor_count > 0) {
    fail("{}: the file ends before its tensor data starts (byte {}): it is truncated", in.name(),
         data_start);
  }
  // Place every tensor, then check that none runs past the end or into the next.
  std::ranges::sort(pending, {}, &Pending::offset);
  std::uint64_t previous_end = 0;
  std::string previous;
  for (const Pending& p : pending) {
    GgufTensor& tensor = tensors_.at(p.name);
    const std::uint64_t available =
        bytes.size() - std::min<std::uint64_t>(data_start, bytes.size());
    if (p.offset > available || tensor.bytes > available - p.offset) {
      fail(
          "{}: tensor '{}' ({} bytes at data offset {}) runs past the end of the file ({} bytes "
          "of data): the file is truncated or the offset is wrong",
          in.name(), p.name, tensor.bytes, p.offset, available);
    }
    if (p.offset < previous_end) {
      fail("{}: tensors '{}' and '{}' overlap in the file", in.name(), previous, p.name);
    }
    tensor.data = bytes.data() + data_start + p.offset;
    previous_end = p.offset + tensor.bytes;
    previous = p.name;
  }
}

const Json* GgufFile::find(const std::string& key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::tensor(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::optional<std::int64_t> GgufFile::integer(const std::string& key) const {
  const Json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (value->is_number_unsigned() &&
      value->get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    fail("{}: metadata '{}' = {} is out of range", path().string(), key, value->dump());
  }
  if (!value->is_number_integer()) {
    fail("{}: metadata '{}' must be an integer, got {}", path().string(), key, brief_value(*value));
  }
  return value->get<std::int64_t>();
}

std::optional<double> GgufFile::number(const std::string& key) const {
  const Json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) {
    fail("{}: metadata '{}' must be a number, got {}", path().string(), key, brief_value(*value));
  }
  return value->get<double>();
}

std::optional<bool> GgufFile::boolean(const std::string& key) const {
  const Json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) {
    fail("{}: metadata '{}' must be a bool, got {}", path().string(), key, brief_value(*value));
  }
  return value->get<bool>();
}

std::optional<std::string> GgufFile::string(const std::string& key) const {
  const Json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) {
    fail("{}: metadata '{}' must be a string, got {}", path().string(), key, brief_value(*value));
  }
  return value->get<std::string>();
}

std::int64_t GgufFile::required_integer(const std::string& key) const {
  const auto value = integer(key);
  if (!value) fail("{}: metadata key '{}' is missing", path().string(), key);
  return *value;
}

std::string GgufFile::required_string(const std::string& key) const {
  auto value = string(key);
  if (!value) fail("{}: metadata key '{}' is missing", path().string(), key);
  return *value;
}

const Json* GgufFile::array(const std::string& key, Element kind, std::int64_t count) const {
  const Json* value = find(key);
  if (value == nullptr) return nullptr;
  if (!value->is_array()) fail("{}: metadata '{}' must be an array", path().string(), key);
  if (count >= 0 && value->size() != static_cast<std::size_t>(count)) {
    fail("{}: metadata '{}' has {} elements, expected {}", path().string(), key, value->size(),
         count);
  }
  for (const Json& item : *value) {
    if (!is_kind(item, kind)) {
      fail("{}: metadata '{}' must hold {}", path().string(), key, kind_name(kind));
    }
  }
  return value;
}

}  // namespace offgen
