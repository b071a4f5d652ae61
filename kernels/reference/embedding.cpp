#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {

void gather_rows(const Half* table, std::int64_t /*table_rows*/, int dim, const std::int32_t* ids,
                 std::int64_t n, Half* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    for (int d = 0; d < dim; ++d) out[i * dim + d] = table[std::int64_t{ids[i]} * dim + d];
  }
}

void add_position_embeddings(Half* x, const Half* table, int dim, const std::int32_t* positions,
                             std::int64_t n, int offset) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t row = std::int64_t{positions[i]} + offset;  // padding: -1 + offset
    for (int d = 0; d < dim; ++d) {
      const double sum =
          double{half_to_float(x[i * dim + d])} + half_to_float(table[row * dim + d]);
      x[i * dim + d] = float_to_half(static_cast<float>(sum));
    }
  }
}

}  // namespace offgen::kernels::reference
