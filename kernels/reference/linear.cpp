#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {
namespace {

double dot(const Half* a, const Half* b, int k) {
  double sum = 0.0;
  for (int i = 0; i < k; ++i) sum += double{half_to_float(a[i])} * half_to_float(b[i]);
  return sum;
}

// An fp16 value rounded to bf16, as fp32 (exact: bf16 has fp32's exponents); 0 past k.
float bf16_of(const Half* v, int index, int k) {
  return index < k ? bf16_to_float(float_to_bf16(half_to_float(v[index]))) : 0.0f;
}

// bf16 prompt rows (kernels/linear_args.h): pairs of k in order, the odd one first, each product
// exact in fp32 and each add rounded once (std::fma is that add, since the product is exact).
float dot_bf16(const Half* a, const Half* b, int k) {
  float sum = 0.0f;
  for (int t = 0; 2 * t < k; ++t) {
    sum = std::fma(bf16_of(a, 2 * t + 1, k), bf16_of(b, 2 * t + 1, k), sum);
    sum = std::fma(bf16_of(a, 2 * t, k), bf16_of(b, 2 * t, k), sum);
  }
  return sum;
}

// kernels/int8_matrix.h's row quantization, in the order it spells out.
float quantize_int8(const Half* v, int len, std::vector<int>& q) {
  q.assign(static_cast<std::size_t>(len), 0);
  float amax = 0.0f;
  for (int c = 0; c < len; ++c) amax = std::max(amax, std::fabs(half_to_float(v[c])));
  if (amax == 0.0f) return 0.0f;
  const float inv = 127.0f / amax;
  for (int c = 0; c < len; ++c) {
    const float r = std::nearbyint(half_to_float(v[c]) * inv);
    q[static_cast<std::size_t>(c)] = static_cast<int>(std::clamp(r, -127.0f, 127.0f));
  }
  return amax / 127.0f;
}

void linear_int8(const LinearArgs& a) {
  const int n = a.out_features;
  const int k = a.in_features;
  const Int8Shape shape{n, k};
  const Int8Matrix& w = *a.weight_int8;
  const auto group = static_cast<int>(Int8Shape::kGroup);
  std::vector<int> qx(static_cast<std::size_t>(k)), part;
  std::vector<float> sx(static_cast<std::size_t>(shape.groups()));
  for (std::int64_t i = 0; i < a.rows; ++i) {
    for (int g = 0; g * group < k; ++g) {
      const int len = std::min(group, k - g * group);
      sx[static_cast<std::size_t>(g)] = quantize_int8(a.x + i * k + g * group, len, part);
      std::copy(part.begin(), part.end(), qx.begin() + g * group);
    }
    for (int j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int g = 0; g * group < k; ++g) {
        std::int64_t acc = 0;
        for (int c = g * group; c < std::min(k, (g + 1) * group); ++c) {
          acc += std::int64_t{qx[static_cast<std::size_t>(c)]} * w.codes[shape.code_index(j, c)];
        }
        sum += static_cast<float>(static_cast<std::int32_t>(acc)) * sx[static_cast<std::size_t>(g)];
      }
      float v = sum * w.scales[j];
      if (a.bias != nullptr) v += half_to_float(a.bias[j]);
      if (a.activation == Activation::relu) v = std::max(v, 0.0f);
      a.y[i * n + j] = float_to_half(v);
    }
  }
}

}  // namespace

void pack_int8_matrix(const Half* w, std::int64_t rows, std::int64_t cols, std::byte* blob) {
  const Int8Shape shape{rows, cols};
  std::memset(blob, 0, shape.bytes());
  auto* scales = reinterpret_cast<float*>(blob);
  auto* sums = reinterpret_cast<std::int32_t*>(blob + shape.sums_offset());
  auto* codes = reinterpret_cast<std::int8_t*>(blob + shape.codes_offset());
  std::vector<int> q;
  for (std::int64_t r = 0; r < rows; ++r) {
    scales[r] = quantize_int8(w + r * cols, static_cast<int>(cols), q);
    for (std::int64_t c = 0; c < cols; ++c) {
      codes[shape.code_index(r, c)] = static_cast<std::int8_t>(q[static_cast<std::size_t>(c)]);
      sums[(c / Int8Shape::kGroup) * shape.rows_padded() + r] += q[static_cast<std::size_t>(c)];
    }
  }
}

void linear(const LinearArgs& a) {
  if (a.weight_int8 != nullptr) {
    linear_int8(a);
    return;
  }
  const int n = a.out_features;
  const int k = a.in_features;
  if (a.prompt_rows && a.prefill_math == PrefillMath::bf16) {
    // The fp32 epilogue of the CPU kernel: bias added in fp32, then relu, then one rounding.
    for (std::int64_t i = 0; i < a.rows; ++i) {
      for (int j = 0; j < n; ++j) {
        float v = dot_bf16(a.x + i * k, a.weight + std::int64_t{j} * k, k);
        if (a.bias != nullptr) v += half_to_float(a.bias[j]);
        if (a.activation == Activation::relu) v = std::max(v, 0.0f);
        a.y[i * n + j] = float_to_half(v);
      }
    }
    return;
  }
  for (std::int64_t i = 0; i < a.rows; ++i) {
    for (int j = 0; j < n; ++j) {
      double v = dot(a.x + i * k, a.weight + std::int64_t{j} * k, k);
      if (a.bias != nullptr) v += half_to_float(a.bias[j]);
      if (a.activation == Activation::relu && v < 0.0) v = 0.0;
      a.y[i * n + j] = float_to_half(static_cast<float>(v));
    }
  }
}

void logits(const LogitsArgs& a) {
  for (std::int64_t i = 0; i < a.rows; ++i) {
    for (int j = 0; j < a.vocab; ++j) {
      a.out[i * a.vocab + j] =
          static_cast<float>(dot(a.x + i * a.dim, a.embed + std::int64_t{j} * a.dim, a.dim));
    }
  }
}

}  // namespace offgen::kernels::reference
