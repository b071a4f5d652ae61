#include "scheduler/memory_layout.h"

#include "engine/core/error.h"

namespace offgen {

void MemoryLayout::add(const char* name, Tier tier, std::uint64_t bytes, int count) {
  allocations_.push_back({name, tier, bytes, count});
}

void MemoryLayout::append(const MemoryLayout& part) {
  allocations_.insert(allocations_.end(), part.allocations_.begin(), part.allocations_.end());
}

std::uint64_t MemoryLayout::bytes(Tier tier) const {
  std::uint64_t total = 0;
  for (const Allocation& a : allocations_) {
    if (a.tier == tier) total += a.total();
  }
  return total;
}

const Allocation& MemoryLayout::at(std::string_view name, int index) const {
  int seen = 0;
  for (const Allocation& a : allocations_) {
    if (a.name == name && seen++ == index) return a;
  }
  fail("memory layout: no allocation '{}' #{} (the layout and its allocator disagree)", name,
       index);
}

Buffer MemoryLayout::allocate(Device& device, std::string_view name, int index) const {
  const Allocation& a = at(name, index);
  OFFGEN_CHECK(a.count == 1, "memory layout: '{}' is {} buffers, not one", name, a.count);
  return device.allocate(a.tier, a.bytes);
}

std::vector<Buffer> MemoryLayout::allocate_all(Device& device, std::string_view name,
                                               int index) const {
  const Allocation& a = at(name, index);
  std::vector<Buffer> out;
  out.reserve(static_cast<std::size_t>(a.count));
  for (int i = 0; i < a.count; ++i) out.push_back(device.allocate(a.tier, a.bytes));
  return out;
}

}  // namespace offgen
