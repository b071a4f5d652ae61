#include "engine/device/device.h"

#include <spdlog/spdlog.h>

#include "engine/core/error.h"
#include "engine/core/units.h"

namespace offgen {

std::string_view tier_name(Tier tier) {
  switch (tier) {
    case Tier::gpu:
      return "gpu";
    case Tier::pinned:
      return "pinned";
    case Tier::host:
      return "host";
  }
  return "?";
}

std::string_view device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::cpu:
      return "cpu";
    case DeviceKind::cuda:
      return "cuda";
  }
  return "?";
}

std::string_view stream_role_name(StreamRole role) {
  switch (role) {
    case StreamRole::compute:
      return "compute";
    case StreamRole::h2d_weights:
      return "h2d-weights";
    case StreamRole::h2d_kv:
      return "h2d-kv";
    case StreamRole::d2h_kv:
      return "d2h-kv";
    case StreamRole::disk_read:
      return "disk-read";
  }
  return "?";
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    device_ = std::exchange(other.device_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    tier_ = other.tier_;
  }
  return *this;
}

void Buffer::reset() noexcept {
  if (device_ != nullptr && data_ != nullptr) device_->release(tier_, data_, bytes_);
  device_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

Device::Device(const DeviceBudgets& budgets) {
  usage_[static_cast<int>(Tier::gpu)].budget = budgets.gpu;
  usage_[static_cast<int>(Tier::pinned)].budget = budgets.pinned;
  usage_[static_cast<int>(Tier::host)].budget = budgets.host;
}

Buffer Device::allocate(Tier tier, std::size_t bytes) {
  if (bytes == 0) return Buffer(this, nullptr, 0, tier);
  {
    std::lock_guard lock(accounting_mutex_);
    TierUsage& u = usage_[static_cast<int>(tier)];
    if (bytes > u.budget - u.used) {  // used <= budget always: no wrap-around
      throw OutOfMemoryError(fmt::format(
          "{} device: cannot allocate {} on the {} tier: {} of its {} budget already in use",
          device_kind_name(kind()), format_bytes(bytes), tier_name(tier), format_bytes(u.used),
          format_bytes(u.budget)));
    }
    u.used += bytes;
    u.peak = std::max(u.peak, u.used);
  }
  void* data = nullptr;
  try {
    data = raw_allocate(tier, bytes);
  } catch (...) {
    std::lock_guard lock(accounting_mutex_);
    usage_[static_cast<int>(tier)].used -= bytes;
    throw;
  }
  return Buffer(this, data, bytes, tier);
}

void Device::release(Tier tier, void* data, std::size_t bytes) noexcept {
  raw_free(tier, data, bytes);
  std::lock_guard lock(accounting_mutex_);
  usage_[static_cast<int>(tier)].used -= bytes;
}

TierUsage Device::usage(Tier tier) const {
  std::lock_guard lock(accounting_mutex_);
  return usage_[static_cast<int>(tier)];
}

void Device::reset_peaks() {
  std::lock_guard lock(accounting_mutex_);
  for (TierUsage& u : usage_) u.peak = u.used;
}

void Device::synchronize() {
  for (int role = 0; role < kNumStreamRoles; ++role)
    stream(static_cast<StreamRole>(role)).synchronize();
}

}  // namespace offgen
