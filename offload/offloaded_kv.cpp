#include "offload/offloaded_kv.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/core/error.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_cache.h"
#include "kernels/cpu/page_selection.h"
#include "kernels/cpu/quantize.h"
#include "kernels/packed_kv.h"
#include "scheduler/kv_cache_layout.h"

namespace offgen {

OffloadedKv::OffloadedKv(Device& device, Ops& ops, const ModelConfig& config,
                         std::vector<int> offloaded, int capacity, bool keeps_attention_scores,
                         bool cpu_attention, Storage storage, int page_size, int staged_capacity)
    : device_(device),
      ops_(ops),
      compute_(device.stream(StreamRole::compute)),
      h2d_(device.stream(StreamRole::h2d_kv)),
      d2h_(device.stream(StreamRole::d2h_kv)),
      q_heads_(config.num_heads),
      heads_(config.kv_heads()),
      head_dim_(config.head_dim()),
      capacity_(capacity),
      staged_capacity_(staged_capacity > 0 && staged_capacity < capacity ? staged_capacity
                                                                         : capacity),
      prefill_chunk_(0),
      keeps_attention_scores_(keeps_attention_scores),
      cpu_attention_(cpu_attention),
      storage_(storage),
      offloaded_(std::move(offloaded)),
      geometry_{q_heads_, heads_, head_dim_, capacity, page_size, page_count(capacity, page_size)} {
  const auto most =
      offloaded_.empty() ? 0 : *std::max_element(offloaded_.begin(), offloaded_.end());
  OFFGEN_CHECK(most > 0, "offloaded KV needs at least one offloaded sequence");
  OFFGEN_CHECK(!compact() || (page_size > 0 && !cpu_attention && staged_capacity_ % page_size == 0),
               "offloaded kv: a compact staging is for page selection attended on the gpu tier, "
               "in whole pages");
  if (compact()) {
    spdlog::debug(
        "offloaded kv: compact staging of {} slots a sequence (of {}), {} whole caches "
        "at a time",
        staged_capacity_, capacity, compact_chunk_sequences(most, capacity, staged_capacity_));
  }
  prefill_chunk_ = compact_chunk_sequences(most, capacity, staged_capacity_);
  whole_split_ =
      kernels::plan_decode_split(prefill_chunk_, q_heads_, capacity, device.multiprocessors());
  const MemoryLayout layout =
      offloaded_kv_layout(config, offloaded_, capacity, keeps_attention_scores, cpu_attention,
                          storage, page_size, staged_capacity_);
  expanded_k_ = layout.allocate(device, "staged expanded k cache");
  expanded_v_ = layout.allocate(device, "staged expanded v cache");
  host_expanded_k_ = layout.allocate(device, "host expanded k cache");
  host_expanded_v_ = layout.allocate(device, "host expanded v cache");
  const std::size_t batches = offloaded_.size();
  std::vector<std::vector<Buffer>> k_host(batches), v_host(batches), summaries(batches);
  for (std::size_t g = 0; g < batches; ++g) {
    k_host[g] = layout.allocate_all(device, "host k cache", static_cast<int>(g));
    v_host[g] = layout.allocate_all(device, "host v cache", static_cast<int>(g));
    summaries[g] = layout.allocate_all(device, "offloaded page summaries", static_cast<int>(g));
  }
  for (int l = 0; l < config.num_layers; ++l) {
    for (std::size_t g = 0; g < batches; ++g) {
      const auto at = static_cast<std::size_t>(l);
      k_host_.push_back(std::move(k_host[g][at]));
      v_host_.push_back(std::move(v_host[g][at]));
      summary_.push_back(std::move(summaries[g][at]));
      cache_stored_.push_back(device.create_event());
    }
  }
  const auto slot_buffers = [&](const char* name) { return layout.allocate_all(device, name); };
  std::vector<Buffer> k = slot_buffers("staged k cache"), v = slot_buffers("staged v cache"),
                      rows = slot_buffers("staged rows"),
                      slots = slot_buffers("staged write slots"),
                      host_rows = slot_buffers("host rows"),
                      host_slots = slot_buffers("host write slots"),
                      host_out = slot_buffers("host attention output"),
                      host_probs = slot_buffers("host probabilities"),
                      staged_summary = slot_buffers("staged page summaries"),
                      host_selected = slot_buffers("host chosen pages"),
                      host_selected_count = slot_buffers("host chosen page counts"),
                      speculated = slot_buffers("speculated pages"),
                      speculated_count = slot_buffers("speculated page counts");
  for (std::size_t i = 0; i < 2; ++i) {
    Slot& s = slots_[i];
    s.k = std::move(k[i]);
    s.v = std::move(v[i]);
    s.rows = std::move(rows[i]);
    s.slots = std::move(slots[i]);
    s.host_rows = std::move(host_rows[i]);
    s.host_slots = std::move(host_slots[i]);
    s.host_out = std::move(host_out[i]);
    s.host_probs = std::move(host_probs[i]);
    s.staged_summary = std::move(staged_summary[i]);
    s.host_selected = std::move(host_selected[i]);
    s.host_selected_count = std::move(host_selected_count[i]);
    s.speculated = std::move(speculated[i]);
    s.speculated_count = std::move(speculated_count[i]);
    for (auto* event :
         {&s.loaded, &s.computed, &s.saved, &s.rows_ready, &s.rows_free, &s.out_ready, &s.chosen}) {
      *event = device.create_event();
    }
  }
  gathered_bytes_ = layout.allocate(device, "gathered bytes");
  if (gathered_bytes_) {
    const unsigned long long zero = 0;
    device.copy_async(gathered_bytes_.data(), &zero, sizeof zero, compute_);
    compute_.synchronize();
  }
}

OffloadedKv::~OffloadedKv() {
  // Queued copies and host tasks still use these buffers.
  for (Stream* stream : {&compute_, &h2d_, &d2h_}) {
    try {
      stream->synchronize();
    } catch (const std::exception& e) {
      spdlog::warn("offloaded kv: stream {} failed while shutting down: {}",
                   stream_role_name(stream->role()), e.what());
    }
  }
}

std::uint64_t OffloadedKv::host_cache_bytes() const {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < k_host_.size(); ++i) total += k_host_[i].bytes() + v_host_[i].bytes();
  return total;
}

