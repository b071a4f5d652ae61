// The cuda device's Ops, for code that must not include CUDA headers (the engine). Built without
// the CUDA toolkit, make_cuda_ops throws offgen::Error saying so.
#pragma once

#include <memory>

#include "engine/device/device.h"
#include "kernels/ops.h"

namespace offgen {

std::unique_ptr<Ops> make_cuda_ops(Device& device);

}  // namespace offgen
