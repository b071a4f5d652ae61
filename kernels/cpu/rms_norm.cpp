#include "kernels/cpu/rms_norm.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/vector_math.h"

namespace offgen::kernels::cpu {
namespace {

constexpr int kLanes = 32;  // the header's partial sums

// Sum of v[j]^2 in the header's order: lane k sums j ≡ k (mod 32) in increasing j, then the lanes
// are halved pairwise. The lane array is the loop's vector accumulator whatever the ISA (8 SSE,
// 4 AVX2 or 2 AVX-512 registers), so the bits do not depend on the machine. A contracted
// acc + v·v is the same value: the square of an fp16 value is exact in fp32.
OFFGEN_SIMD_CLONES float sum_of_squares(const float* v, int dim) {
  float acc[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= dim; j += kLanes) {
#pragma omp simd
    for (int k = 0; k < kLanes; ++k) acc[k] += v[j + k] * v[j + k];
  }
  for (int k = 0; j + k < dim; ++k) acc[k] += v[j + k] * v[j + k];
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int k = 0; k < width; ++k) acc[k] += acc[k + width];
  }
  return acc[0];
}

OFFGEN_SIMD_CLONES void scale(float* v, const float* factors, int n) {
#pragma omp simd
  for (int j = 0; j < n; ++j) v[j] *= factors[j];
}

}  // namespace

void rms_norm(const RmsNormArgs& args) {
  const Half* const x = args.x;
  Half* const y = args.y;
  const std::int64_t rows = args.rows;
  const int dim = args.dim;
  const float eps = args.eps;
  if (rows <= 0 || dim <= 0) return;
  const auto d = static_cast<std::size_t>(dim);
  std::vector<float> g(d);
  half_to_float(args.gamma, g.data(), d);
  const std::int64_t grain = std::max<std::int64_t>(1, 16384 / dim);
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, grain), [&](const auto& r) {
    thread_local std::vector<float> buffer;
    buffer.resize(d);
    float* const v = buffer.data();
    const float* const pg = g.data();
    for (std::int64_t row = r.begin(); row != r.end(); ++row) {
      // The whole row is read into v before y is written, so x may alias y; from then on the
      // output row is free to hold the fp16 intermediate.
      half_to_float(x + row * dim, v, d);
      const float inv_rms =
          1.0f / std::sqrt(sum_of_squares(v, dim) / static_cast<float>(dim) + eps);
      Half* const out = y + row * dim;
#pragma omp simd
      for (int j = 0; j < dim; ++j) v[j] *= inv_rms;
      float_to_half(v, out, d);  // half(x · rsqrt(...)), as Hugging Face rounds before the weight
      half_to_float(out, v, d);
      scale(v, pg, dim);  // fp16 · fp16: exact in fp32
      float_to_half(v, out, d);
    }
  });
}

}  // namespace offgen::kernels::cpu
