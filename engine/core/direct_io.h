// Reads that bypass the page cache (O_DIRECT) need their offset, size and memory aligned to the
// file system's block: 4 KiB covers every common one. The disk tier's file lays its segments out
// by it, and the memory planner sizes the pinned buffers such reads land in.
#pragma once

#include <cstddef>

namespace offgen {

inline constexpr std::size_t kDirectIoAlignment = 4096;

// `bytes` rounded up to whole aligned blocks.
constexpr std::size_t direct_io_padded(std::size_t bytes) {
  return (bytes + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment;
}

// A buffer a direct read of `bytes` can land in wherever the allocator puts it: the padded size
// and room to align inside.
constexpr std::size_t direct_io_buffer_bytes(std::size_t bytes) {
  return direct_io_padded(bytes) + kDirectIoAlignment;
}

}  // namespace offgen
