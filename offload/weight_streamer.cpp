#include "offload/weight_streamer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/core/error.h"

namespace offgen {

WeightStreamer::WeightStreamer(Device& device, WeightStore& store, int layers)
    : device_(device),
      store_(store),
      layers_(layers),
      copies_(device.stream(StreamRole::h2d_weights)) {
  const std::size_t bytes = store.largest_layer_elements() * sizeof(Half);
  for (int s = 0; s < 2; ++s) {
    slots_[s] = device.allocate(Tier::gpu, bytes);
    loaded_[s] = device.create_event();
    released_[s] = device.create_event();
  }
}

WeightStreamer::~WeightStreamer() {
  // Queued copies still write into the slots.
  try {
    copies_.synchronize();
  } catch (const std::exception& e) {
    spdlog::warn("weight streamer: copy stream failed while shutting down: {}", e.what());
  }
}

std::uint64_t WeightStreamer::slot_bytes() const {
  return slots_[0].bytes() + slots_[1].bytes();
}

void WeightStreamer::load(int layer) {
  const int s = layer % 2;
  released_[s]->wait_on(copies_);  // the kernels that read this slot last have run
  store_.load_layer(layer, slots_[s].as<Half>(), copies_);
  loaded_[s]->record(copies_);
  bytes_moved_ += store_.offloaded_bytes(layer);
}

void WeightStreamer::begin_pass() {
  for (int l = 0; l < std::min(2, layers_); ++l) load(l);
}

void WeightStreamer::acquire(int layer, Stream& compute) {
  OFFGEN_CHECK(layer >= 0 && layer < layers_, "weight streamer: no layer {}", layer);
  const int s = layer % 2;
  loaded_[s]->wait_on(compute);
  store_.bind_layer(layer, slots_[s].as<Half>());
}

void WeightStreamer::release(int layer, Stream& compute) {
  const int s = layer % 2;
  released_[s]->record(compute);
  if (layer + 2 < layers_) load(layer + 2);
  // The last layer's kernels waited for every read of this pass: a failed one becomes the
  // compute stream's error, so the pass's results are never read as if it had succeeded.
  if (layer == layers_ - 1) store_.check_disk_reads(compute);
}

}  // namespace offgen
