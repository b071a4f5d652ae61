#include "scheduler/block_shape.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"

namespace offgen {

const char* idle_speculation(const BlockShape& shape, bool selects_pages, bool weights_streamed) {
  if (!selects_pages) return "the policy chooses no pages (only quest does)";
  if (shape.kv_gpu_fraction >= 1.0) {
    return "every KV cache is on the gpu tier, so no page is gathered from the host";
  }
  if (shape.cpu_attention) {
    return "host caches are attended on the CPU, where they lie: nothing is gathered";
  }
  if (weights_streamed) {
    return "the weights stream in layer by layer, too late to guess the next layer's pages";
  }
  if (shape.num_gpu_batches > 1) {
    return "with several GPU batches the next task is another batch's, not the layer above";
  }
  return nullptr;
}

int gpu_batch_size(int batch, int num_gpu_batches) {
  OFFGEN_CHECK(batch > 0 && num_gpu_batches > 0,
               "a block needs positive sizes (batch {}, {} GPU batches)", batch, num_gpu_batches);
  return (batch + num_gpu_batches - 1) / num_gpu_batches;
}

std::vector<GpuBatch> split_block(int batch, const BlockShape& shape) {
  OFFGEN_CHECK(shape.kv_gpu_fraction >= 0.0 && shape.kv_gpu_fraction <= 1.0,
               "the KV share on the gpu tier must be in [0, 1] (got {})", shape.kv_gpu_fraction);
  const int size = gpu_batch_size(batch, shape.num_gpu_batches);
  std::vector<GpuBatch> out;
  for (int first = 0; first < batch; first += size) {
    GpuBatch g;
    g.first = first;
    g.size = std::min(size, batch - first);
    g.resident = static_cast<int>(std::lround(g.size * shape.kv_gpu_fraction));
    out.push_back(g);
  }
  return out;
}

}  // namespace offgen
