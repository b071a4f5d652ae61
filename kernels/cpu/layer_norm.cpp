#include "kernels/cpu/layer_norm.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace offgen::kernels::cpu {

void layer_norm(const LayerNormArgs& args) {
  const Half* const x = args.x;
  const Half* const gamma = args.gamma;
  const Half* const beta = args.beta;
  Half* const y = args.y;
  const std::int64_t rows = args.rows;
  const int dim = args.dim;
  const float eps = args.eps;
  if (rows <= 0 || dim <= 0) return;
  const auto d = static_cast<std::size_t>(dim);
  // Affine parameters in fp32 once per call; absent ones are 1 and 0.
  std::vector<float> g(d, 1.0f);
  std::vector<float> b(d, 0.0f);
  if (gamma != nullptr) half_to_float(gamma, g.data(), d);
  if (beta != nullptr) half_to_float(beta, b.data(), d);
  const std::int64_t grain = std::max<std::int64_t>(1, 16384 / dim);
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, grain), [&](const auto& r) {
    thread_local std::vector<float> buffer;
    buffer.resize(d);
    float* v = buffer.data();
    const float* pg = g.data();
    const float* pb = b.data();
    for (std::int64_t row = r.begin(); row != r.end(); ++row) {
      // The whole row is read into v before y is written, so x may alias y.
      half_to_float(x + row * dim, v, d);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < dim; ++j) sum += v[j];
      const float mean = sum / static_cast<float>(dim);
      // Second pass over the centred values: no cancellation from E[x²] − E[x]².
      float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
      for (int j = 0; j < dim; ++j) squares += (v[j] - mean) * (v[j] - mean);
      const float inv_std = 1.0f / std::sqrt(squares / static_cast<float>(dim) + eps);
#pragma omp simd
      for (int j = 0; j < dim; ++j) v[j] = (v[j] - mean) * inv_std * pg[j] + pb[j];
      float_to_half(v, y + row * dim, d);
    }
  });
}

}  // namespace offgen::kernels::cpu
