#include <algorithm>
#include <cmath>

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

}  // namespace

void linear(const LinearArgs& a) {
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
