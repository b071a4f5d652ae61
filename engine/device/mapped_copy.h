// Small host-to-gpu copies done by a kernel that reads pinned host memory through its mapping,
// instead of by a copy engine.
//
// Why: the copy engine serving host-to-gpu copies runs them in the order they were queued,
// across streams. An offloaded decode step queues a layer's weights (hundreds of MiB) on the
// weight stream, then, per GPU batch, the cpu attention's output (a few hundred KiB) on the KV
// stream: behind a weight copy the output waits for all of it, and the GPU batch's remaining
// layer waits with it, so weight loads and cpu attention ran one after the other instead of side
// by side. A kernel's loads go over PCIe without the copy engine, so the small copy lands as soon
// as the stream reaches it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace offgen {

// The largest copy made this way: above it a copy engine's bandwidth is worth the queueing.
inline constexpr std::size_t kMappedCopyMaxBytes = std::size_t{4} << 20;

// Enqueues on `stream` a kernel copying `bytes` from `src` (a device-visible pointer to pinned
// host memory: the devicePointer of cudaPointerGetAttributes) to `dst` (gpu memory).
void enqueue_mapped_copy(void* dst, const void* src, std::size_t bytes, cudaStream_t stream);

}  // namespace offgen
