#include "kernels/cpu/embedding.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace offgen::kernels::cpu {
namespace {

// Rows per task: ~16K elements, so tiny calls do not pay for many tasks.
std::int64_t row_grain(int dim) {
  return std::max<std::int64_t>(1, 16384 / std::max(dim, 1));
}

}  // namespace

void gather_rows(const GatherRowsArgs& args) {
  const Half* const table = args.table;
  const std::int32_t* const ids = args.ids;
  Half* const out = args.out;
  const std::int64_t n = args.rows;
  const int dim = args.dim;
  const auto bytes = static_cast<std::size_t>(dim) * sizeof(Half);
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, row_grain(dim)), [&](const auto& r) {
    for (std::int64_t i = r.begin(); i != r.end(); ++i) {
      std::memcpy(out + i * dim, table + std::int64_t{ids[i]} * dim, bytes);
    }
  });
}

void add_position_embeddings(const PositionEmbeddingArgs& args) {
  Half* const x = args.x;
  const Half* const table = args.table;
  const std::int32_t* const positions = args.positions;
  const std::int64_t n = args.rows;
  const int dim = args.dim;
  const int offset = args.offset;
  const auto d = static_cast<std::size_t>(dim);
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n, row_grain(dim)), [&](const auto& r) {
    thread_local std::vector<float> a;
    thread_local std::vector<float> b;
    a.resize(d);
    b.resize(d);
    for (std::int64_t i = r.begin(); i != r.end(); ++i) {
      const std::int64_t row = std::int64_t{positions[i]} + offset;  // padding: -1 + offset
      half_to_float(x + i * dim, a.data(), d);
      half_to_float(table + row * dim, b.data(), d);
      float* pa = a.data();
      const float* pb = b.data();
#pragma omp simd
      for (int j = 0; j < dim; ++j) pa[j] += pb[j];
      float_to_half(pa, x + i * dim, d);
    }
  });
}

}  // namespace offgen::kernels::cpu
