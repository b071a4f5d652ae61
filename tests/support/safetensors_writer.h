// Writes .safetensors files for tests: well-formed ones from a list of tensors, and deliberately
// broken ones (replaced header text or length, forced data_offsets, truncation) for the readers'
// error paths.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace offgen::test {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F16", "BF16", "F32", or anything else to test rejection
  std::vector<std::int64_t> shape;
  std::string data;  // raw little-endian bytes, laid out back to back after the header
  // Written to the header instead of the real [begin, end] (overlaps, bad spans).
  std::optional<std::pair<std::uint64_t, std::uint64_t>> data_offsets = std::nullopt;
};

struct SafetensorsWriteOptions {
  std::optional<std::string> header_text =
      std::nullopt;  // replaces the generated JSON header verbatim
  std::optional<std::uint64_t> header_length =
      std::nullopt;  // written instead of the header's real length
  std::optional<std::size_t> truncate_to =
      std::nullopt;      // cut the finished file to this many bytes
  bool metadata = true;  // add "__metadata__": {"format": "pt"}
};

// Raw little-endian bytes of `values` in each storage format (fp16/bf16 rounded to nearest even).
std::string f16_bytes(std::span<const float> values);
std::string bf16_bytes(std::span<const float> values);
std::string f32_bytes(std::span<const float> values);

// The header JSON the writer would produce (space-padded to a multiple of 8 bytes, like the
// reference implementation), for tests that want to edit it.
std::string safetensors_header(const std::vector<SafetensorsEntry>& tensors, bool metadata = true);

// The whole file's bytes.
std::string safetensors_bytes(const std::vector<SafetensorsEntry>& tensors,
                              const SafetensorsWriteOptions& options = {});

// Writes the file, creating parent directories.
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<SafetensorsEntry>& tensors,
                       const SafetensorsWriteOptions& options = {});

}  // namespace offgen::test
