#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {

void gather_rows(const GatherRowsArgs& a) {
  for (std::int64_t i = 0; i < a.rows; ++i) {
    for (int d = 0; d < a.dim; ++d) {
      a.out[i * a.dim + d] = a.table[std::int64_t{a.ids[i]} * a.dim + d];
    }
  }
}

void add_position_embeddings(const PositionEmbeddingArgs& a) {
  for (std::int64_t i = 0; i < a.rows; ++i) {
    const std::int64_t row = std::int64_t{a.positions[i]} + a.offset;  // padding: -1 + offset
    for (int d = 0; d < a.dim; ++d) {
      Half& x = a.x[i * a.dim + d];
      const double sum = double{half_to_float(x)} + half_to_float(a.table[row * a.dim + d]);
      x = float_to_half(static_cast<float>(sum));
    }
  }
}

}  // namespace offgen::kernels::reference
