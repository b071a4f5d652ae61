// Activation fused into a linear layer's epilogue.
#pragma once

namespace offgen::kernels {

enum class Activation { none, relu };

}  // namespace offgen::kernels
