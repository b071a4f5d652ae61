#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {
namespace {

double dot(const Half* a, const Half* b, int k) {
  double sum = 0.0;
  for (int i = 0; i < k; ++i) sum += double{half_to_float(a[i])} * half_to_float(b[i]);
  return sum;
}

}  // namespace

void linear(const Half* x, const Half* weight, const Half* bias, Half* y, std::int64_t m, int n,
            int k, Activation activation) {
  for (std::int64_t i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double v = dot(x + i * k, weight + std::int64_t{j} * k, k);
      if (bias != nullptr) v += half_to_float(bias[j]);
      if (activation == Activation::relu && v < 0.0) v = 0.0;
      y[i * n + j] = float_to_half(static_cast<float>(v));
    }
  }
}

void logits(const Half* x, const Half* embed, float* out, std::int64_t m, int vocab, int dim) {
  for (std::int64_t i = 0; i < m; ++i) {
    for (int j = 0; j < vocab; ++j) {
      out[i * vocab + j] = static_cast<float>(dot(x + i * dim, embed + std::int64_t{j} * dim, dim));
    }
  }
}

}  // namespace offgen::kernels::reference
