#include "offload/weight_streamer.h"

#include <spdlog/spdlog.h>

#include "engine/core/error.h"

namespace offgen {

WeightStreamer::WeightStreamer(Device& device, WeightStore& store, int layers)
    : store_(store),
      layers_(layers),
      copies_(device.stream(StreamRole::h2d_weights)),
      streams_(store.streamed()) {
  if (!streams_) return;
  std::vector<Buffer> slots = store.layout().held.allocate_all(device, "streamed layer slots");
  for (int s = 0; s < 2; ++s) {
    slots_[s] = std::move(slots[static_cast<std::size_t>(s)]);
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

void WeightStreamer::load(std::uint64_t n) {
  if (!streams_) return;
  const auto s = static_cast<int>(n % 2);
  const auto layer = static_cast<int>((n - epoch_) % static_cast<std::uint64_t>(layers_));
  released_[s]->wait_on(copies_);  // the kernels that read this slot last have run
  store_.load_layer(layer, slots_[s].as<std::byte>(), copies_);
  loaded_[s]->record(copies_);
}

void WeightStreamer::begin_pass() {
  if (in_pass_) {
    // The previous pass stopped early: its loads in flight may not be the layers this pass
    // starts with. Number afresh from the next unused load (the slots' events keep the order).
    epoch_ = next_load_;
    started_ = false;
  }
  pass_start_ = started_ ? pass_start_ + static_cast<std::uint64_t>(layers_) : epoch_;
  started_ = true;
  in_pass_ = true;
  while (next_load_ < pass_start_ + 2) {
    load(next_load_);
    ++next_load_;  // only once enqueued: a load that threw is not counted as in flight
  }
}

void WeightStreamer::acquire(int layer, Stream& compute) {
  OFFGEN_CHECK(in_pass_ && layer >= 0 && layer < layers_, "weight streamer: no layer {} in a pass",
               layer);
  const std::uint64_t n = pass_start_ + static_cast<std::uint64_t>(layer);
  OFFGEN_CHECK(n < next_load_, "weight streamer: layer {} acquired before its load", layer);
  if (!streams_) {
    store_.bind_layer(layer, store_.resident_image(layer));
    return;
  }
  const auto s = static_cast<int>(n % 2);
  loaded_[s]->wait_on(compute);
  store_.bind_layer(layer, slots_[s].as<std::byte>());
  bytes_moved_ += store_.offloaded_bytes(layer);
}

void WeightStreamer::release(int layer, Stream& compute) {
  const std::uint64_t n = pass_start_ + static_cast<std::uint64_t>(layer);
  if (streams_) released_[n % 2]->record(compute);
  if (next_load_ == n + 2) {
    load(next_load_);
    ++next_load_;
  }
  if (layer == layers_ - 1) {
    in_pass_ = false;
    // The last layer's kernels waited for every read of this pass: a failed one becomes the
    // compute stream's error, so the pass's results are never read as if it had succeeded.
    store_.check_disk_reads(compute);
  }
}

}  // namespace offgen