std::uint64_t OffloadedKv::gpu_bytes() const {
  std::uint64_t total = 0;
  for (const Slot& s : slots_)
    total += s.k.bytes() + s.v.bytes() + s.rows.bytes() + s.slots.bytes();
  total += expanded_k_.bytes() + expanded_v_.bytes();
  return total;
}

std::size_t OffloadedKv::cache_index(const BlockTask& task) const {
  return cache_index(task.layer, task.gpu_batch);
}

std::size_t OffloadedKv::cache_elements(int gpu_batch) const {
  return static_cast<std::size_t>(cache_rows(gpu_batch)) * static_cast<std::size_t>(head_dim_);
}

std::int64_t OffloadedKv::cache_rows(int gpu_batch) const {
  return std::int64_t{offloaded(gpu_batch)} * heads_ * capacity_;
}

std::int64_t OffloadedKv::staged_rows(int gpu_batch) const {
  return std::int64_t{offloaded(gpu_batch)} * heads_ * staged_capacity_;
}

std::size_t OffloadedKv::cache_bytes(int gpu_batch) const {
  switch (storage_) {
    case Storage::fp16:
      return cache_elements(gpu_batch) * sizeof(Half);
    case Storage::int4:
      return kernels::packed_kv_bytes(cache_rows(gpu_batch), head_dim_);
    case Storage::int8:
      fail("the KV cache has no int8 storage (fp16 or int4)");
  }
  return 0;
}

