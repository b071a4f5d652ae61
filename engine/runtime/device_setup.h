// Opens the device a run asks for, with the Ops that run the model on it: `auto` is the first
// CUDA GPU when this build has CUDA and one is visible, else the cpu device.
#pragma once

#include <memory>

#include "engine/core/compression.h"

#include "engine/device/device.h"
#include "kernels/ops.h"

namespace offgen {

enum class DeviceChoice { automatic, cpu, cuda };

struct OpenedDevice {
  std::unique_ptr<Device> device;
  std::unique_ptr<Ops> ops;  // references *device: destroy it first
};

// Throws offgen::Error when cuda is asked for and the build or the machine has none. gpu_slot:
// which visible GPU (modulo their count), so that the ranks of one machine take one each.
// prefill_math and the weights' storage are checked here, where the device is known and before a
// cuda one is looked for (bf16 needs the cpu device on a CPU with AVX512-BF16, or the reference
// kernels; int8 weights the cpu device); the runs that use them pass them on.
OpenedDevice open_device(DeviceChoice choice, const DeviceBudgets& budgets,
                         CpuKernelSet cpu_kernels = CpuKernelSet::optimized, int gpu_slot = 0,
                         kernels::PrefillMath prefill_math = kernels::PrefillMath::fp32,
                         Storage weights = Storage::fp16);

}  // namespace offgen
