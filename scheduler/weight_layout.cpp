#include "scheduler/weight_layout.h"

#include <algorithm>

#include "engine/core/direct_io.h"
#include "engine/core/half.h"
#include "engine/model/weight_blocks.h"
#include "scheduler/weight_image.h"

namespace offgen {

std::uint64_t layer_share_bytes(std::uint64_t bytes, double share) {
  const auto step = kWeightImageAlignment;
  return std::min(bytes,
                  static_cast<std::uint64_t>(share * static_cast<double>(bytes)) / step * step);
}

WeightLayout weight_layout(const ModelConfig& config, const WeightPlacement& placement,
                           Storage storage) {
  WeightLayout w;
  w.storage = storage;
  {
    ModelWeights scratch;  // the blocks bind pointers into it; nothing is loaded
    scratch.layers.resize(1);
    w.global_elements = global_weight_block(config, scratch).elements;
    const WeightBlock layer = layer_weight_block(config, 0, scratch.layers[0]);
    w.layer_elements = layer.elements;
    w.layer_bytes = weight_image(layer, storage).bytes;
  }
  const std::uint64_t bytes = w.layer_bytes;
  const double gpu_share = placement.gpu;
  w.streamed = gpu_share < 1.0;
  const bool on_disk = placement.disk() > 1e-9;
  std::uint64_t host_end = bytes;
  w.resident_bytes = bytes;
  if (w.streamed) {
    w.resident_bytes = layer_share_bytes(bytes, gpu_share);
    if (on_disk) {
      host_end = std::max(w.resident_bytes, layer_share_bytes(bytes, gpu_share + placement.pinned));
    }
  }
  w.pinned_bytes = host_end - w.resident_bytes;
  w.disk_layer_bytes = bytes - host_end;

  const int layers = config.num_layers;
  const bool packed = storage != Storage::fp16;
  const bool expanded = storage == Storage::int4;  // int8 layers are multiplied as they are
  const std::uint64_t layer_fp16 = w.layer_elements * kHalfBytes;
  w.held.add("global weights", Tier::gpu, w.global_elements * kHalfBytes);
  w.held.add("resident layer weights", Tier::gpu, w.resident_bytes, layers);
  w.held.add("pinned layer weights", Tier::pinned, w.pinned_bytes, layers);
  w.held.add("disk read staging", Tier::pinned,
             w.disk_layer_bytes > 0 ? direct_io_buffer_bytes(w.disk_layer_bytes) : 0, 2);
  w.held.add("streamed layer slots", Tier::gpu, w.streamed ? bytes : 0, 2);
  // One block is enough: a layer is expanded on the compute stream right before its kernels, for
  // its first GPU batch, and the next layer's expansion queues behind its last.
  w.held.add("expanded layer", Tier::gpu, expanded ? layer_fp16 : 0);
  w.loading.add("load staging", Tier::pinned,
                std::max(w.global_elements, w.layer_elements) * kHalfBytes, 2);
  w.loading.add("load packing", Tier::pinned, packed ? bytes : 0, 2);
  w.disk_bytes = static_cast<std::uint64_t>(layers) * w.disk_layer_bytes;
  return w;
}

}  // namespace offgen
