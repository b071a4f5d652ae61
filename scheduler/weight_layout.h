// The memory of a model's weights under a placement (offload/weight_store.h,
// offload/weight_streamer.h), as layouts (memory_layout.h): the globals always on the gpu tier;
// each layer's first `gpu` share there too, the next `pinned` share in pinned memory and the rest
// on disk (split by bytes at 128-element steps, engine/model/weight_blocks.h lays the tensors out);
// when layers stream, two gpu slots of a whole layer and, with a disk part, two pinned buffers for
// its direct reads. Loading converts each block through two pinned staging buffers, held only
// while the model loads. The store and streamer allocate from this; the planner sums it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/model/opt_config.h"
#include "scheduler/memory_layout.h"
#include "scheduler/placement.h"

namespace offgen {

// Elements of a layer's first `share` kept together on one tier: rounded down to whole
// 128-element steps so every part stays aligned.
std::size_t layer_share_elements(std::size_t elements, double share);

struct WeightLayout {
  std::size_t global_elements = 0;  // the globals' block
  std::size_t layer_elements = 0;   // each layer's block (all alike)
  // Some of each layer lives off the gpu tier: layers run from the streamer's slots.
  bool streamed = false;
  // Each layer's elements on the gpu tier, in pinned memory, on disk (in that order in the layer).
  std::size_t resident_elements = 0;
  std::size_t pinned_elements = 0;
  std::size_t disk_elements = 0;
  MemoryLayout held;     // for the whole run
  MemoryLayout loading;  // only while the model loads
  std::uint64_t disk_bytes = 0;
};

// placement: the shares of each layer's bytes on the gpu tier and in pinned memory (the rest on
// disk).
WeightLayout weight_layout(const OptConfig& config, const WeightPlacement& placement);

}  // namespace offgen
