// fp16 / bf16 storage types for the host side. The engine stores weights, activations and KV in
// fp16 and accumulates in fp32; these types are plain 16-bit payloads (same bits as CUDA's __half /
// __nv_bfloat16) so buffers can be shared with the CUDA device without conversion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace offgen {

struct Half {
  std::uint16_t bits = 0;
};
struct BFloat16 {
  std::uint16_t bits = 0;
};
static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

// IEEE binary16 <-> binary32, round-to-nearest-even, NaN and Inf preserved.
inline float half_to_float(Half h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  std::uint32_t exponent = (h.bits >> 10) & 0x1fu;
  std::uint32_t mantissa = h.bits & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    mantissa &= 0x3ffu;
    bits = sign | (exponent << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

inline Half float_to_half(float value) {
  std::uint32_t x;
  std::memcpy(&x, &value, sizeof(x));
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN (keep NaN quiet)
    return Half{static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u))};
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to Inf
    return Half{static_cast<std::uint16_t>(sign | 0x7c00u)};
  }
  if (abs < 0x38800000u) {                     // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u) return Half{sign};  // < 2^-25 rounds to zero
    const std::uint32_t exponent = abs >> 23;
    const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - exponent;  // 14..24
    std::uint32_t result = mantissa >> shift;
    const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1u);
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return Half{static_cast<std::uint16_t>(sign | result)};
  }
  std::uint32_t result = ((abs >> 13) - (112u << 10));
  const std::uint32_t remainder = abs & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
  return Half{static_cast<std::uint16_t>(sign | result)};
}

inline float bf16_to_float(BFloat16 b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b.bits) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

inline BFloat16 float_to_bf16(float value) {
  std::uint32_t x;
  std::memcpy(&x, &value, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return BFloat16{static_cast<std::uint16_t>((x >> 16) | 0x40u)};
  x += 0x7fffu + ((x >> 16) & 1u);
  return BFloat16{static_cast<std::uint16_t>(x >> 16)};
}

// Bulk conversions; use the CPU's F16C instructions when it has them (checked once at run time).
void half_to_float(const Half* in, float* out, std::size_t n);
void float_to_half(const float* in, Half* out, std::size_t n);

}  // namespace offgen
