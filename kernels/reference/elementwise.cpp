#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {

void add_inplace(Half* y, const Half* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const double sum = double{half_to_float(y[i])} + half_to_float(x[i]);
    y[i] = float_to_half(static_cast<float>(sum));
  }
}

}  // namespace offgen::kernels::reference
