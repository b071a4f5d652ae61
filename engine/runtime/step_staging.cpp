#include "engine/runtime/step_staging.h"

#include <cstring>
#include <utility>

#include "engine/core/error.h"

namespace offgen {

StepStaging::StepStaging(Device& device, Buffer staging)
    : device_(device), compute_(device.stream(StreamRole::compute)), staging_(std::move(staging)) {}

void StepStaging::upload(void* device_dst, const void* host_src, std::size_t bytes) {
  // 16-byte steps keep every part as aligned as the arrays copied out of it.
  const std::size_t aligned = (bytes + 15) / 16 * 16;
  OFFGEN_CHECK(used_ + aligned <= staging_.bytes(), "step staging overflow");
  auto* host = static_cast<std::byte*>(staging_.data()) + used_;
  std::memcpy(host, host_src, bytes);
  used_ += aligned;
  device_.copy_async(device_dst, host, bytes, compute_);
}

}  // namespace offgen
