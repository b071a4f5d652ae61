#include "tests/support/safetensors_writer.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine/core/half.h"

namespace offgen::test {
namespace {

template <typename T>
std::string to_bytes(std::span<const float> values, T (*convert)(float)) {
  std::string out(values.size() * sizeof(T), '\0');
  for (std::size_t i = 0; i < values.size(); ++i) {
    const T value = convert(values[i]);
    std::memcpy(out.data() + i * sizeof(T), &value, sizeof(T));
  }
  return out;
}

float identity(float value) {
  return value;
}
Half to_half(float value) {
  return float_to_half(value);
}

}  // namespace

std::string f16_bytes(std::span<const float> values) {
  return to_bytes<Half>(values, to_half);
}
std::string bf16_bytes(std::span<const float> values) {
  return to_bytes<BFloat16>(values, float_to_bf16);
}
std::string f32_bytes(std::span<const float> values) {
  return to_bytes<float>(values, identity);
}

std::string safetensors_header(const std::vector<SafetensorsEntry>& tensors, bool metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (metadata) header["__metadata__"] = {{"format", "pt"}};
  std::uint64_t offset = 0;
  for (const SafetensorsEntry& tensor : tensors) {
    const std::uint64_t begin = offset;
    offset += tensor.data.size();
    const auto [first, last] = tensor.data_offsets.value_or(std::pair{begin, offset});
    header[tensor.name] = {
        {"dtype", tensor.dtype}, {"shape", tensor.shape}, {"data_offsets", {first, last}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::string safetensors_bytes(const std::vector<SafetensorsEntry>& tensors,
                              const SafetensorsWriteOptions& options) {
  const std::string header =
      options.header_text.value_or(safetensors_header(tensors, options.metadata));
  const std::uint64_t length = options.header_length.value_or(header.size());
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((length >> (8 * i)) & 0xffu));
  out += header;
  for (const SafetensorsEntry& tensor : tensors) out += tensor.data;
  if (options.truncate_to && *options.truncate_to < out.size()) out.resize(*options.truncate_to);
  return out;
}

void write_safetensors(const std::filesystem::path& path,
                       const std::vector<SafetensorsEntry>& tensors,
                       const SafetensorsWriteOptions& options) {
  // Written here rather than with test_support's write_file so this helper needs no test macros.
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  const std::string bytes = safetensors_bytes(tensors, options);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("could not write " + path.string());
}

}  // namespace offgen::test
