#include <cmath>

#include "engine/core/error.h"
#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {

void rotary(const RotaryArgs& a) {
  const int dim = a.head_dim;
  OFFGEN_CHECK(dim % 2 == 0, "rotary: head_dim {} is odd", dim);
  const int half_dim = dim / 2;
  const std::int64_t width = std::int64_t{a.heads + 2 * a.kv_heads} * dim;
  const auto h = [](float v) { return half_to_float(float_to_half(v)); };  // round to fp16
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const std::int32_t position = a.positions[r] < 0 ? 0 : a.positions[r];
    // q heads then k heads: the first heads + kv_heads head rows of the token; v follows.
    for (int head = 0; head < a.heads + a.kv_heads; ++head) {
      Half* const x = a.qkv + r * width + std::int64_t{head} * dim;
      for (int i = 0; i < half_dim; ++i) {
        const float angle = static_cast<float>(position) * a.inv_freq[i];
        const float c = h(std::cos(angle) * a.attention_scaling);
        const float s = h(std::sin(angle) * a.attention_scaling);
        const float x1 = half_to_float(x[i]);
        const float x2 = half_to_float(x[i + half_dim]);
        x[i] = float_to_half(h(x1 * c) - h(x2 * s));
        x[i + half_dim] = float_to_half(h(x2 * c) + h(x1 * s));
      }
    }
  }
}

}  // namespace offgen::kernels::reference
