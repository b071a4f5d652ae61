// Built with -ffp-contract=off (kernels/CMakeLists.txt): fast_exp's polynomial contracted into
// FMAs in the AVX2 / AVX-512 clones would differ from the reference in the last bit.
#include "kernels/cpu/gated_mlp.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>

#include "kernels/cpu/vector_math.h"

namespace offgen::kernels::cpu {
namespace {

// Columns per piece: two fp32 stack buffers and one fp16 one, L1-sized.
constexpr int kBlock = 2048;

// g[i] = silu(g[i]) in fp32.
OFFGEN_SIMD_CLONES void silu_inplace(float* g, int n) {
#pragma omp simd
  for (int i = 0; i < n; ++i) g[i] = g[i] / (1.0f + fast_exp(-g[i]));
}

}  // namespace

void silu_mul(const SiluMulArgs& args) {
  const std::int64_t rows = args.rows;
  const int ffn = args.ffn;
  if (rows <= 0 || ffn <= 0) return;
  // Parallel over (row, column block) pieces, so a decode step's few rows still spread out.
  const std::int64_t blocks_per_row = (ffn + kBlock - 1) / kBlock;
  const std::int64_t pieces = rows * blocks_per_row;
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, pieces, 4), [&](const auto& r) {
    float g[kBlock];
    float u[kBlock];
    Half rounded[kBlock];
    for (std::int64_t piece = r.begin(); piece != r.end(); ++piece) {
      const std::int64_t row = piece / blocks_per_row;
      const int i0 = static_cast<int>(piece % blocks_per_row) * kBlock;
      const int count = std::min(kBlock, ffn - i0);
      const auto n = static_cast<std::size_t>(count);
      const Half* const gate = args.gate_up + row * 2 * ffn + i0;
      half_to_float(gate, g, n);
      half_to_float(gate + ffn, u, n);
      silu_inplace(g, count);
      float_to_half(g, rounded, n);  // half(silu(g))
      half_to_float(rounded, g, n);
#pragma omp simd
      for (int i = 0; i < count; ++i) g[i] *= u[i];  // fp16 · fp16: exact in fp32
      float_to_half(g, args.out + row * ffn + i0, n);
    }
  });
}

}  // namespace offgen::kernels::cpu
