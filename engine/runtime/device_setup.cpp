#include "engine/runtime/device_setup.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/core/parameter_error.h"
#include "engine/device/cpu_device.h"
#include "engine/device/cuda_probe.h"
#include "engine/device/make_device.h"
#include "engine/runtime/cpu_ops.h"
#include "engine/runtime/cuda_ops_factory.h"
#include "kernels/cpu/cpu_features.h"
#include "offload/weight_store.h"

namespace offgen {

OpenedDevice open_device(DeviceChoice choice, const DeviceBudgets& budgets,
                         CpuKernelSet cpu_kernels, int gpu_slot, kernels::PrefillMath prefill_math,
                         Storage weights) {
  const auto gpus = list_cuda_gpus();
  if (choice == DeviceChoice::automatic) {
    choice = gpus.empty() ? DeviceChoice::cpu : DeviceChoice::cuda;
  }
  OpenedDevice opened;
  if (choice == DeviceChoice::cuda) {
    OFFGEN_CHECK_NAMING(prefill_math == kernels::PrefillMath::fp32, [](ParameterNamer name) {
      return fmt::format(
          "{} bf16 is for the cpu device (AVX512-BF16 dot products), and this run is on cuda: "
          "leave it out, or give {} cpu",
          name(Parameter::prefill_math), name(Parameter::device));
    });
    OFFGEN_CHECK_NAMING(weights != Storage::int8,
                        [](ParameterNamer name) { return int8_weights_need_the_cpu(name); });
    OFFGEN_CHECK_NAMING(built_with_cuda(), [](ParameterNamer name) {
      return fmt::format(
          "{} cuda: this build of offgen has no CUDA support (the toolkit was not found at build "
          "time)",
          name(Parameter::device));
    });
    OFFGEN_CHECK_NAMING(!gpus.empty(), [](ParameterNamer name) {
      return fmt::format(
          "{} cuda: no CUDA GPU is visible (driver missing, or CUDA_VISIBLE_DEVICES hides them); "
          "use {} cpu",
          name(Parameter::device), name(Parameter::device));
    });
    const auto slot = static_cast<std::size_t>(std::max(gpu_slot, 0)) % gpus.size();
    opened.device = make_cuda_device(gpus[slot].index, budgets);
    opened.ops = make_cuda_ops(*opened.device);
  } else {
    auto cpu = std::make_unique<CpuDevice>(budgets);
    if (prefill_math == kernels::PrefillMath::bf16 && cpu_kernels == CpuKernelSet::optimized) {
      OFFGEN_CHECK_NAMING(kernels::cpu::cpu_features().bf16_gemm(), [](ParameterNamer name) {
        return fmt::format(
            "{} bf16 needs a CPU with AVX512-BF16 (vdpbf16ps), and this one has none: leave "
            "{} out (fp32, exact)",
            name(Parameter::prefill_math), name(Parameter::prefill_math));
      });
    }
    opened.ops = std::make_unique<CpuOps>(*cpu, cpu_kernels);
    opened.device = std::move(cpu);
  }
  return opened;
}

}  // namespace offgen
