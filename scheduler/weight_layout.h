// The memory of a model's weights under a placement (offload/weight_store.h,
// offload/weight_streamer.h), as layouts (memory_layout.h): the globals always on the gpu tier;
// each layer's image (scheduler/weight_image.h: its fp16 block, int4- or int8-packed) split by
// bytes — the first `gpu` share there too, the next `pinned` share in pinned memory and the rest on
// disk, at 256-byte steps; when layers stream, two gpu slots of a whole image and, with a disk
// part, two pinned buffers for its direct reads; with int4 weights one gpu block of the fp16 layout
// that each layer is expanded into before its kernels run. Loading converts each block through two
// pinned staging buffers (and packs int4 and int8 layers through two more), held only while the
// model loads. The store and streamer allocate from this; the planner sums it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/core/compression.h"
#include "engine/model/model_config.h"
#include "scheduler/memory_layout.h"
#include "scheduler/placement.h"

namespace offgen {

// Bytes of a layer image's first `share` kept together on one tier: rounded down to whole
// 256-byte steps so every part stays aligned.
std::uint64_t layer_share_bytes(std::uint64_t bytes, double share);

struct WeightLayout {
  Storage storage = Storage::fp16;
  std::size_t global_elements = 0;  // the globals' block (always fp16)
  std::size_t layer_elements = 0;   // each layer's block in the fp16 layout (all alike)
  std::uint64_t layer_bytes = 0;    // each layer's image: what is kept and moved
  // Some of each layer lives off the gpu tier: layers run from the streamer's slots.
  bool streamed = false;
  // Each layer image's bytes on the gpu tier, in pinned memory, on disk (in that order).
  std::uint64_t resident_bytes = 0;
  std::uint64_t pinned_bytes = 0;
  std::uint64_t disk_layer_bytes = 0;
  MemoryLayout held;             // for the whole run
  MemoryLayout loading;          // only while the model loads
  std::uint64_t disk_bytes = 0;  // all layers
};

// placement: the shares of each layer's bytes on the gpu tier and in pinned memory (the rest on
// disk); storage: how the layers are kept.
WeightLayout weight_layout(const ModelConfig& config, const WeightPlacement& placement,
                           Storage storage = Storage::fp16);

}  // namespace offgen
