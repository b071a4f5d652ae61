#include "engine/core/units.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

#include "engine/core/error.h"

namespace offgen {

std::uint64_t parse_bytes(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.')) {
    ++pos;
  }
  const std::string number(text.substr(0, pos));
  std::string unit;
  for (char c : text.substr(pos)) {
    if (!std::isspace(static_cast<unsigned char>(c)))
      unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  double value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  OFFGEN_CHECK(!number.empty() && ec == std::errc() && end == number.data() + number.size(),
               "'{}' is not a size (expected e.g. 16GiB, 512MB, 1073741824)", text);
  static const std::array<std::pair<std::string_view, double>, 14> units = {{
      {"", 1.0},
      {"b", 1.0},
      {"kb", 1e3},
      {"mb", 1e6},
      {"gb", 1e9},
      {"tb", 1e12},
      {"k", 1024.0},
      {"kib", 1024.0},
      {"m", 1048576.0},
      {"mib", 1048576.0},
      {"g", 1073741824.0},
      {"gib", 1073741824.0},
      {"t", 1099511627776.0},
      {"tib", 1099511627776.0},
  }};
  for (const auto& [name, scale] : units) {
    if (unit == name) return static_cast<std::uint64_t>(std::llround(value * scale));
  }
  fail("'{}' has an unknown size unit '{}' (use B, KB, MB, GB, KiB, MiB, GiB, ...)", text, unit);
}

std::string format_bytes(std::uint64_t bytes) {
  static const std::array<const char*, 5> names = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < names.size()) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.2f} {}", value, names[unit]);
}

}  // namespace offgen
