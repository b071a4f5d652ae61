// Integer arithmetic for sizes and counts, shared so each file does not carry its own copy.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace offgen {

// ceil(v / d) for v >= 0, d > 0.
template <std::integral T>
constexpr T ceil_div(T v, std::type_identity_t<T> d) {
  return (v + d - 1) / d;
}

// v rounded up to a multiple of `to` (v >= 0, to > 0).
template <std::integral T>
constexpr T round_up(T v, std::type_identity_t<T> to) {
  return ceil_div(v, to) * to;
}

// Bytes of `count` values of T.
template <typename T>
constexpr std::size_t bytes_of(std::int64_t count) {
  return static_cast<std::size_t>(count) * sizeof(T);
}

}  // namespace offgen
