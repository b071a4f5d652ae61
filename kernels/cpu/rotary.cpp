// Two passes: the fp16 cos / sin of every (row, i), once per row in parallel over rows (libm calls
// are most of the op's cost, and every head of a token shares them), then the rotation in parallel
// over (row, head) pairs. The rotation rounds each product to fp16 through the bulk F16C
// conversions, so its loops stay vectorised and still round exactly as the reference does.
#include "kernels/cpu/rotary.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/core/error.h"
#include "kernels/cpu/vector_math.h"

namespace offgen::kernels::cpu {
namespace {

float round_to_half(float v) {
  return half_to_float(float_to_half(v));
}

// Scratch of one thread: the head row in fp32 (dim), its four products (2 dim) in fp32 and fp16.
struct Scratch {
  std::vector<float> values, products;
  std::vector<Half> rounded;
};

// Rotates one head row x of `dim` values with the row's cos / sin (`half` values each).
OFFGEN_SIMD_CLONES void rotate_head(Half* x, const float* c, const float* s, int dim,
                                    Scratch& scratch) {
  const int half = dim / 2;
  const auto d = static_cast<std::size_t>(dim);
  float* const v = scratch.values.data();
  float* const p = scratch.products.data();
  half_to_float(x, v, d);
  // p = [x1·c, x2·s, x2·c, x1·s] (x1 = v[0, half), x2 = v[half, dim)), then each rounded to fp16.
#pragma omp simd
  for (int i = 0; i < half; ++i) {
    p[i] = v[i] * c[i];
    p[half + i] = v[half + i] * s[i];
    p[dim + i] = v[half + i] * c[i];
    p[dim + half + i] = v[i] * s[i];
  }
  float_to_half(p, scratch.rounded.data(), 2 * d);
  half_to_float(scratch.rounded.data(), p, 2 * d);
#pragma omp simd
  for (int i = 0; i < half; ++i) {
    v[i] = p[i] - p[half + i];
    v[half + i] = p[dim + i] + p[dim + half + i];
  }
  float_to_half(v, x, d);
}

}  // namespace

void rotary(const RotaryArgs& args) {
  const std::int64_t rows = args.rows;
  const int dim = args.head_dim;
  OFFGEN_CHECK(dim % 2 == 0, "rotary: head_dim {} is odd (the rotation pairs i with i + {} / 2)",
               dim, dim);
  const int half = dim / 2;
  const int rotated_heads = args.heads + args.kv_heads;  // q and k; v is not touched
  if (rows <= 0 || half <= 0 || rotated_heads <= 0) return;
  const std::int64_t width = std::int64_t{args.heads + 2 * args.kv_heads} * dim;

  // cos_sin[r] = [c_0 .. c_{half-1}, s_0 .. s_{half-1}] for row r, fp16 values held in fp32.
  std::vector<float> cos_sin(static_cast<std::size_t>(rows) * static_cast<std::size_t>(dim));
  const std::int64_t table_grain = std::max<std::int64_t>(1, 256 / half);
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, table_grain), [&](const auto& r) {
    for (std::int64_t row = r.begin(); row != r.end(); ++row) {
      const std::int32_t position = std::max(args.positions[row], std::int32_t{0});
      float* const c = cos_sin.data() + row * dim;
      float* const s = c + half;
      for (int i = 0; i < half; ++i) {
        const float angle = static_cast<float>(position) * args.inv_freq[i];
        c[i] = round_to_half(std::cos(angle) * args.attention_scaling);
        s[i] = round_to_half(std::sin(angle) * args.attention_scaling);
      }
    }
  });

  const std::int64_t head_rows = rows * rotated_heads;
  const std::int64_t grain = std::max<std::int64_t>(1, 16384 / dim);
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, head_rows, grain), [&](const auto& r) {
    thread_local Scratch scratch;
    scratch.values.resize(static_cast<std::size_t>(dim));
    scratch.products.resize(2 * static_cast<std::size_t>(dim));
    scratch.rounded.resize(2 * static_cast<std::size_t>(dim));
    for (std::int64_t index = r.begin(); index != r.end(); ++index) {
      const std::int64_t row = index / rotated_heads;
      const std::int64_t head = index % rotated_heads;
      const float* const c = cos_sin.data() + row * dim;
      rotate_head(args.qkv + row * width + head * dim, c, c + half, dim, scratch);
    }
  });
}

}  // namespace offgen::kernels::cpu
