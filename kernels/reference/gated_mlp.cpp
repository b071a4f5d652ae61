#include "kernels/cpu/vector_math.h"
#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {

void silu_mul(const SiluMulArgs& a) {
  const int ffn = a.ffn;
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const Half* const gate = a.gate_up + r * 2 * ffn;
    const Half* const up = gate + ffn;
    for (int i = 0; i < ffn; ++i) {
      const float g = half_to_float(gate[i]);
      // exp is fast_exp, as kernels/gated_mlp_args.h says (this file is built without FMA
      // contraction, as the CPU kernel is).
      const Half silu = float_to_half(g / (1.0f + cpu::fast_exp(-g)));
      a.out[r * ffn + i] = float_to_half(half_to_float(silu) * half_to_float(up[i]));
    }
  }
}

}  // namespace offgen::kernels::reference