namespace {

// On the host: packs each new token's k and v rows (qkv rows [batch, (H + 2·KV)·D]) into the
// packed host caches at their write slots [batch, KV] — the packed twin of cpu::append_kv.
void append_packed(const kernels::AppendKvArgs& a, void* k_packed, void* v_packed) {
  const int kv_heads = a.kv_heads > 0 ? a.kv_heads : a.heads;
  const std::int64_t rows = std::int64_t{a.batch} * kv_heads * a.capacity;
  const kernels::PackedKv k = kernels::packed_kv(k_packed, rows, a.head_dim);
  const kernels::PackedKv v = kernels::packed_kv(v_packed, rows, a.head_dim);
  const kernels::QuantShape one = kernels::packed_kv_shape(1, a.head_dim);
  const std::int64_t q_width = std::int64_t{a.heads} * a.head_dim;
  const std::int64_t kv_width = std::int64_t{kv_heads} * a.head_dim;
  for (int b = 0; b < a.batch; ++b) {
    for (int h = 0; h < kv_heads; ++h) {
      const std::int32_t slot = a.write_slot[std::int64_t{b} * kv_heads + h];
      OFFGEN_CHECK(slot >= 0 && slot < a.capacity,
                   "offloaded kv: write slot {} outside a cache of {} slots", slot, a.capacity);
      const std::int64_t row = (std::int64_t{b} * kv_heads + h) * a.capacity + slot;
      const Half* k_row = a.qkv + std::int64_t{b} * (q_width + 2 * kv_width) + q_width +
                          std::int64_t{h} * a.head_dim;
      for (auto [source, cache] : {std::pair{k_row, k}, std::pair{k_row + kv_width, v}}) {
        kernels::cpu::quantize({.x = source,
                                .data = cache.codes + row * one.data_bytes(),
                                .params = cache.params + row * one.param_count(),
                                .shape = one});
      }
    }
  }
}

// On the host, after the new rows are in the (fp16) cache: page selection's summaries and choice
// (nothing for a batch of 0, that is without selection), then decode attention.
void attend_chosen(const kernels::PageSummaryArgs& summarise, const kernels::PageSelectArgs& choose,
                   const kernels::DecodeAttentionArgs& attend) {
  if (summarise.batch > 0) {
    kernels::cpu::page_summary(summarise);
    kernels::cpu::page_select(choose);
  }
  kernels::cpu::decode_attention(attend);
}

}  // namespace

void OffloadedKv::begin_pass() {
  for (Slot& s : slots_) s.loaded_task = -1;
}

std::uint64_t OffloadedKv::loaded_bytes() const {
  if (!gathered_bytes_) return loaded_bytes_;
  h2d_.synchronize();
  unsigned long long gathered = 0;
  device_.copy_async(&gathered, gathered_bytes_.data(), sizeof gathered, compute_);
  compute_.synchronize();
  return loaded_bytes_ + gathered;
}

std::uint64_t OffloadedKv::copy_rows(Buffer& host, Buffer& staged, int gpu_batch,
                                     std::int64_t first_row, std::int64_t rows, bool to_host,
                                     Stream& stream) {
  const auto copy = [&](std::byte* host_at, std::byte* staged_at, std::int64_t bytes) {
    const auto n = static_cast<std::size_t>(bytes);
    if (to_host) {
      device_.copy_async(host_at, staged_at, n, stream);
    } else {
      device_.copy_async(staged_at, host_at, n, stream);
    }
  };
  auto* host_bytes = static_cast<std::byte*>(host.data());
  auto* staged_bytes = static_cast<std::byte*>(staged.data());
  if (storage_ != Storage::int4) {
    const std::int64_t row = std::int64_t{head_dim_} * std::int64_t{sizeof(Half)};
    copy(host_bytes + first_row * row, staged_bytes, rows * row);
    return static_cast<std::uint64_t>(rows * row);
  }
  // Packed: codes and parameters, a run of each.
  const std::int64_t code_bytes = kernels::packed_kv_shape(1, head_dim_).data_bytes();
  const std::int64_t param_bytes =
      static_cast<std::int64_t>(kernels::packed_kv_bytes(1, head_dim_)) - code_bytes;
  const kernels::PackedKv in_host =
      kernels::packed_kv(host.data(), cache_rows(gpu_batch), head_dim_);
  const kernels::PackedKv in_staging = kernels::packed_kv(staged.data(), rows, head_dim_);
  copy(reinterpret_cast<std::byte*>(in_host.codes) + first_row * code_bytes,
       reinterpret_cast<std::byte*>(in_staging.codes), rows * code_bytes);
  copy(reinterpret_cast<std::byte*>(in_host.params) + first_row * param_bytes,
       reinterpret_cast<std::byte*>(in_staging.params), rows * param_bytes);
  return static_cast<std::uint64_t>(rows * (code_bytes + param_bytes));
}

template <typename Body>
void OffloadedKv::for_each_chunk(const BlockTask& task, Body&& body) {
  const int n = offloaded(task.gpu_batch);
  for (int first = 0, part = 0; first < n; first += prefill_chunk_, ++part) {
    const int m = std::min(prefill_chunk_, n - first);
    Slot& s = slots_[static_cast<std::size_t>((task.index + part) % 2)];
    s.loaded_task = -1;  // what the slot held is overwritten
    body(s, first, m, std::int64_t{first} * heads_ * capacity_,
         std::int64_t{m} * heads_ * capacity_);
  }
}

