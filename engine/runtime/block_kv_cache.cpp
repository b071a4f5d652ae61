#include "engine/runtime/block_kv_cache.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "engine/core/int_math.h"
#include "kernels/packed_kv.h"
#include "scheduler/kv_cache_layout.h"

namespace offgen {
namespace {

// The largest slots any sequence's caches need (C + 1, or pyramidkv's largest layer budget + 1).
int largest_cache_slots(const std::vector<const KvPolicy*>& policies, int layers) {
  int largest = 1;
  for (const KvPolicy* policy : policies) {
    largest = std::max(largest, policy->cache_slots(layers));
  }
  return largest;
}

}  // namespace

BlockKvCache::BlockKvCache(Device& device, Ops& ops, const ModelConfig& config,
                           std::vector<const KvPolicy*> policies,
                           const std::vector<GpuBatch>& gpu_batches, int max_prompt,
                           bool cpu_attention, Storage storage, int min_capacity,
                           bool speculative_pages, int min_pages_per_step)
    : config_(config),
      ops_(ops),
      policies_(std::move(policies)),
      block_(static_cast<int>(policies_.size())),
      max_prompt_(max_prompt),
      capacity_(std::max(largest_cache_slots(policies_, config.num_layers), min_capacity)),
      keeps_attention_scores_(!policies_.empty() && policies_.front()->needs_attention_scores()),
      storage_(storage),
      batches_(gpu_batches),
      trace_(device) {
  OFFGEN_CHECK(block_ > 0, "a KV cache needs at least one sequence");
  const bool per_layer = policies_.front()->layer_policy(0, config.num_layers) != nullptr;
  budgets_.resize(per_layer ? static_cast<std::size_t>(config.num_layers) : 1);
  for (std::size_t l = 0; l < budgets_.size(); ++l) {
    for (const KvPolicy* policy : policies_) {
      const auto layer = policy->layer_policy(static_cast<int>(l), config.num_layers);
      budgets_[l].push_back(layer ? layer->budget() : policy->budget());
    }
  }
  const int policy_page_size = policies_.front()->page_size();
  geometry_ = {config.num_heads, config.kv_heads(), config.head_dim(),
               capacity_,        policy_page_size,  page_count(capacity_, policy_page_size)};
  dense_layers_ = policies_.front()->dense_layers();
  for (const KvPolicy* policy : policies_) {
    OFFGEN_CHECK(policy->page_size() == policy_page_size && policy->dense_layers() == dense_layers_,
                 "KV cache: one block's sequences select pages of one size in the same layers");
  }
  // Quest's compact staging, for the most pages any sequence attends per step.
  int most_pages = min_pages_per_step;
  for (const KvPolicy* policy : policies_)
    most_pages = std::max(most_pages, policy->pages_per_step());
  most_pages = std::clamp(most_pages, 2, std::max(max_pages(), 2));
  const std::vector<int> offloaded_counts = offloaded_per_gpu_batch(gpu_batches);
  const bool any_offloaded =
      std::any_of(offloaded_counts.begin(), offloaded_counts.end(), [](int n) { return n > 0; });
  const int staged_capacity = any_offloaded
                                  ? compact_staged_capacity(capacity_, page_size(), most_pages,
                                                            cpu_attention, speculative_pages)
                                  : 0;
  KvCacheShape shape;
  shape.page_size = page_size();
  shape.staged_capacity = staged_capacity;
  shape.gpu_batches = gpu_batches;
  shape.capacity = capacity_;
  shape.max_prompt = max_prompt;
  shape.keeps_attention_scores = keeps_attention_scores_;
  shape.per_layer_budgets = per_layer;
  shape.cpu_attention = cpu_attention;
  shape.multiprocessors = device.multiprocessors();
  shape.storage = storage;
  const MemoryLayout layout = block_kv_cache_own_layout(config, shape);
  token_slot_ = layout.allocate(device, "token slots");
  write_slot_ = layout.allocate(device, "write slots");
  slot_count_ = layout.allocate(device, "slot counts");
  advancing_ = layout.allocate(device, "advancing");
  decode_scratch_ = layout.allocate(device, "decode attention scratch");
  key_sum_scratch_ = layout.allocate(device, "prefill key sum scratch");
  expanded_k_ = layout.allocate(device, "expanded k cache");
  expanded_v_ = layout.allocate(device, "expanded v cache");
  first_page_ = layout.allocate(device, "first pages");
  pages_per_step_ = layout.allocate(device, "pages per step");
  selected_ = layout.allocate(device, "chosen pages");
  selected_count_ = layout.allocate(device, "chosen page counts");
  staged_page_ = layout.allocate(device, "compact newest pages");
  staged_slot_count_ = layout.allocate(device, "compact slot counts");
  staged_write_slot_ = layout.allocate(device, "compact write slots");

  for (std::size_t i = 0; i < gpu_batches.size(); ++i) {
    const GpuBatch& g = gpu_batches[i];
    GpuBatchCache cache;
    cache.k = layout.allocate_all(device, "k cache", static_cast<int>(i));
    cache.v = layout.allocate_all(device, "v cache", static_cast<int>(i));
    cache.summary = layout.allocate_all(device, "page summaries", static_cast<int>(i));
    cache.splits = decode_splits(config, g, shape);
    if (keeps_attention_scores_) {
      const auto first = policies_.begin() + g.first;
      const std::vector<const KvPolicy*> batch_policies(first, first + g.size);
      cache.scores = std::make_unique<AttentionScoreState>(
          device, ops, batch_policies, config.num_layers, config.kv_heads(), capacity_, max_prompt);
    }
    gpu_batches_.push_back(std::move(cache));
  }
  std::vector<int> offloaded = offloaded_per_gpu_batch(gpu_batches);
  if (std::any_of(offloaded.begin(), offloaded.end(), [](int n) { return n > 0; })) {
    offloaded_ = std::make_unique<OffloadedKv>(device, ops, config, std::move(offloaded), capacity_,
                                               keeps_attention_scores_, cpu_attention, storage,
                                               page_size(), staged_capacity);
  }
  if (!keeps_attention_scores_) slots_.emplace(policies_, capacity_);
}

BlockKvCache::~BlockKvCache() = default;

std::uint64_t BlockKvCache::host_bytes() const {
  return offloaded_ ? offloaded_->host_cache_bytes() : 0;
}

std::uint64_t BlockKvCache::bytes() const {
  std::uint64_t total = host_bytes();
  for (const GpuBatchCache& cache : gpu_batches_) {
    for (const Buffer& b : cache.k) total += b.bytes();
    for (const Buffer& b : cache.v) total += b.bytes();
  }
  return total;
}

std::uint64_t BlockKvCache::policy_state_bytes() const {
  std::uint64_t total = 0;
  for (const GpuBatchCache& cache : gpu_batches_) total += cache.scores ? cache.scores->bytes() : 0;
  return total;
}

KvTraffic BlockKvCache::traffic() const {
  KvTraffic traffic = traffic_;
  if (offloaded_) {
    traffic.loaded_bytes = offloaded_->loaded_bytes();
    traffic.stored_bytes = offloaded_->stored_bytes();
  }
  return traffic;
}

void BlockKvCache::start_prefill(const PaddedBatch& prompts, StepStaging& staging) {
  OFFGEN_CHECK(prompts.batch == block_ && prompts.seq <= max_prompt_,
               "KV cache: a prefill of {}x{} for a cache sized {}x{}", prompts.batch, prompts.seq,
               block_, max_prompt_);
  seen_.assign(prompts.lengths.begin(), prompts.lengths.end());
  if (page_size() > 0) {
    // Every page of each prompt is summarised after its store: the prompt's slots, from page 0
    // (a selection policy keeps every token, in position order).
    step_first_page_.assign(static_cast<std::size_t>(block_), 0);
    staging.upload(slot_count_.data(), seen_.data(), bytes_of<std::int32_t>(block_));
    staging.upload(first_page_.data(), step_first_page_.data(), bytes_of<std::int32_t>(block_));
  }
  if (!slots_) return;  // each layer's policy step writes token_slot_ after its attention
  // The policy picks the prompt tokens each cache keeps (the same in every layer and head).
  slots_->start(prompts.lengths);
  const int heads = config_.kv_heads();
  const std::int64_t rows = std::int64_t{prompts.batch} * prompts.seq;
  std::vector<std::int32_t> token_slot(static_cast<std::size_t>(rows * heads), -1);
  for (int b = 0; b < prompts.batch; ++b) {
    const int len = prompts.lengths[static_cast<std::size_t>(b)];
    const int pad = prompts.seq - len;
    const std::vector<std::int32_t> prompt = slots_->prompt_slots(b, len);
    for (int h = 0; h < heads; ++h) {
      std::copy(prompt.begin(), prompt.end(),
                token_slot.begin() + (std::int64_t{b} * heads + h) * prompts.seq + pad);
    }
  }
  staging.upload(token_slot_.data(), token_slot.data(), bytes_of<std::int32_t>(rows * heads));
}

std::span<const std::int32_t> BlockKvCache::start_decode(std::span<const std::uint8_t> advancing,
                                                         StepStaging& staging) {
  OFFGEN_CHECK(advancing.size() == static_cast<std::size_t>(block_) && !seen_.empty(),
               "KV cache: a decode step of {} sequences needs a prefill of {} first",
               advancing.size(), block_);
  const std::size_t n = advancing.size();
  step_positions_.resize(n);
  step_counts_.resize(budgets_.size() * n);
  for (std::size_t b = 0; b < n; ++b) {
    // HF position of the new token: the number of real tokens before it (cached or evicted).
    step_positions_[b] = seen_[b];
    // Every real token entered the cache and only a full one evicts: it holds min(seen, C), and
    // the step attends over those plus the new token.
    for (std::size_t row = 0; row < budgets_.size(); ++row) {
      step_counts_[row * n + b] = std::min(seen_[b], budgets_[row][b]) + 1;
    }
  }
  staging.upload(slot_count_.data(), step_counts_.data(),
                 bytes_of<std::int32_t>(static_cast<std::int64_t>(step_counts_.size())));
  staging.upload(advancing_.data(), advancing.data(), bytes_of<std::uint8_t>(block_));
  if (page_size() > 0) {
    // The new token's page is summarised again; each sequence attends its policy's pages.
    step_first_page_.resize(n);
    step_pages_per_step_.resize(n);
    for (std::size_t b = 0; b < n; ++b) {
      step_first_page_[b] = (step_counts_[b] - 1) / page_size();
      step_pages_per_step_[b] = std::clamp(policies_[b]->pages_per_step(), 2, max_pages());
    }
    staging.upload(first_page_.data(), step_first_page_.data(), bytes_of<std::int32_t>(block_));
    staging.upload(pages_per_step_.data(), step_pages_per_step_.data(),
                   bytes_of<std::int32_t>(block_));
  }
  if (slots_) {
    // Position-based policies keep the same tokens in every head: one slot per sequence.
    const int heads = config_.kv_heads();
    step_sequence_slot_.resize(n);
    step_slot_counts_.resize(n);
    step_write_slot_.resize(n * static_cast<std::size_t>(heads));
    slots_->plan_decode(step_sequence_slot_.data(), step_slot_counts_.data());
    for (std::size_t b = 0; b < n; ++b) {
      std::fill_n(step_write_slot_.begin() + static_cast<std::ptrdiff_t>(b * heads), heads,
                  step_sequence_slot_[b]);
    }
    staging.upload(write_slot_.data(), step_write_slot_.data(),
                   bytes_of<std::int32_t>(std::int64_t{block_} * heads));
  }  // else each layer's policy state holds its write slots
  if (compact()) {
    // Where the compact staging keeps each newest page (last of the choice), the slots it then
    // holds, and the new token's slot there.
    OFFGEN_CHECK(slots_.has_value(), "KV cache: a compact staging needs position-based slots");
    const int heads = config_.kv_heads();
    step_staged_page_.resize(n);
    step_staged_count_.resize(n);
    step_staged_write_.resize(n * static_cast<std::size_t>(heads));
    for (std::size_t b = 0; b < n; ++b) {
      const int t = step_counts_[b];
      const int per_step = step_pages_per_step_[b];
      OFFGEN_CHECK(std::int64_t{per_step} * page_size() <= offloaded_->staged_capacity(),
                   "KV cache: sequence {} attends {} pages per step, more than the compact staging "
                   "holds ({} slots)",
                   b, per_step, offloaded_->staged_capacity());
      step_staged_page_[b] = kernels::staged_newest_page(t, page_size(), per_step);
      step_staged_count_[b] =
          static_cast<std::int32_t>(kernels::selected_slots(t, page_size(), per_step));
      for (int h = 0; h < heads; ++h) {
        const std::size_t at = b * static_cast<std::size_t>(heads) + static_cast<std::size_t>(h);
        const int within = step_write_slot_[at] - step_first_page_[b] * page_size();
        OFFGEN_CHECK(within >= 0 && within < page_size(),
                     "KV cache: sequence {}'s new token is not on its newest page", b);
        step_staged_write_[at] = step_staged_page_[b] * page_size() + within;
      }
    }
    staging.upload(staged_page_.data(), step_staged_page_.data(), bytes_of<std::int32_t>(block_));
    staging.upload(staged_slot_count_.data(), step_staged_count_.data(),
                   bytes_of<std::int32_t>(block_));
    staging.upload(staged_write_slot_.data(), step_staged_write_.data(),
                   bytes_of<std::int32_t>(std::int64_t{block_} * heads));
  }
  return step_positions_;
}

void BlockKvCache::commit(std::span<const std::uint8_t> advancing) {
  if (slots_) slots_->commit(advancing, step_positions_);
  const std::size_t n = advancing.size();
  // K and V of one token in every (layer, head), as stored; the step attends over
  // step_counts_[b] of them.
  const auto row_bytes = static_cast<std::uint64_t>(config_.num_layers) * config_.kv_heads() * 2 *
                         kv_row_bytes(config_, storage_);
  // A row of step_counts_ stands for all the layers, or for one of them.
  const std::uint64_t layers_per_row = budgets_.size() > 1 ? 1 : config_.num_layers;
  const std::uint64_t layer_row_bytes = row_bytes / config_.num_layers;
  // Page selection's dense layers attend every slot, the others their chosen pages.
  const auto dense = static_cast<std::uint64_t>(
      page_size() > 0 ? std::clamp(dense_layers_, 0, config_.num_layers) : 0);
  for (std::size_t i = 0; i < step_counts_.size(); ++i) {
    const auto count = static_cast<std::uint64_t>(step_counts_[i]);
    const auto attended =
        static_cast<std::uint64_t>(attended_slots(static_cast<int>(i % n), step_counts_[i]));
    traffic_.read_bytes += layer_row_bytes * (dense * count + (layers_per_row - dense) * attended);
  }
  traffic_.written_bytes += row_bytes * n;
  ++traffic_.decode_steps;
  for (std::size_t b = 0; b < n; ++b) {
    if (advancing[b]) ++seen_[b];
  }
}

int BlockKvCache::attended_slots(int b, int count) const {
  if (page_size() == 0) return count;
  return static_cast<int>(kernels::selected_slots(
      count, page_size(), step_pages_per_step_[static_cast<std::size_t>(b)]));
}

OffloadedPages BlockKvCache::offloaded_pages(const BlockTask& task, bool prefill) {
  if (!selects(task.layer)) return {};
  const std::int64_t first = task.batch.first + task.batch.resident;  // its first offloaded one
  const std::int64_t heads = config_.kv_heads();
  OffloadedPages pages;
  pages.slot_count = slot_count_.as<std::int32_t>() + first;
  const bool on_host = !prefill && offloaded_->cpu_attention();
  pages.first_page = (on_host ? step_first_page_.data() : first_page_.as<std::int32_t>()) + first;
  if (!prefill) {
    pages.pages_per_step =
        (on_host ? step_pages_per_step_.data() : pages_per_step_.as<std::int32_t>()) + first;
  }
  pages.selected = selected_.as<std::int32_t>() + first * heads * max_pages();
  pages.selected_count = selected_count_.as<std::int32_t>() + first * heads;
  if (!prefill && compact()) {
    pages.staged_page = staged_page_.as<std::int32_t>() + first;
    pages.staged_slot_count = staged_slot_count_.as<std::int32_t>() + first;
    pages.staged_write_slot = staged_write_slot_.as<std::int32_t>() + first * heads;
  }
  return pages;
}

std::pair<std::size_t, int> BlockKvCache::locate(int b) const {
  for (std::size_t i = 0; i < batches_.size(); ++i) {
    const GpuBatch& g = batches_[i];
    if (b >= g.first && b < g.first + g.size) return {i, b - g.first};
  }
  fail("KV cache: no sequence {} in a block of {}", b, block_);
}

bool BlockKvCache::resident(int b) const {
  const auto [batch, local] = locate(b);
  return local < batches_[batch].resident;
}

BlockKvCache::SequenceKv BlockKvCache::sequence_kv(int b, int layer) {
  const auto [batch, local] = locate(b);
  const int resident = batches_[batch].resident;
  if (local < resident) {
    GpuBatchCache& cache = gpu_batches_[batch];
    const auto l = static_cast<std::size_t>(layer);
    return {&cache.k[l], &cache.v[l], resident, local};
  }
  return {&offloaded_->host_k(layer, static_cast<int>(batch)),
          &offloaded_->host_v(layer, static_cast<int>(batch)),
          offloaded_->offloaded(static_cast<int>(batch)), local - resident};
}

Buffer& BlockKvCache::sequence_summary(int b, int layer) {
  const auto [batch, local] = locate(b);
  if (local < batches_[batch].resident) {
    return gpu_batches_[batch].summary[static_cast<std::size_t>(layer)];
  }
  return offloaded_->summary(layer, static_cast<int>(batch));
}

void BlockKvCache::adopt(Device& device, Stream& stream, int b, BlockKvCache& from, int from_b,
                         const KvPolicy* policy) {
  OFFGEN_CHECK(from.capacity_ == capacity_ && from.storage_ == storage_ &&
                   from.keeps_attention_scores_ == keeps_attention_scores_ &&
                   from.budgets_.size() == budgets_.size() &&
                   policy->cache_slots(config_.num_layers) <= capacity_,
               "KV cache: sequence {} cannot take sequence {} of another cache ({} and {} slots)",
               b, from_b, capacity_, from.capacity_);
  // Plain names, not structured bindings: lambdas below capture them (clang before 16 cannot).
  const std::pair<std::size_t, int> target_at = locate(b);
  const std::pair<std::size_t, int> source_at = from.locate(from_b);
  const std::size_t batch = target_at.first;
  const int local = target_at.second;
  const std::size_t from_batch = source_at.first;
  const int from_local = source_at.second;
  const GpuBatchCache& source = from.gpu_batches_[from_batch];
  GpuBatchCache& target = gpu_batches_[batch];
  // One sequence's K (or V) of a layer: heads x capacity rows, fp16 or packed (codes, then
  // parameters, each a contiguous run per sequence), on the gpu tier or in a host cache.
  const std::int64_t rows = std::int64_t{config_.kv_heads()} * capacity_;
  const int head_dim = config_.head_dim();
  const auto copy_sequence = [&](const Buffer& dst, int dst_count, int dst_index, const Buffer& src,
                                 int src_count, int src_index) {
    if (storage_ == Storage::fp16) {
      const std::uint64_t bytes = static_cast<std::uint64_t>(rows) * head_dim * sizeof(Half);
      device.copy_async(static_cast<std::byte*>(dst.data()) + bytes * dst_index,
                        static_cast<const std::byte*>(src.data()) + bytes * src_index, bytes,
                        stream);
      return;
    }
    const kernels::PackedKv to = kernels::packed_kv(dst.data(), rows * dst_count, head_dim);
    const kernels::PackedKv at = kernels::packed_kv(src.data(), rows * src_count, head_dim);
    const kernels::QuantShape one = kernels::packed_kv_shape(rows, head_dim);
    const auto code_bytes = static_cast<std::uint64_t>(one.data_bytes());
    const std::uint64_t param_bytes = kernels::packed_kv_bytes(rows, head_dim) - code_bytes;
    device.copy_async(to.codes + code_bytes * dst_index, at.codes + code_bytes * src_index,
                      code_bytes, stream);
    device.copy_async(reinterpret_cast<std::byte*>(to.params) + param_bytes * dst_index,
                      reinterpret_cast<const std::byte*>(at.params) + param_bytes * src_index,
                      param_bytes, stream);
  };
  OFFGEN_CHECK(from.page_size() == page_size() && policy->page_size() == page_size() &&
                   from.dense_layers_ == dense_layers_,
               "KV cache: sequence {} cannot take a sequence that selects pages of another size",
               b);
  OFFGEN_CHECK(!compact() || std::int64_t{std::max(policy->pages_per_step(), 2)} * page_size() <=
                                 offloaded_->staged_capacity(),
               "KV cache: sequence {} cannot take a sequence attending more pages per step than "
               "the compact staging holds",
               b);
  // One sequence's page summaries of a layer (a contiguous run, where it attends).
  const std::uint64_t summary_bytes = page_summary_bytes(config_, 1, max_pages());
  for (int l = 0; l < config_.num_layers; ++l) {
    const SequenceKv to = sequence_kv(b, l);
    const SequenceKv at = from.sequence_kv(from_b, l);
    copy_sequence(*to.k, to.count, to.index, *at.k, at.count, at.index);
    copy_sequence(*to.v, to.count, to.index, *at.v, at.count, at.index);
    if (selects(l)) {
      device.copy_async(
          static_cast<std::byte*>(sequence_summary(b, l).data()) + summary_bytes * to.index,
          static_cast<const std::byte*>(from.sequence_summary(from_b, l).data()) +
              summary_bytes * at.index,
          summary_bytes, stream);
    }
  }
  const auto at = static_cast<std::size_t>(b);
  policies_[at] = policy;
  for (std::size_t l = 0; l < budgets_.size(); ++l) {
    const auto layer = policy->layer_policy(static_cast<int>(l), config_.num_layers);
    budgets_[l][at] = layer ? layer->budget() : policy->budget();
    OFFGEN_CHECK(budgets_[l][at] == from.budgets_[l][static_cast<std::size_t>(from_b)],
                 "KV cache: sequence {} is adopted under another budget than it was prefilled "
                 "with",
                 b);
  }
  seen_[at] = from.seen_[static_cast<std::size_t>(from_b)];
  if (target.scores) {
    target.scores->adopt(device, stream, local, *source.scores, from_local);
  } else {
    slots_->adopt(b, *from.slots_, from_b, policy);
  }
}

void BlockKvCache::park(int b, const KvPolicy* policy) {
  policies_[static_cast<std::size_t>(b)] = policy;
  if (slots_) slots_->park(b, policy);
}

void BlockKvCache::begin_pass() {
  if (offloaded_) offloaded_->begin_pass();
}

void BlockKvCache::prefetch(const BlockTask& task) {
  // A layer that selects pages brings in only the chosen ones, once its query has chosen them.
  if (offloaded_ && !selects(task.layer)) offloaded_->prefetch(task);
}

bool BlockKvCache::speculates(const BlockTask& current, const BlockTask& next) const {
  return offloaded_ && !offloaded_->cpu_attention() && selects(next.layer) &&
         next.layer == current.layer + 1 && next.gpu_batch == current.gpu_batch &&
         next.batch.offloaded() > 0;
}

void BlockKvCache::speculate(const BlockTask& next, const Half* qkv, std::int64_t q_stride) {
  const std::int64_t first = next.batch.first + next.batch.resident;
  offloaded_->speculate(next, qkv, q_stride,
                        slot_count_.as<std::int32_t>() + count_row(next.layer) + first,
                        offloaded_pages(next, /*prefill=*/false));
}

void BlockKvCache::attend_prefill(const BlockTask& task, const Half* qkv, const std::uint8_t* valid,
                                  Half* out, int seq, kernels::PrefillMath math) {
  GpuBatchCache& cache = gpu_batches_[static_cast<std::size_t>(task.gpu_batch)];
  const GpuBatch& g = task.batch;
  const int heads = config_.kv_heads();  // of the cache, its slots and scores
  const int head_dim = config_.head_dim();
  std::int32_t* token_slot = token_slot_.as<std::int32_t>() + std::int64_t{g.first} * heads * seq;
  kernels::PrefillAttentionArgs args;
  args.qkv = qkv;
  args.valid = valid;
  args.out = out;
  args.batch = g.size;
  args.seq = seq;
  args.heads = config_.num_heads;
  args.kv_heads = heads;
  args.head_dim = head_dim;
  args.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  args.prefill_math = math;
  if (cache.scores) {
    args.key_prob_sums = cache.scores->prefill_probs();
    args.key_sum_queries = cache.scores->prefill_score_queries();
    args.key_sum_scratch = key_sum_scratch_.as<float>();
  }
  ops_.prefill_attention(args);
  if (cache.scores) cache.scores->after_prefill_attention(task.layer, seq, valid, token_slot);
  if (g.resident > 0) {
    Buffer& k = cache.k[static_cast<std::size_t>(task.layer)];
    Buffer& v = cache.v[static_cast<std::size_t>(task.layer)];
    const bool int4 = storage_ == Storage::int4;
    ops_.store_prefill_kv({.qkv = qkv,
                           .token_slot = token_slot,
                           .k_cache = int4 ? expanded_k_.as<Half>() : k.as<Half>(),
                           .v_cache = int4 ? expanded_v_.as<Half>() : v.as<Half>(),
                           .batch = g.resident,
                           .seq = seq,
                           .heads = config_.num_heads,
                           .head_dim = head_dim,
                           .capacity = capacity_,
                           .kv_heads = heads});
    if (selects(task.layer)) {  // from the fp16 keys as stored, before int4 packing
      ops_.page_summary(
          geometry_.summary_args(int4 ? expanded_k_.as<Half>() : k.as<Half>(),
                                 cache.summary[static_cast<std::size_t>(task.layer)].as<Half>(),
                                 slot_count_.as<std::int32_t>() + g.first,
                                 first_page_.as<std::int32_t>() + g.first, g.resident));
    }
    if (int4) {
      // Every slot is packed, the ones no token went to as well (never attended: a slot counts
      // only once a token is written to it, and a write packs its row again).
      const std::int64_t rows = std::int64_t{g.resident} * heads * capacity_;
      kernels::pack_kv_rows(ops_, expanded_k_.as<Half>(), k.data(), rows, head_dim);
      kernels::pack_kv_rows(ops_, expanded_v_.as<Half>(), v.data(), rows, head_dim);
    }
  }
  if (g.offloaded() > 0) {
    const std::int64_t resident = g.resident;
    offloaded_->store_prefill(task, qkv + resident * seq * config_.qkv_dim(),
                              token_slot + resident * heads * seq, seq,
                              offloaded_pages(task, /*prefill=*/true));
  }
}

void BlockKvCache::attend_decode(const BlockTask& task, const Half* qkv,
                                 const std::int32_t* positions, Half* out) {
  GpuBatchCache& cache = gpu_batches_[static_cast<std::size_t>(task.gpu_batch)];
  const GpuBatch& g = task.batch;
  const int heads = config_.kv_heads();  // of the cache, its slots and scores
  const int h = config_.hidden_size;     // of the attention output: every query head
  const std::int64_t resident = g.resident;
  const std::int32_t* write_slot =
      cache.scores ? cache.scores->write_slots(task.layer)
                   : write_slot_.as<std::int32_t>() + std::int64_t{g.first} * heads;
  kernels::DecodeAttentionArgs args;
  args.qkv = qkv;
  args.slot_count = slot_count_.as<std::int32_t>() + count_row(task.layer) + g.first;
  args.out = out;
  args.batch = g.resident;
  args.heads = config_.num_heads;
  args.kv_heads = heads;
  args.head_dim = config_.head_dim();
  args.capacity = capacity_;
  args.scale = 1.0f / std::sqrt(static_cast<float>(args.head_dim));
  if (cache.scores) args.probs = cache.scores->decode_probs();
  args.split = cache.splits.resident;
  args.split_scratch = decode_scratch_.as<float>();

  // The host-resident sequences: the same arguments from their first row on.
  kernels::DecodeAttentionArgs off = args;
  off.split = cache.splits.offloaded;
  off.qkv = args.qkv + resident * config_.qkv_dim();
  off.slot_count = args.slot_count + resident;
  off.out = args.out + resident * h;
  off.batch = g.offloaded();
  if (args.probs != nullptr) off.probs = args.probs + resident * heads * capacity_;
  const std::int32_t* off_write_slot = write_slot + resident * heads;
  const bool cpu_attention = offloaded_ && offloaded_->cpu_attention();

  // CPU attention first, so the host works while the gpu attends the resident sequences.
  if (g.offloaded() > 0 && cpu_attention) {
    offloaded_->decode_cpu(task, off_write_slot,
                           step_counts_.data() + count_row(task.layer) + g.first + g.resident, off,
                           offloaded_pages(task, /*prefill=*/false));
  }
  if (g.resident > 0) {
    Buffer& k = cache.k[static_cast<std::size_t>(task.layer)];
    Buffer& v = cache.v[static_cast<std::size_t>(task.layer)];
    const bool int4 = storage_ == Storage::int4;
    Half* k_cache = int4 ? expanded_k_.as<Half>() : k.as<Half>();
    Half* v_cache = int4 ? expanded_v_.as<Half>() : v.as<Half>();
    const std::int64_t rows = std::int64_t{g.resident} * heads * capacity_;
    // A step may compute only the GPU batch's first sequences (BlockRunner::decode's running
    // rows); the packed buffers stay laid out for all of its resident ones.
    const std::int64_t layout_rows =
        std::int64_t{batches_[static_cast<std::size_t>(task.gpu_batch)].resident} * heads *
        capacity_;
    if (int4) {
      kernels::expand_kv_rows(ops_, k.data(), k_cache, rows, args.head_dim, layout_rows);
      kernels::expand_kv_rows(ops_, v.data(), v_cache, rows, args.head_dim, layout_rows);
    }
    ops_.append_kv({.qkv = args.qkv,
                    .write_slot = write_slot,
                    .k_cache = k_cache,
                    .v_cache = v_cache,
                    .batch = g.resident,
                    .heads = config_.num_heads,
                    .head_dim = args.head_dim,
                    .capacity = capacity_,
                    .kv_heads = heads});
    if (int4) {
      for (auto [fp16, buffer] : {std::pair{k_cache, &k}, std::pair{v_cache, &v}}) {
        const kernels::PackedKv packed =
            kernels::packed_kv(buffer->data(), layout_rows, args.head_dim);
        ops_.quantize_kv_slots({.cache = fp16,
                                .write_slot = write_slot,
                                .data = packed.codes,
                                .params = packed.params,
                                .batch = g.resident,
                                .heads = heads,
                                .capacity = capacity_,
                                .head_dim = args.head_dim});
      }
    }
    args.k_cache = k_cache;
    args.v_cache = v_cache;
    if (selects(task.layer)) {
      // The new token's page again, then this layer's query chooses the pages it attends.
      select_pages(
          ops_, geometry_, k_cache, cache.summary[static_cast<std::size_t>(task.layer)].as<Half>(),
          first_page_.as<std::int32_t>() + g.first, pages_per_step_.as<std::int32_t>() + g.first,
          selected_.as<std::int32_t>() + std::int64_t{g.first} * heads * max_pages(),
          selected_count_.as<std::int32_t>() + std::int64_t{g.first} * heads, args);
    }
    ops_.decode_attention(args);
    trace_.dump_cache("decode-kv", task.layer, g.resident, heads, capacity_, args.head_dim, k_cache,
                      v_cache, args.out, config_.num_heads);
  }
  if (g.offloaded() > 0) {
    if (cpu_attention) {
      offloaded_->finish_cpu(task);
    } else {
      offloaded_->decode_gpu(task, off_write_slot, off, offloaded_pages(task, /*prefill=*/false));
    }
  }
  if (cache.scores) {
    cache.scores->after_decode_attention(task.layer, advancing_.as<std::uint8_t>() + g.first,
                                         positions + g.first, args.slot_count);
  }
}

}  // namespace offgen
