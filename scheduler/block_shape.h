// How a runner splits its batch (design section 6): a block of sequences runs as
// `num_gpu_batches` GPU batches that share each layer's weight load, and the KV placement keeps
// the first share of each GPU batch's sequences on the gpu tier and the rest in pinned memory.
#pragma once

#include <vector>

namespace offgen {

struct BlockShape {
  int num_gpu_batches = 1;
  // Share of each GPU batch's sequences whose KV cache stays on the gpu tier (rounded to the
  // nearest sequence); the rest lives in pinned host memory.
  double kv_gpu_fraction = 1.0;
  // Decode attention of the sequences with host-resident KV runs on the CPU, so only q, the new
  // k, v and the output cross PCIe.
  bool cpu_attention = false;
  // The block's hidden states live in pinned host memory; the gpu tier holds two GPU batches'
  // worth, loaded and stored around each (layer, GPU batch) task (host_activations.h).
  bool activations_on_host = false;
  // quest with host caches attended on the gpu tier and every weight resident: each layer
  // guesses the next one's pages from its own input and gathers them on the copy stream while it
  // computes (OffloadedKv::speculate); the pages attended stay the exact choice's.
  bool speculative_pages = false;

  bool operator==(const BlockShape&) const = default;
};

struct GpuBatch {
  int first = 0;  // its first sequence in the block
  int size = 0;
  int resident = 0;  // sequences [first, first + resident) keep their KV on the gpu tier
  int offloaded() const { return size - resident; }
};

// The GPU batches of a block of `batch` sequences: ceil(batch / num_gpu_batches) sequences each
// (the last may have fewer). Throws offgen::Error for a shape that makes no sense.
std::vector<GpuBatch> split_block(int batch, const BlockShape& shape);

// Why a block of this shape has no page to guess ahead (BlockShape::speculative_pages), or null
// when it has: the policy chooses no pages, no KV is on the host, the host caches are attended
// on the CPU, the weights stream in (too late to guess from), or several GPU batches (the next
// task is another batch's). What the runtime and the cost model both go by.
const char* idle_speculation(const BlockShape& shape, bool selects_pages, bool weights_streamed);

// The sequences per GPU batch split_block gives (the largest batch's size).
int gpu_batch_size(int batch, int num_gpu_batches);

}  // namespace offgen
