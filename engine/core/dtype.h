// Element types the engine stores or reads from checkpoints.
#pragma once

#include <cstddef>
#include <string_view>

namespace offgen {

enum class DType { f16, bf16, f32, i32 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::f32:
    case DType::i32:
      return 4;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::f32:
      return "f32";
    case DType::i32:
      return "i32";
  }
  return "?";
}

}  // namespace offgen