void OffloadedKv::store_prefill(const BlockTask& task, const Half* qkv,
                                const std::int32_t* token_slot, int seq,
                                const OffloadedPages& pages) {
  const int n = offloaded(task.gpu_batch);
  if (n == 0) return;
  const bool packed = storage_ == Storage::int4;
  const std::size_t c = cache_index(task);
  const bool selects = pages.first_page != nullptr;  // not without selection, nor in a dense layer
  const std::int64_t qkv_row = std::int64_t{q_heads_ + 2 * heads_} * head_dim_;
  const std::int64_t summary_elements =
      kernels::page_summary_elements(1, heads_, head_dim_, geometry_.max_pages);
  // A compact staging holds prefill_chunk_ sequences' whole caches: the prompts go out that many
  // at a time, the chunks taking the two slots in turn so one chunk's copy out overlaps the
  // next one's store.
  for_each_chunk(task, [&](Slot& s, int first, int m, std::int64_t first_row, std::int64_t rows) {
    s.saved->wait_on(compute_);  // the slot's last copy out has finished reading it
    Half* k_fp16 = packed ? expanded_k_.as<Half>() : s.k.as<Half>();
    ops_.store_prefill_kv({.qkv = qkv + first * seq * qkv_row,
                           .token_slot = token_slot + std::int64_t{first} * heads_ * seq,
                           .k_cache = k_fp16,
                           .v_cache = packed ? expanded_v_.as<Half>() : s.v.as<Half>(),
                           .batch = m,
                           .seq = seq,
                           .heads = q_heads_,
                           .head_dim = head_dim_,
                           .capacity = capacity_,
                           .kv_heads = heads_});
    if (selects) {
      // From the fp16 keys as stored (before int4 packing); cpu attention's go out with the
      // cache (in one chunk: its staging is never compact).
      Half* summary = cpu_attention_ ? s.staged_summary.as<Half>() : summary_[c].as<Half>();
      ops_.page_summary(geometry_.summary_args(k_fp16, summary + first * summary_elements,
                                               pages.slot_count + first, pages.first_page + first,
                                               m));
    }
    if (packed) {
      kernels::pack_kv_rows(ops_, expanded_k_.as<Half>(), s.k.data(), rows, head_dim_);
      kernels::pack_kv_rows(ops_, expanded_v_.as<Half>(), s.v.data(), rows, head_dim_);
    }
    s.computed->record(compute_);
    s.computed->wait_on(d2h_);
    copy_rows(k_host_[c], s.k, task.gpu_batch, first_row, rows, /*to_host=*/true, d2h_);
    copy_rows(v_host_[c], s.v, task.gpu_batch, first_row, rows, /*to_host=*/true, d2h_);
    if (selects && cpu_attention_) {
      device_.copy_async(summary_[c].data(), s.staged_summary.data(), summary_[c].bytes(), d2h_);
      stored_bytes_ += summary_[c].bytes();
    }
    s.saved->record(d2h_);
  });
  cache_stored_[c]->record(d2h_);
  stored_bytes_ += 2 * cache_bytes(task.gpu_batch);
}

void OffloadedKv::prefetch(const BlockTask& task) {
  if (cpu_attention_ || offloaded(task.gpu_batch) == 0) return;
  // A compact staging brings a dense layer's caches in chunks, in its decode.
  if (compact()) return;
  Slot& s = slot_of(task);
  if (s.loaded_task == task.index) return;
  const std::size_t c = cache_index(task);
  s.computed->wait_on(h2d_);        // compute is done with the slot's last task
  s.saved->wait_on(h2d_);           // and so is the last copy out of it
  cache_stored_[c]->wait_on(h2d_);  // the host cache has its last token
  const std::size_t bytes = cache_bytes(task.gpu_batch);
  device_.copy_async(s.k.data(), k_host_[c].data(), bytes, h2d_);
  device_.copy_async(s.v.data(), v_host_[c].data(), bytes, h2d_);
  s.loaded->record(h2d_);
  s.loaded_task = task.index;
  s.speculative = false;
  loaded_bytes_ += 2 * bytes;
}

