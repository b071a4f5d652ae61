// Reading a JSON integer into a C++ integer type without wrapping: nlohmann's get<int>() turns
// 4294967297 into 1 and get<std::int64_t>() turns 2^64 - 1 into -1.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

namespace offgen {

// `value` as T when it is a JSON integer that T can hold; nullopt otherwise (not a number, a
// fraction, or out of T's range). Json: nlohmann::json or nlohmann::ordered_json.
template <typename T, typename Json>
std::optional<T> json_integer(const Json& value) {
  if (value.is_number_unsigned()) {
    const auto number = value.template get<std::uint64_t>();
    if (!std::in_range<T>(number)) return std::nullopt;
    return static_cast<T>(number);
  }
  if (value.is_number_integer()) {
    const auto number = value.template get<std::int64_t>();
    if (!std::in_range<T>(number)) return std::nullopt;
    return static_cast<T>(number);
  }
  return std::nullopt;
}

}  // namespace offgen
