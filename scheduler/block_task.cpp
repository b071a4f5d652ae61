#include "scheduler/block_task.h"

namespace offgen {

std::vector<BlockTask> pass_tasks(int layers, const std::vector<GpuBatch>& gpu_batches) {
  const int n = static_cast<int>(gpu_batches.size());
  std::vector<BlockTask> tasks;
  tasks.reserve(static_cast<std::size_t>(layers) * gpu_batches.size());
  for (int l = 0; l < layers; ++l) {
    for (int g = 0; g < n; ++g) {
      tasks.push_back({l * n + g, l, g, n, gpu_batches[static_cast<std::size_t>(g)]});
    }
  }
  return tasks;
}

}  // namespace offgen