void OffloadedKv::gather_pages(Ops& ops, const BlockTask& task, Slot& s,
                               const std::int32_t* slot_count, const std::int32_t* first_page,
                               const std::int32_t* selected, const std::int32_t* selected_count,
                               const std::int32_t* present, const std::int32_t* present_count,
                               const std::int32_t* staged_page) {
  const int n = offloaded(task.gpu_batch);
  const std::size_t c = cache_index(task);
  const auto plane = [&](const void* src, void* dst, std::int64_t row_bytes) {
    kernels::GatherPagesArgs args = geometry_.gather_args(src, dst, row_bytes, slot_count,
                                                          first_page, selected, selected_count, n);
    args.present = present;
    args.present_count = present_count;
    args.copied = gathered_bytes_.as<unsigned long long>();
    if (compact()) {
      args.dst_capacity = staged_capacity_;
      args.dst_page = staged_page;
    }
    ops.gather_pages(args);
  };
  const std::int64_t rows = cache_rows(task.gpu_batch);
  for (auto [host, staged] : {std::pair{&k_host_[c], &s.k}, std::pair{&v_host_[c], &s.v}}) {
    if (storage_ == Storage::int4) {  // codes and parameters are two planes of rows
      const kernels::PackedKv from = kernels::packed_kv(host->data(), rows, head_dim_);
      const kernels::PackedKv to =
          kernels::packed_kv(staged->data(), staged_rows(task.gpu_batch), head_dim_);
      const std::int64_t code_bytes = kernels::packed_kv_shape(1, head_dim_).data_bytes();
      plane(from.codes, to.codes, code_bytes);
      plane(from.params, to.params,
            static_cast<std::int64_t>(kernels::packed_kv_bytes(1, head_dim_)) - code_bytes);
    } else {
      plane(host->data(), staged->data(), std::int64_t{head_dim_} * std::int64_t{sizeof(Half)});
    }
  }
}

void OffloadedKv::speculate(const BlockTask& task, const Half* qkv, std::int64_t q_stride,
                            const std::int32_t* slot_count, const OffloadedPages& pages) {
  const int n = offloaded(task.gpu_batch);
  if (n == 0 || cpu_attention_ || pages.first_page == nullptr) return;
  OFFGEN_CHECK(!compact(), "offloaded kv: a compact staging takes no speculative pages");
  Slot& s = slot_of(task);
  const std::size_t c = cache_index(task);
  // The guess, on compute: the summaries before the newest page are the ones the task will
  // choose from (that page is always chosen, so its stale summary changes nothing).
  kernels::PageSelectArgs guess = geometry_.select_args(
      qkv, summary_[c].as<Half>(), slot_count, pages.pages_per_step,
      s.speculated.as<std::int32_t>(), s.speculated_count.as<std::int32_t>(), n);
  guess.q_stride = q_stride;
  ops_.page_select(guess);
  s.chosen->record(compute_);
  s.chosen->wait_on(h2d_);
  s.computed->wait_on(h2d_);        // compute is done with the slot's last task
  s.saved->wait_on(h2d_);           // and so is the last copy out of it
  cache_stored_[c]->wait_on(h2d_);  // the host cache has its last token
  // Made on first use: a run that never guesses holds no second set of kernels (with CUDA, a
  // cuBLAS handle and its workspace).
  if (!copy_ops_) copy_ops_ = ops_.on_stream(StreamRole::h2d_kv);
  gather_pages(*copy_ops_, task, s, slot_count, pages.first_page, nullptr, nullptr);
  gather_pages(*copy_ops_, task, s, slot_count, pages.first_page, s.speculated.as<std::int32_t>(),
               s.speculated_count.as<std::int32_t>());
  s.loaded->record(h2d_);
  s.loaded_task = task.index;
  s.speculative = true;
}

void OffloadedKv::send_rows(const BlockTask& task, Slot& s, const Half* qkv,
                            const std::int32_t* write_slot) {
  const auto n = static_cast<std::size_t>(offloaded(task.gpu_batch));
  const std::size_t row_bytes = n * (q_heads_ + 2 * heads_) * head_dim_ * sizeof(Half);
  const std::size_t slot_bytes = n * heads_ * sizeof(std::int32_t);
  s.rows_free->wait_on(compute_);
  device_.copy_async(s.rows.data(), qkv, row_bytes, compute_);
  device_.copy_async(s.slots.data(), write_slot, slot_bytes, compute_);
  s.rows_ready->record(compute_);
  s.rows_ready->wait_on(d2h_);
  device_.copy_async(s.host_rows.data(), s.rows.data(), row_bytes, d2h_);
  device_.copy_async(s.host_slots.data(), s.slots.data(), slot_bytes, d2h_);
  s.rows_free->record(d2h_);
  stored_bytes_ += row_bytes + slot_bytes;
}

