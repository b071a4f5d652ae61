// The cuda device of a build without CUDA: asking for one says how to get one.
#include "engine/device/make_device.h"

#ifndef OFFGEN_WITH_CUDA
#include "engine/core/error.h"

namespace offgen {

std::unique_ptr<Device> make_cuda_device(int, const DeviceBudgets&) {
  throw Error("this build has no CUDA; rebuild with the CUDA toolkit");
}

}  // namespace offgen
#endif
