#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {
namespace {

double dot(const Half* a, const Half* b, int k) {
  double sum = 0.0;
  for (int i = 0; i < k; ++i) sum += double{half_to_float(a[i])} * half_to_float(b[i]);
  return sum;
}

}  // namespace

void linear(const LinearArgs& a) {
  const int n = a.out_features;
  const int k = a.in_features;
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
