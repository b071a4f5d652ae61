#include "scheduler/weight_layout.h"

#include <algorithm>

#include "engine/core/direct_io.h"
#include "engine/core/half.h"
#include "engine/model/weight_blocks.h"

namespace offgen {

std::size_t layer_share_elements(std::size_t elements, double share) {
  return std::min(elements,
                  static_cast<std::size_t>(share * static_cast<double>(elements)) / 128 * 128);
}

WeightLayout weight_layout(const OptConfig& config, const WeightPlacement& placement) {
  WeightLayout w;
  {
    ModelWeights scratch;  // the blocks bind pointers into it; nothing is loaded
    scratch.layers.resize(1);
    w.global_elements = global_weight_block(config, scratch).elements;
    w.layer_elements = layer_weight_block(config, 0, scratch.layers[0]).elements;
  }
  const std::size_t elements = w.layer_elements;
  const double gpu_share = placement.gpu;
  w.streamed = gpu_share < 1.0;
  const bool on_disk = placement.disk() > 1e-9;
  std::size_t host_end = elements;
  w.resident_elements = elements;
  if (w.streamed) {
    w.resident_elements = layer_share_elements(elements, gpu_share);
    if (on_disk) {
      host_end = std::max(w.resident_elements,
                          layer_share_elements(elements, gpu_share + placement.pinned));
    }
  }
  w.pinned_elements = host_end - w.resident_elements;
  w.disk_elements = elements - host_end;

  const int layers = config.num_layers;
  w.held.add("global weights", Tier::gpu, w.global_elements * kHalfBytes);
  w.held.add("resident layer weights", Tier::gpu, w.resident_elements * kHalfBytes, layers);
  w.held.add("pinned layer weights", Tier::pinned, w.pinned_elements * kHalfBytes, layers);
  w.held.add("disk read staging", Tier::pinned,
             w.disk_elements > 0 ? direct_io_buffer_bytes(w.disk_elements * kHalfBytes) : 0, 2);
  w.held.add("streamed layer slots", Tier::gpu, w.streamed ? elements * kHalfBytes : 0, 2);
  w.loading.add("load staging", Tier::pinned,
                std::max(w.global_elements, w.layer_elements) * kHalfBytes, 2);
  w.disk_bytes = static_cast<std::uint64_t>(layers) * w.disk_elements * kHalfBytes;
  return w;
}

}  // namespace offgen
