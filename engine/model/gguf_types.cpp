// See gguf_types.h. This file is built with -ffp-contract=off (CMakeLists.txt): ggml's reference
// and the `gguf` package round each product before the sum, and so must this.
#include "engine/model/gguf_types.h"

#include <cstring>

#include "engine/core/error.h"
#include "engine/core/half.h"
#include "engine/model/little_endian.h"

namespace offgen {
namespace {

constexpr std::int64_t kSuperBlock = 256;  // QK_K

float load_f16(const std::byte* p) {
  return half_to_float(Half{load_little_endian<std::uint16_t>(p)});
}

float load_f32(const std::byte* p) {
  const std::uint32_t bits = load_little_endian<std::uint32_t>(p);
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

std::uint8_t byte_at(const std::byte* p, std::size_t i) {
  return std::to_integer<std::uint8_t>(p[i]);
}

// ggml's get_scale_min_k4: the j-th 6-bit scale and min of a Q4_K / Q5_K super-block.
void scale_min_k4(int j, const std::byte* q, std::uint8_t& scale, std::uint8_t& min) {
  const auto b = [q](int i) { return byte_at(q, static_cast<std::size_t>(i)); };
  if (j < 4) {
    scale = b(j) & 63;
    min = b(j + 4) & 63;
  } else {
    scale = static_cast<std::uint8_t>((b(j + 4) & 0xF) | ((b(j - 4) >> 6) << 4));
    min = static_cast<std::uint8_t>((b(j + 4) >> 4) | ((b(j) >> 6) << 4));
  }
}

void q8_0(const std::byte* block, float* y) {
  const float d = load_f16(block);
  for (int i = 0; i < 32; ++i) {
    y[i] = static_cast<float>(
               static_cast<std::int8_t>(byte_at(block, 2 + static_cast<std::size_t>(i)))) *
           d;
  }
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1: `has_min` says whether an fp16 m follows d; `has_high` whether a
// u32 of fifth bits follows that.
void q_32(const std::byte* block, float* y, bool has_min, bool has_high) {
  const float d = load_f16(block);
  std::size_t at = 2;
  float m = 0.0f;
  if (has_min) {
    m = load_f16(block + at);
    at += 2;
  }
  std::uint32_t high = 0;
  if (has_high) {
    high = load_little_endian<std::uint32_t>(block + at);
    at += 4;
  }
  const int offset = has_min ? 0 : (has_high ? 16 : 8);
  for (int j = 0; j < 16; ++j) {
    const std::uint8_t q = byte_at(block, at + static_cast<std::size_t>(j));
    int lo = q & 0xF;
    int hi = q >> 4;
    if (has_high) {
      lo |= static_cast<int>(((high >> j) << 4) & 0x10);
      hi |= static_cast<int>((high >> (j + 12)) & 0x10);
    }
    if (has_min) {
      y[j] = static_cast<float>(lo) * d + m;
      y[j + 16] = static_cast<float>(hi) * d + m;
    } else {
      y[j] = static_cast<float>(lo - offset) * d;
      y[j + 16] = static_cast<float>(hi - offset) * d;
    }
  }
}

// Q4_K and Q5_K (`fifth` points at the 32 bytes of fifth bits, or is null).
void q_k(const std::byte* block, float* y, bool five) {
  const float d = load_f16(block);
  const float dmin = load_f16(block + 2);
  const std::byte* scales = block + 4;
  const std::byte* high = five ? block + 16 : nullptr;
  const std::byte* q = block + (five ? 48 : 16);
  int is = 0;
  std::uint8_t u1 = 1;
  std::uint8_t u2 = 2;
  for (int j = 0; j < kSuperBlock; j += 64) {
    std::uint8_t sc = 0;
    std::uint8_t mn = 0;
    scale_min_k4(is, scales, sc, mn);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = dmin * static_cast<float>(mn);
    scale_min_k4(is + 1, scales, sc, mn);
    const float d2 = d * static_cast<float>(sc);
    const float m2 = dmin * static_cast<float>(mn);
    for (int l = 0; l < 32; ++l) {
      const std::uint8_t b = byte_at(q, static_cast<std::size_t>(l));
      const int h = high ? ((byte_at(high, static_cast<std::size_t>(l)) & u1) ? 16 : 0) : 0;
      *y++ = d1 * static_cast<float>((b & 0xF) + h) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const std::uint8_t b = byte_at(q, static_cast<std::size_t>(l));
      const int h = high ? ((byte_at(high, static_cast<std::size_t>(l)) & u2) ? 16 : 0) : 0;
      *y++ = d2 * static_cast<float>((b >> 4) + h) - m2;
    }
    q += 32;
    is += 2;
    u1 = static_cast<std::uint8_t>(u1 << 2);
    u2 = static_cast<std::uint8_t>(u2 << 2);
  }
}

void q6_k(const std::byte* block, float* y) {
  const std::byte* ql = block;
  const std::byte* qh = block + 128;
  const std::byte* sc = block + 192;
  const float d = load_f16(block + 208);
  for (int n = 0; n < kSuperBlock; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const auto u = [](const std::byte* p, int i) {
        return byte_at(p, static_cast<std::size_t>(i));
      };
      const auto s = [sc](int i) {
        return static_cast<float>(
            static_cast<std::int8_t>(byte_at(sc, static_cast<std::size_t>(i))));
      };
      const int is = l / 16;
      const int q1 = ((u(ql, l) & 0xF) | (((u(qh, l) >> 0) & 3) << 4)) - 32;
      const int q2 = ((u(ql, l + 32) & 0xF) | (((u(qh, l) >> 2) & 3) << 4)) - 32;
      const int q3 = ((u(ql, l) >> 4) | (((u(qh, l) >> 4) & 3) << 4)) - 32;
      const int q4 = ((u(ql, l + 32) >> 4) | (((u(qh, l) >> 6) & 3) << 4)) - 32;
      y[l] = d * s(is) * static_cast<float>(q1);
      y[l + 32] = d * s(is + 2) * static_cast<float>(q2);
      y[l + 64] = d * s(is + 4) * static_cast<float>(q3);
      y[l + 96] = d * s(is + 6) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(std::uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::f32:
      return GgmlTypeInfo{"F32", 1, 4, true};
    case GgmlType::f16:
      return GgmlTypeInfo{"F16", 1, 2, true};
    case GgmlType::bf16:
      return GgmlTypeInfo{"BF16", 1, 2, true};
    case GgmlType::q4_0:
      return GgmlTypeInfo{"Q4_0", 32, 18, true};
    case GgmlType::q4_1:
      return GgmlTypeInfo{"Q4_1", 32, 20, true};
    case GgmlType::q5_0:
      return GgmlTypeInfo{"Q5_0", 32, 22, true};
    case GgmlType::q5_1:
      return GgmlTypeInfo{"Q5_1", 32, 24, true};
    case GgmlType::q8_0:
      return GgmlTypeInfo{"Q8_0", 32, 34, true};
    case GgmlType::q8_1:
      return GgmlTypeInfo{"Q8_1", 32, 36, false};
    case GgmlType::q2_k:
      return GgmlTypeInfo{"Q2_K", 256, 84, false};
    case GgmlType::q3_k:
      return GgmlTypeInfo{"Q3_K", 256, 110, false};
    case GgmlType::q4_k:
      return GgmlTypeInfo{"Q4_K", 256, 144, true};
    case GgmlType::q5_k:
      return GgmlTypeInfo{"Q5_K", 256, 176, true};
    case GgmlType::q6_k:
      return GgmlTypeInfo{"Q6_K", 256, 210, true};
    case GgmlType::q8_k:
      return GgmlTypeInfo{"Q8_K", 256, 292, false};
    case GgmlType::iq2_xxs:
      return GgmlTypeInfo{"IQ2_XXS", 256, 66, false};
    case GgmlType::iq2_xs:
      return GgmlTypeInfo{"IQ2_XS", 256, 74, false};
    case GgmlType::iq3_xxs:
      return GgmlTypeInfo{"IQ3_XXS", 256, 98, false};
    case GgmlType::iq1_s:
      return GgmlTypeInfo{"IQ1_S", 256, 50, false};
    case GgmlType::iq4_nl:
      return GgmlTypeInfo{"IQ4_NL", 32, 18, false};
    case GgmlType::iq3_s:
      return GgmlTypeInfo{"IQ3_S", 256, 110, false};
    case GgmlType::iq2_s:
      return GgmlTypeInfo{"IQ2_S", 256, 82, false};
    case GgmlType::iq4_xs:
      return GgmlTypeInfo{"IQ4_XS", 256, 136, false};
    case GgmlType::i8:
      return GgmlTypeInfo{"I8", 1, 1, false};
    case GgmlType::i16:
      return GgmlTypeInfo{"I16", 1, 2, false};
    case GgmlType::i32:
      return GgmlTypeInfo{"I32", 1, 4, false};
    case GgmlType::i64:
      return GgmlTypeInfo{"I64", 1, 8, false};
    case GgmlType::f64:
      return GgmlTypeInfo{"F64", 1, 8, false};
    case GgmlType::iq1_m:
      return GgmlTypeInfo{"IQ1_M", 256, 56, false};
    case GgmlType::tq1_0:
      return GgmlTypeInfo{"TQ1_0", 256, 54, false};
    case GgmlType::tq2_0:
      return GgmlTypeInfo{"TQ2_0", 256, 66, false};
  }
  return std::nullopt;
}

std::string ggml_type_name(GgmlType type) {
  const auto info = ggml_type_info(static_cast<std::uint32_t>(type));
  return info ? info->name : "type " + std::to_string(static_cast<std::uint32_t>(type));
}

void dequantize_gguf(GgmlType type, const std::byte* src, float* dst, std::int64_t count) {
  const auto info = ggml_type_info(static_cast<std::uint32_t>(type));
  OFFGEN_CHECK(info && info->dequantizable && count % info->block == 0,
               "dequantize_gguf: {} x {} is not a whole number of readable blocks",
               ggml_type_name(type), count);
  const auto n = static_cast<std::size_t>(count);
  switch (type) {
    case GgmlType::f32:
      for (std::size_t i = 0; i < n; ++i) dst[i] = load_f32(src + 4 * i);
      return;
    case GgmlType::f16:
      for (std::size_t i = 0; i < n; ++i) dst[i] = load_f16(src + 2 * i);
      return;
    case GgmlType::bf16:
      for (std::size_t i = 0; i < n; ++i) {
        dst[i] = bf16_to_float(BFloat16{load_little_endian<std::uint16_t>(src + 2 * i)});
      }
      return;
    default:
      break;
  }
  const std::int64_t blocks = count / info->block;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::byte* block = src + static_cast<std::size_t>(b) * info->block_bytes;
    float* y = dst + b * info->block;
    switch (type) {
      case GgmlType::q8_0:
        q8_0(block, y);
        break;
      case GgmlType::q4_0:
        q_32(block, y, false, false);
        break;
      case GgmlType::q4_1:
        q_32(block, y, true, false);
        break;
      case GgmlType::q5_0:
        q_32(block, y, false, true);
        break;
      case GgmlType::q5_1:
        q_32(block, y, true, true);
        break;
      case GgmlType::q4_k:
        q_k(block, y, false);
        break;
      case GgmlType::q5_k:
        q_k(block, y, true);
        break;
      case GgmlType::q6_k:
        q6_k(block, y);
        break;
      default:
        fail("dequantize_gguf: {} is not readable", ggml_type_name(type));
    }
  }
}

}  // namespace offgen
