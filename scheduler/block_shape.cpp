#include "scheduler/block_shape.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"

namespace offgen {

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
