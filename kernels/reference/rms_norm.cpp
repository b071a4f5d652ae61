#include <cmath>
#include <vector>

#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {

void rms_norm(const RmsNormArgs& a) {
  const int dim = a.dim;
  std::vector<float> row(static_cast<std::size_t>(dim));
  for (std::int64_t r = 0; r < a.rows; ++r) {
    // Read the whole row before writing: x and y may alias.
    for (int j = 0; j < dim; ++j) row[j] = half_to_float(a.x[r * dim + j]);
    // The sum of squares in the order kernels/rms_norm_args.h fixes: 32 strided partial sums,
    // then halved pairwise.
    float partial[32] = {};
    for (int j = 0; j < dim; ++j) partial[j % 32] += row[j] * row[j];
    for (int width = 16; width >= 1; width /= 2) {
      for (int k = 0; k < width; ++k) partial[k] += partial[k + width];
    }
    const float mean_square = partial[0] / static_cast<float>(dim);
    const float inv_rms = 1.0f / std::sqrt(mean_square + a.eps);
    for (int j = 0; j < dim; ++j) {
      const Half normalized = float_to_half(row[j] * inv_rms);
      a.y[r * dim + j] = float_to_half(half_to_float(a.gamma[j]) * half_to_float(normalized));
    }
  }
}

}  // namespace offgen::kernels::reference
