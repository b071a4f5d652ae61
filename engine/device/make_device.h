// Creating a device without including its implementation's headers: the engine calls this whether
// or not the build has CUDA (a build without it throws offgen::Error saying so).
#pragma once

#include <memory>

#include "engine/device/device.h"

namespace offgen {

// The cuda device on GPU `gpu_index` (cuda_device.h; zero budgets take its defaults). Throws
// offgen::Error when this build has no CUDA or there is no such GPU.
std::unique_ptr<Device> make_cuda_device(int gpu_index, const DeviceBudgets& budgets);

}  // namespace offgen
