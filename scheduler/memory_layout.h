// What a component of a run allocates, as a value: each allocation's name, tier and bytes,
// computed by one function per component from the run's shape. The component's constructor
// allocates from that layout, and the memory planner sums the same layouts, so the bytes it plans
// are the bytes the engine takes — there is no second copy of the arithmetic to drift.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/core/half.h"
#include "engine/device/device.h"

namespace offgen {

// Bytes of the elements layouts count in.
inline constexpr std::uint64_t kInt32Bytes = sizeof(std::int32_t);
inline constexpr std::uint64_t kFloatBytes = sizeof(float);
inline constexpr std::uint64_t kHalfBytes = sizeof(Half);

struct Allocation {
  const char* name = "";  // a string literal: what the buffer holds
  Tier tier = Tier::gpu;
  std::uint64_t bytes = 0;  // of each buffer (0: not allocated)
  int count = 1;            // buffers of `bytes` (per layer, per staging slot, ...)

  std::uint64_t total() const { return bytes * static_cast<std::uint64_t>(count); }
};

class MemoryLayout {
 public:
  void add(const char* name, Tier tier, std::uint64_t bytes, int count = 1);
  // Adds every allocation of `part` (a sub-component's layout).
  void append(const MemoryLayout& part);

  const std::vector<Allocation>& allocations() const { return allocations_; }
  // Bytes of every allocation on `tier`.
  std::uint64_t bytes(Tier tier) const;

  // The index-th allocation called `name`, in the order they were added. Throws offgen::Error
  // when there is none: the layout and the constructor allocating from it disagree.
  const Allocation& at(std::string_view name, int index = 0) const;
  // Allocates at(name, index), which must be a single buffer (an empty Buffer for 0 bytes).
  Buffer allocate(Device& device, std::string_view name, int index = 0) const;
  // Allocates every buffer of at(name, index).
  std::vector<Buffer> allocate_all(Device& device, std::string_view name, int index = 0) const;

 private:
  std::vector<Allocation> allocations_;
};

}  // namespace offgen
