#include "offload/host_activations.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/core/error.h"
#include "scheduler/runner_layout.h"

namespace offgen {

HostActivations::HostActivations(Device& device, std::vector<GpuBatch> gpu_batches,
                                 int max_rows_per_sequence, int hidden)
    : device_(device),
      compute_(device.stream(StreamRole::compute)),
      h2d_(device.stream(StreamRole::h2d_kv)),
      d2h_(device.stream(StreamRole::d2h_kv)),
      gpu_batches_(std::move(gpu_batches)),
      max_rows_per_sequence_(max_rows_per_sequence),
      hidden_(hidden) {
  OFFGEN_CHECK(!gpu_batches_.empty() && max_rows_per_sequence > 0 && hidden > 0,
               "host activations need GPU batches, rows and a hidden size");
  const MemoryLayout layout = host_activations_layout(gpu_batches_, max_rows_per_sequence, hidden);
  host_ = layout.allocate(device, "host hidden states");
  std::vector<Buffer> slot_rows = layout.allocate_all(device, "hidden state slots");
  for (std::size_t i = 0; i < 2; ++i) {
    Slot& s = slots_[i];
    s.rows = std::move(slot_rows[i]);
    s.loaded = device.create_event();
    s.saved = device.create_event();
  }
  computed_ = device.create_event();
  for (std::size_t g = 0; g < gpu_batches_.size(); ++g)
    gpu_batch_saved_.push_back(device.create_event());
}

HostActivations::~HostActivations() {
  // Queued copies still use these buffers.
  for (Stream* stream : {&compute_, &h2d_, &d2h_}) {
    try {
      stream->synchronize();
    } catch (const std::exception& e) {
      spdlog::warn("host activations: stream {} failed while shutting down: {}",
                   stream_role_name(stream->role()), e.what());
    }
  }
}

std::size_t HostActivations::batch_bytes(const GpuBatch& batch) const {
  return static_cast<std::size_t>(batch.size) * static_cast<std::size_t>(rows_per_sequence_) *
         static_cast<std::size_t>(hidden_) * sizeof(Half);
}

Half* HostActivations::host_rows(const GpuBatch& batch) {
  const auto first = static_cast<std::size_t>(batch.first);
  return host_.as<Half>() +
         first * static_cast<std::size_t>(rows_per_sequence_) * static_cast<std::size_t>(hidden_);
}

void HostActivations::begin_pass(int rows_per_sequence) {
  OFFGEN_CHECK(rows_per_sequence > 0 && rows_per_sequence <= max_rows_per_sequence_,
               "host activations: a pass of {} rows per sequence, sized for {}", rows_per_sequence,
               max_rows_per_sequence_);
  rows_per_sequence_ = rows_per_sequence;
  released_through_ = -1;
  for (Slot& s : slots_) s.loaded_task = -1;
}

void HostActivations::prefetch(const BlockTask& task) {
  if (task.layer == 0) return;  // the embedding is computed into the slot
  // The rows come from this GPU batch's task of the layer before, which must have been released
  // (with one GPU batch, that is the task computing now: the load waits for acquire()).
  if (task.index - static_cast<int>(gpu_batches_.size()) > released_through_) return;
  Slot& s = slot_of(task);
  if (s.loaded_task == task.index) return;
  s.saved->wait_on(h2d_);  // the slot's last store read it
  gpu_batch_saved_[static_cast<std::size_t>(task.gpu_batch)]->wait_on(
      h2d_);  // the rows are on the host
  const std::size_t bytes = batch_bytes(task.batch);
  device_.copy_async(s.rows.data(), host_rows(task.batch), bytes, h2d_);
  s.loaded->record(h2d_);
  s.loaded_task = task.index;
  moved_bytes_ += bytes;
}

Half* HostActivations::acquire(const BlockTask& task) {
  Slot& s = slot_of(task);
  if (task.layer == 0) {
    s.saved->wait_on(compute_);  // the embedding overwrites the slot: its last store is done
  } else {
    prefetch(task);
    s.loaded->wait_on(compute_);
  }
  return s.rows.as<Half>();
}

void HostActivations::release(const BlockTask& task) {
  Slot& s = slot_of(task);
  s.loaded_task = -1;
  released_through_ = task.index;
  computed_->record(compute_);
  computed_->wait_on(d2h_);
  const std::size_t bytes = batch_bytes(task.batch);
  device_.copy_async(host_rows(task.batch), s.rows.data(), bytes, d2h_);
  s.saved->record(d2h_);
  gpu_batch_saved_[static_cast<std::size_t>(task.gpu_batch)]->record(d2h_);
  moved_bytes_ += bytes;
}

const Half* HostActivations::finish_pass() {
  for (const auto& saved : gpu_batch_saved_) saved->wait_on(compute_);
  return host_.as<const Half>();
}

}  // namespace offgen
