#include "kernels/cpu/elementwise.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>

namespace offgen::kernels::cpu {

void add_inplace(Half* y, const Half* x, std::int64_t n) {
  // Blocks small enough for two fp32 stack buffers, large enough to amortise a task.
  constexpr std::int64_t kBlock = 4096;
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, 4 * kBlock), [&](const auto& r) {
    float a[kBlock];
    float b[kBlock];
    for (std::int64_t i0 = r.begin(); i0 < r.end(); i0 += kBlock) {
      const std::int64_t count = std::min(kBlock, r.end() - i0);
      const auto c = static_cast<std::size_t>(count);
      half_to_float(y + i0, a, c);
      half_to_float(x + i0, b, c);
#pragma omp simd
      for (std::int64_t i = 0; i < count; ++i) a[i] += b[i];
      float_to_half(a, y + i0, c);
    }
  });
}

}  // namespace offgen::kernels::cpu
