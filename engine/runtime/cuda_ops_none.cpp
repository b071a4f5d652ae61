// make_cuda_ops in a build without the CUDA toolkit.
#include "engine/core/error.h"
#include "engine/runtime/cuda_ops_factory.h"

namespace offgen {

std::unique_ptr<Ops> make_cuda_ops(Device& device) {
  fail(
      "this build of offgen has no CUDA support (built without the CUDA toolkit), so it cannot "
      "run on {}; rebuild with the toolkit in /usr/local/cuda",
      device.name());
}

}  // namespace offgen