void OffloadedKv::write_back(const BlockTask& task, Slot& s, const Half* qkv,
                             const std::int32_t* write_slot) {
  const int n = offloaded(task.gpu_batch);
  const std::size_t c = cache_index(task);
  send_rows(task, s, qkv, write_slot);
  const kernels::AppendKvArgs host_append{.qkv = s.host_rows.as<const Half>(),
                                          .write_slot = s.host_slots.as<const std::int32_t>(),
                                          .k_cache = k_host_[c].as<Half>(),
                                          .v_cache = v_host_[c].as<Half>(),
                                          .batch = n,
                                          .heads = q_heads_,
                                          .head_dim = head_dim_,
                                          .capacity = capacity_,
                                          .kv_heads = heads_};
  if (storage_ == Storage::int4) {
    device_.enqueue_host(d2h_, [host_append, k = k_host_[c].data(), v = v_host_[c].data()] {
      append_packed(host_append, k, v);
    });
  } else {
    device_.enqueue_host(d2h_, [host_append] { kernels::cpu::append_kv(host_append); });
  }
  cache_stored_[c]->record(d2h_);
}

void OffloadedKv::decode_whole(const BlockTask& task, const std::int32_t* write_slot,
                               const kernels::DecodeAttentionArgs& args) {
  const std::size_t c = cache_index(task);
  const bool packed = storage_ == Storage::int4;
  const std::int64_t qkv_row = std::int64_t{q_heads_ + 2 * heads_} * head_dim_;
  // prefill_chunk_ sequences' whole caches at a time, the chunks taking the two slots in turn:
  // chunk j + 1 comes in while chunk j is attended.
  for_each_chunk(task, [&](Slot& s, int first, int m, std::int64_t first_row, std::int64_t rows) {
    s.computed->wait_on(h2d_);        // compute is done with the slot's last use
    s.saved->wait_on(h2d_);           // and so is the last copy out of it
    cache_stored_[c]->wait_on(h2d_);  // the host cache has its last token
    for (auto [host, staged] : {std::pair{&k_host_[c], &s.k}, std::pair{&v_host_[c], &s.v}}) {
      loaded_bytes_ +=
          copy_rows(*host, *staged, task.gpu_batch, first_row, rows, /*to_host=*/false, h2d_);
    }
    s.loaded->record(h2d_);
    s.loaded->wait_on(compute_);
    Half* k_cache = packed ? expanded_k_.as<Half>() : s.k.as<Half>();
    Half* v_cache = packed ? expanded_v_.as<Half>() : s.v.as<Half>();
    if (packed) {
      kernels::expand_kv_rows(ops_, s.k.data(), k_cache, rows, head_dim_);
      kernels::expand_kv_rows(ops_, s.v.data(), v_cache, rows, head_dim_);
    }
    ops_.append_kv({.qkv = args.qkv + first * qkv_row,
                    .write_slot = write_slot + std::int64_t{first} * heads_,
                    .k_cache = k_cache,
                    .v_cache = v_cache,
                    .batch = m,
                    .heads = q_heads_,
                    .head_dim = head_dim_,
                    .capacity = capacity_,
                    .kv_heads = heads_});
    kernels::DecodeAttentionArgs part_args = args;
    part_args.qkv = args.qkv + first * qkv_row;
    part_args.slot_count = args.slot_count + first;
    part_args.out = args.out + std::int64_t{first} * q_heads_ * head_dim_;
    part_args.batch = m;
    part_args.k_cache = k_cache;
    part_args.v_cache = v_cache;
    part_args.capacity = capacity_;
    part_args.split = whole_split_;
    ops_.decode_attention(part_args);
    s.computed->record(compute_);
  });
  write_back(task, slot_of(task), args.qkv, write_slot);
}

