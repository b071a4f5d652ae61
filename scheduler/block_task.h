// One step of a pass of the block schedule (design section 6): a (layer, GPU batch) pair, in the
// zig-zag order — layer by layer, and within a layer GPU batch by GPU batch, so a layer's weights
// are loaded once and shared by every GPU batch. The same value names the task to every stage of
// a pass: the runner's compute, the KV cache's loads and stores, the hidden states' loads and
// stores, the weight streamer's loads.
#pragma once

#include <vector>

#include "scheduler/block_shape.h"

namespace offgen {

struct BlockTask {
  int index = 0;  // issue order within the pass: layer * num_gpu_batches + gpu_batch
  int layer = 0;
  int gpu_batch = 0;  // which of the block's GPU batches
  int num_gpu_batches = 1;
  GpuBatch batch;  // its sequences

  bool first_of_layer() const { return gpu_batch == 0; }
  bool last_of_layer() const { return gpu_batch + 1 == num_gpu_batches; }
};

// Every task of one pass over `layers` layers of a block split into `gpu_batches`, in issue
// order (tasks[i].index == i).
std::vector<BlockTask> pass_tasks(int layers, const std::vector<GpuBatch>& gpu_batches);

}  // namespace offgen
