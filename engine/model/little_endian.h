// Little-endian unsigned integers read from a file's bytes, whatever the host's byte order and
// the data's alignment. The caller checks that sizeof(T) bytes are there.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

namespace offgen {

template <std::unsigned_integral T>
T load_little_endian(const std::byte* bytes) {
  T value = 0;
  for (std::size_t i = sizeof(T); i-- > 0;) {
    value = static_cast<T>((value << 8) | std::to_integer<T>(bytes[i]));
  }
  return value;
}

}  // namespace offgen