void OffloadedKv::decode_gpu(const BlockTask& task, const std::int32_t* write_slot,
                             kernels::DecodeAttentionArgs args, const OffloadedPages& pages) {
  const int n = offloaded(task.gpu_batch);
  if (n == 0) return;
  OFFGEN_CHECK(!cpu_attention_ && args.batch == n,
               "offloaded kv: gpu decode of {} sequences, {} "
               "offloaded",
               args.batch, n);
  Slot& s = slot_of(task);
  const std::size_t c = cache_index(task);
  const bool selects = pages.first_page != nullptr;  // not without selection, nor in a dense layer
  OFFGEN_CHECK(!compact() || !selects || pages.staged_page != nullptr,
               "offloaded kv: a compact staging's decode needs the staged arrays");
  // What speculate() brought into the slot for this very task (a flag left by an earlier task
  // of the slot does not count).
  const bool guessed = selects && s.speculative && s.loaded_task == task.index;
  if (selects) {
    // Only the pages the step attends come in, read where they lie by the compute stream once
    // the host cache has its last token and the slot's last copy out is done: first the newest
    // token's page (its summary is taken again), after the choice the others.
    if (guessed) {
      s.loaded->wait_on(compute_);  // speculate() brought the newest page and its guesses
    } else {
      s.saved->wait_on(compute_);
      cache_stored_[c]->wait_on(compute_);
      gather_pages(ops_, task, s, args.slot_count, pages.first_page, nullptr, nullptr, nullptr,
                   nullptr, pages.staged_page);
    }
  } else if (compact()) {
    decode_whole(task, write_slot, args);  // a dense layer over a compact staging
    return;
  } else {
    prefetch(task);
    s.loaded->wait_on(compute_);
  }
  const bool packed = storage_ == Storage::int4;
  Half* k_cache = packed ? expanded_k_.as<Half>() : s.k.as<Half>();
  Half* v_cache = packed ? expanded_v_.as<Half>() : s.v.as<Half>();
  // The staged cache: the host cache's layout, or compact (the attended slots alone).
  const kernels::AppendKvArgs append{.qkv = args.qkv,
                                     .write_slot = compact() ? pages.staged_write_slot : write_slot,
                                     .k_cache = k_cache,
                                     .v_cache = v_cache,
                                     .batch = n,
                                     .heads = q_heads_,
                                     .head_dim = head_dim_,
                                     .capacity = staged_capacity_,
                                     .kv_heads = heads_};
  const auto expand_and_append = [&] {
    if (packed) {
      const std::int64_t rows = staged_rows(task.gpu_batch);
      kernels::expand_kv_rows(ops_, s.k.data(), k_cache, rows, head_dim_);
      kernels::expand_kv_rows(ops_, s.v.data(), v_cache, rows, head_dim_);
    }
    ops_.append_kv(append);
  };
  expand_and_append();
  // The new rows go back to the host cache while attention runs.
  write_back(task, s, args.qkv, write_slot);
  args.k_cache = k_cache;
  args.v_cache = v_cache;
  if (selects) {
    // The newest page's summary again (the summaries of the pages before it stay exact), then
    // the choice, on the gpu tier beside the staged cache, then the chosen pages come in (the
    // host task appending the new rows writes slot T - 1 only, which no gather reads). Packed
    // rows are expanded again, and the new rows appended again where that overwrote them.
    if (compact()) {
      // The newest page is summarised where the staging keeps it; the chosen pages land in the
      // order of the choice, so the staging is then the attended cache itself.
      kernels::PageSummaryArgs summarise = geometry_.summary_args(
          k_cache, summary_[c].as<Half>(), args.slot_count, pages.first_page, n);
      summarise.cache_page = pages.staged_page;
      summarise.capacity = staged_capacity_;
      ops_.page_summary(summarise);
      ops_.page_select(geometry_.select_args(args.qkv, summary_[c].as<Half>(), args.slot_count,
                                             pages.pages_per_step, pages.selected,
                                             pages.selected_count, n));
      gather_pages(ops_, task, s, args.slot_count, pages.first_page, pages.selected,
                   pages.selected_count);
      args.slot_count = pages.staged_slot_count;
      args.capacity = staged_capacity_;
    } else {
      select_pages(ops_, geometry_, k_cache, summary_[c].as<Half>(), pages.first_page,
                   pages.pages_per_step, pages.selected, pages.selected_count, args);
      gather_pages(ops_, task, s, args.slot_count, pages.first_page, pages.selected,
                   pages.selected_count, guessed ? s.speculated.as<std::int32_t>() : nullptr,
                   guessed ? s.speculated_count.as<std::int32_t>() : nullptr);
    }
    if (packed) expand_and_append();
  }
  ops_.decode_attention(args);
  s.computed->record(compute_);
}

