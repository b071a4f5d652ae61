#include <cmath>
#include <vector>

#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {

void layer_norm(const LayerNormArgs& a) {
  const Half* const x = a.x;
  const Half* const gamma = a.gamma;
  const Half* const beta = a.beta;
  Half* const y = a.y;
  const int dim = a.dim;
  std::vector<double> row(static_cast<std::size_t>(dim));
  for (std::int64_t r = 0; r < a.rows; ++r) {
    // Read the whole row before writing: x and y may alias.
    for (int d = 0; d < dim; ++d) row[d] = half_to_float(x[r * dim + d]);
    double mean = 0.0;
    for (int d = 0; d < dim; ++d) mean += row[d];
    mean /= dim;
    double var = 0.0;
    for (int d = 0; d < dim; ++d) var += (row[d] - mean) * (row[d] - mean);
    var /= dim;  // biased, as torch.nn.LayerNorm
    const double inv_std = 1.0 / std::sqrt(var + double{a.eps});
    for (int d = 0; d < dim; ++d) {
      const double g = gamma != nullptr ? half_to_float(gamma[d]) : 1.0;
      const double b = beta != nullptr ? half_to_float(beta[d]) : 0.0;
      y[r * dim + d] = float_to_half(static_cast<float>((row[d] - mean) * inv_std * g + b));
    }
  }
}

}  // namespace offgen::kernels::reference