void OffloadedKv::decode_cpu(const BlockTask& task, const std::int32_t* write_slot,
                             const std::int32_t* host_slot_count, kernels::DecodeAttentionArgs args,
                             const OffloadedPages& pages) {
  const int n = offloaded(task.gpu_batch);
  if (n == 0) return;
  OFFGEN_CHECK(cpu_attention_ && args.batch == n,
               "offloaded kv: cpu decode of {} sequences, {} offloaded", args.batch, n);
  Slot& s = slot_of(task);
  send_rows(task, s, args.qkv, write_slot);
  s.out_ready->wait_on(d2h_);  // the slot's last output has been copied up
  const std::size_t c = cache_index(task);
  kernels::DecodeAttentionArgs host = args;
  host.qkv = s.host_rows.as<const Half>();
  host.k_cache = k_host_[c].as<Half>();
  host.v_cache = v_host_[c].as<Half>();
  host.slot_count = host_slot_count;
  host.out = s.host_out.as<Half>();
  host.probs = keeps_attention_scores_ ? s.host_probs.as<float>() : nullptr;
  const kernels::AppendKvArgs host_append{.qkv = host.qkv,
                                          .write_slot = s.host_slots.as<const std::int32_t>(),
                                          .k_cache = k_host_[c].as<Half>(),
                                          .v_cache = v_host_[c].as<Half>(),
                                          .batch = host.batch,
                                          .heads = host.heads,
                                          .head_dim = host.head_dim,
                                          .capacity = host.capacity,
                                          .kv_heads = host.kv_heads};
  // Page selection where the cache lies: the host task summarises the newest page again,
  // chooses, and attends to the chosen pages (batch 0 summaries and choices: none, as in a dense
  // layer).
  const bool selects = pages.first_page != nullptr;
  kernels::PageSummaryArgs summarise;  // batch 0: nothing to summarise or choose
  kernels::PageSelectArgs choose;
  if (selects) {
    summarise = geometry_.summary_args(nullptr, summary_[c].as<Half>(), host_slot_count,
                                       pages.first_page, n);
    choose = geometry_.select_args(host.qkv, summarise.summary, host_slot_count,
                                   pages.pages_per_step, s.host_selected.as<std::int32_t>(),
                                   s.host_selected_count.as<std::int32_t>(), n);
    geometry_.attend_chosen(host, choose.selected, choose.selected_count);
  }
  if (storage_ == Storage::int4) {
    // Expand the packed host cache, append the new rows in fp16 there (they attend exactly) and
    // packed into the cache, and attend over the fp16 block.
    const std::int64_t rows = cache_rows(task.gpu_batch);
    kernels::AppendKvArgs expanded_append = host_append;
    expanded_append.k_cache = host_expanded_k_.as<Half>();
    expanded_append.v_cache = host_expanded_v_.as<Half>();
    host.k_cache = expanded_append.k_cache;
    host.v_cache = expanded_append.v_cache;
    summarise.k_cache = expanded_append.k_cache;
    device_.enqueue_host(d2h_, [host, host_append, expanded_append, rows, head_dim = head_dim_,
                                k = k_host_[c].data(), v = v_host_[c].data(), summarise, choose] {
      for (auto [packed, fp16] :
           {std::pair{k, expanded_append.k_cache}, std::pair{v, expanded_append.v_cache}}) {
        const kernels::PackedKv in = kernels::packed_kv(packed, rows, head_dim);
        kernels::cpu::dequantize({.data = in.codes,
                                  .params = in.params,
                                  .x = fp16,
                                  .shape = kernels::packed_kv_shape(rows, head_dim)});
      }
      kernels::cpu::append_kv(expanded_append);
      append_packed(host_append, k, v);
      attend_chosen(summarise, choose, host);
    });
  } else {
    summarise.k_cache = host_append.k_cache;
    device_.enqueue_host(d2h_, [host, host_append, summarise, choose] {
      kernels::cpu::append_kv(host_append);
      attend_chosen(summarise, choose, host);
    });
  }
  cache_stored_[c]->record(d2h_);
  s.saved->record(d2h_);  // the host task has run
  s.saved->wait_on(h2d_);
  const std::size_t out_bytes = static_cast<std::size_t>(n) * q_heads_ * head_dim_ * sizeof(Half);
  device_.copy_async(args.out, s.host_out.data(), out_bytes, h2d_);
  loaded_bytes_ += out_bytes;
  if (keeps_attention_scores_) {
    OFFGEN_CHECK(args.probs != nullptr,
                 "offloaded kv: a policy keeping attention scores needs the softmax rows");
    const std::size_t probs_bytes =
        static_cast<std::size_t>(n) * heads_ * capacity_ * sizeof(float);
    device_.copy_async(args.probs, s.host_probs.data(), probs_bytes, h2d_);
    loaded_bytes_ += probs_bytes;
  }
  s.out_ready->record(h2d_);
}

void OffloadedKv::finish_cpu(const BlockTask& task) {
  if (offloaded(task.gpu_batch) == 0) return;
  slot_of(task).out_ready->wait_on(compute_);
}

}  // namespace offgen
