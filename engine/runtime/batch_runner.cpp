#include "engine/runtime/batch_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/core/error.h"

namespace offgen {
namespace {

using kernels::Activation;

template <typename T>
std::size_t bytes_of(std::int64_t count) {
  return static_cast<std::size_t>(count) * sizeof(T);
}

int largest_budget(const std::vector<std::unique_ptr<KvPolicy>>& policies) {
  int largest = 0;
  for (const auto& policy : policies) largest = std::max(largest, policy->budget());
  return largest;
}

}  // namespace

BatchRunner::BatchRunner(Device& device, Ops& ops, const OptConfig& config,
                         const ModelWeights& weights, int max_prompt, int max_new,
                         std::vector<std::unique_ptr<KvPolicy>> policies, WeightStreamer* streamer,
                         const BlockShape& shape)
    : device_(device),
      ops_(ops),
      config_(config),
      weights_(weights),
      compute_(device.stream(StreamRole::compute)),
      batch_(static_cast<int>(policies.size())),
      max_prompt_(max_prompt),
      capacity_(largest_budget(policies) + 1),
      policies_(std::move(policies)),
      streamer_(streamer),
      shape_(shape) {
  (void)max_new;  // the policies' budgets already size the cache for the decode steps
  const int batch = batch_;
  OFFGEN_CHECK(batch > 0 && max_prompt > 0 && max_new >= 0,
               "batch runner needs a positive batch and prompt length (got {} and {})", batch,
               max_prompt);
  for (const auto& policy : policies_) {
    OFFGEN_CHECK(policy->kind() == policies_.front()->kind(),
                 "a batch runs one KV policy ({} and {} given)", policy_name(policy->kind()),
                 policy_name(policies_.front()->kind()));
  }
  gpu_batches_ = split_block(batch, shape);
  const int lane_batch = gpu_batch_size(batch, shape.num_gpu_batches);
  out_chunk_ = std::max(lane_batch, 64);
  const std::int64_t rows = static_cast<std::int64_t>(batch) * max_prompt;
  lane_rows_ = lane_batch * max_prompt;
  const std::int64_t lane_rows = lane_rows_;
  const std::int64_t h = config.hidden_size;
  const std::int64_t p = config.word_embed_proj_dim;
  const std::int64_t f = config.ffn_dim;
  const std::int64_t wide = std::max(h, p);
  const Tier gpu = Tier::gpu;

  ids_ = device.allocate(gpu, bytes_of<std::int32_t>(rows));
  valid_ = device.allocate(gpu, bytes_of<std::uint8_t>(rows));
  positions_ = device.allocate(gpu, bytes_of<std::int32_t>(rows));
  token_slot_ = device.allocate(gpu, bytes_of<std::int32_t>(rows * config.num_heads));
  write_slot_ =
      device.allocate(gpu, bytes_of<std::int32_t>(std::int64_t{batch} * config.num_heads));
  slot_count_ = device.allocate(gpu, bytes_of<std::int32_t>(batch));
  advancing_ = device.allocate(gpu, bytes_of<std::uint8_t>(batch));
  picks_ = device.allocate(gpu, bytes_of<std::int32_t>(batch));
  sample_params_ = device.allocate(gpu, bytes_of<kernels::SampleParams>(batch));
  newest_ = device.allocate(gpu, bytes_of<std::int32_t>(batch));
  host_picks_ = device.allocate(Tier::pinned, bytes_of<std::int32_t>(batch));
  // Every step's inputs fit: ids + valid + positions + per-head token slots of a prefill, or the
  // arrays of a decode step, the newest row of each sequence, the sampling parameters (four
  // words a sequence), plus one chunk of output row ids and targets.
  const std::int64_t heads = config.num_heads;
  static_assert(sizeof(kernels::SampleParams) == 4 * sizeof(std::int32_t));
  staging_ = device.allocate(
      Tier::pinned,
      bytes_of<std::int32_t>((3 + heads) * rows + (9 + heads) * batch + 2 * out_chunk_) + 1024);

  if (shape.activations_on_host) {
    host_activations_ =
        std::make_unique<HostActivations>(device, gpu_batches_, max_prompt, config.hidden_size);
  } else {
    x_ = device.allocate(gpu, bytes_of<Half>(rows * h));
  }
  t_ = device.allocate(gpu, bytes_of<Half>(lane_rows * wide));
  emb_ = config.has_projections() ? device.allocate(gpu, bytes_of<Half>(lane_rows * p)) : Buffer();
  qkv_ = device.allocate(gpu, bytes_of<Half>(lane_rows * 3 * h));
  attn_ = device.allocate(gpu, bytes_of<Half>(lane_rows * h));
  ffn_ = device.allocate(gpu, bytes_of<Half>(lane_rows * f));

  out_rows_ = device.allocate(gpu, bytes_of<std::int32_t>(out_chunk_));
  gathered_ = device.allocate(gpu, bytes_of<Half>(out_chunk_ * h));
  projected_ = device.allocate(gpu, bytes_of<Half>(out_chunk_ * p));
  logits_ = device.allocate(gpu, bytes_of<float>(std::int64_t{out_chunk_} * config.vocab_size));
  targets_ = device.allocate(gpu, bytes_of<std::int32_t>(out_chunk_));
  logprobs_ = device.allocate(gpu, bytes_of<float>(out_chunk_));
  host_logprobs_ = device.allocate(Tier::pinned, bytes_of<float>(out_chunk_));

  scored_ = policies_.front()->needs_scores();
  std::vector<int> offloaded;
  for (const GpuBatch& g : gpu_batches_) {
    Lane lane;
    lane.batch = g;
    const std::int64_t kv_elements =
        std::int64_t{g.resident} * config.num_heads * capacity_ * config.head_dim();
    if (g.resident > 0) {
      for (int l = 0; l < config.num_layers; ++l) {
        lane.k_cache.push_back(device.allocate(gpu, bytes_of<Half>(kv_elements)));
        lane.v_cache.push_back(device.allocate(gpu, bytes_of<Half>(kv_elements)));
      }
    }
    if (scored_) {
      std::vector<const KvPolicy*> lane_policies;
      for (int b = g.first; b < g.first + g.size; ++b) {
        lane_policies.push_back(policies_[static_cast<std::size_t>(b)].get());
      }
      lane.scored = std::make_unique<ScoredKvState>(device, ops, lane_policies, config.num_layers,
                                                    config.num_heads, capacity_, max_prompt);
    }
    offloaded.push_back(g.offloaded());
    lanes_.push_back(std::move(lane));
  }
  if (std::any_of(offloaded.begin(), offloaded.end(), [](int n) { return n > 0; })) {
    offloaded_kv_ = std::make_unique<OffloadedKv>(device, ops, config, std::move(offloaded),
                                                  capacity_, scored_, shape.cpu_attention);
  }
  if (offloaded_kv_ || host_activations_) {
    kv_streams_[0] = &device.stream(StreamRole::h2d_kv);
    kv_streams_[1] = &device.stream(StreamRole::d2h_kv);
  }
  if (!scored_) {
    std::vector<const KvPolicy*> all;
    for (const auto& policy : policies_) all.push_back(policy.get());
    slots_.emplace(std::move(all), capacity_);
  }
}

BatchRunner::~BatchRunner() {
  // Queued kernels still reference this runner's buffers.
  try {
    sync();
  } catch (const std::exception& e) {
    spdlog::warn("batch runner: a stream failed while shutting down: {}", e.what());
  }
}

std::uint64_t BatchRunner::kv_bytes() const {
  std::uint64_t total = kv_host_bytes();
  for (const Lane& lane : lanes_) {
    for (const Buffer& b : lane.k_cache) total += b.bytes();
    for (const Buffer& b : lane.v_cache) total += b.bytes();
  }
  return total;
}

std::uint64_t BatchRunner::policy_state_bytes() const {
  std::uint64_t total = 0;
  for (const Lane& lane : lanes_) total += lane.scored ? lane.scored->bytes() : 0;
  return total;
}

BatchRunner::KvTraffic BatchRunner::kv_traffic() const {
  KvTraffic traffic = traffic_;
  if (offloaded_kv_) {
    traffic.loaded_bytes = offloaded_kv_->loaded_bytes();
    traffic.stored_bytes = offloaded_kv_->stored_bytes();
  }
  return traffic;
}

void BatchRunner::upload(void* device_dst, const void* host_src, std::size_t bytes) {
  const std::size_t aligned = (bytes + 15) / 16 * 16;
  OFFGEN_CHECK(staging_used_ + aligned <= staging_.bytes(), "batch runner: staging overflow");
  auto* host = static_cast<std::byte*>(staging_.data()) + staging_used_;
  std::memcpy(host, host_src, bytes);
  staging_used_ += aligned;
  device_.copy_async(device_dst, host, bytes, compute_);
}

void BatchRunner::sync() {
  compute_.synchronize();
  // The KV streams' host tasks read host arrays of the step (its slot counts).
  for (Stream* stream : kv_streams_) {
    if (stream != nullptr) stream->synchronize();
  }
  staging_used_ = 0;  // every copy out of staging has run
}

void BatchRunner::embed(const Lane& lane, Half* x) {
  const auto& w = weights_;
  const int h = config_.hidden_size;
  const int p = config_.word_embed_proj_dim;
  const std::int64_t first = std::int64_t{lane.batch.first} * last_seq_;
  const std::int64_t rows = std::int64_t{lane.batch.size} * last_seq_;
  const std::int32_t* ids = ids_.as<std::int32_t>() + first;
  if (config_.has_projections()) {
    ops_.gather_rows({.table = w.embed_tokens,
                      .ids = ids,
                      .out = emb_.as<Half>(),
                      .table_rows = config_.vocab_size,
                      .rows = rows,
                      .dim = p});
    ops_.linear({.x = emb_.as<Half>(),
                 .weight = w.project_in,
                 .y = x,
                 .rows = rows,
                 .out_features = h,
                 .in_features = p});
  } else {
    ops_.gather_rows({.table = w.embed_tokens,
                      .ids = ids,
                      .out = x,
                      .table_rows = config_.vocab_size,
                      .rows = rows,
                      .dim = h});
  }
  ops_.add_position_embeddings({.x = x,
                                .table = w.embed_positions,
                                .positions = positions_.as<std::int32_t>() + first,
                                .rows = rows,
                                .dim = h,
                                .offset = config_.position_offset});
}

void BatchRunner::attend_decode(int index, int lane_index, int task) {
  Lane& lane = lanes_[static_cast<std::size_t>(lane_index)];
  const GpuBatch& g = lane.batch;
  const int h = config_.hidden_size;
  const int heads = config_.num_heads;
  const std::int64_t resident = g.resident;
  const std::int32_t* write_slot =
      lane.scored ? lane.scored->write_slots(index)
                  : write_slot_.as<std::int32_t>() + std::int64_t{g.first} * heads;
  kernels::DecodeAttentionArgs args;
  args.qkv = qkv_.as<Half>();
  args.slot_count = slot_count_.as<std::int32_t>() + g.first;
  args.out = attn_.as<Half>();
  args.batch = g.resident;
  args.heads = heads;
  args.head_dim = config_.head_dim();
  args.capacity = capacity_;
  args.scale = 1.0f / std::sqrt(static_cast<float>(args.head_dim));
  if (lane.scored) args.probs = lane.scored->decode_probs();

  // The host-resident sequences: the same arguments from their first row on.
  kernels::DecodeAttentionArgs off = args;
  off.qkv = args.qkv + resident * 3 * h;
  off.slot_count = args.slot_count + resident;
  off.out = args.out + resident * h;
  off.batch = g.offloaded();
  if (args.probs != nullptr) off.probs = args.probs + resident * heads * capacity_;
  const std::int32_t* off_write_slot = write_slot + resident * heads;
  const OffloadedKv::Task kv_task{task, index, lane_index};
  const bool cpu_attention = offloaded_kv_ && offloaded_kv_->cpu_attention();

  // CPU attention first, so the host works while the gpu attends the resident sequences.
  if (g.offloaded() > 0 && cpu_attention) {
    offloaded_kv_->decode_cpu(kv_task, off_write_slot, step_counts_.data() + g.first + g.resident,
                              off);
  }
  if (g.resident > 0) {
    Half* k_cache = lane.k_cache[static_cast<std::size_t>(index)].as<Half>();
    Half* v_cache = lane.v_cache[static_cast<std::size_t>(index)].as<Half>();
    ops_.append_kv({.qkv = args.qkv,
                    .write_slot = write_slot,
                    .k_cache = k_cache,
                    .v_cache = v_cache,
                    .batch = g.resident,
                    .heads = heads,
                    .head_dim = args.head_dim,
                    .capacity = capacity_});
    args.k_cache = k_cache;
    args.v_cache = v_cache;
    ops_.decode_attention(args);
  }
  if (g.offloaded() > 0) {
    if (cpu_attention) {
      offloaded_kv_->finish_cpu(kv_task);
    } else {
      offloaded_kv_->decode_gpu(kv_task, off_write_slot, off);
    }
  }
  if (lane.scored) {
    lane.scored->after_decode_attention(index, advancing_.as<std::uint8_t>() + g.first,
                                        positions_.as<std::int32_t>() + g.first,
                                        slot_count_.as<std::int32_t>() + g.first);
  }
}

void BatchRunner::layer(int index, int lane_index, int task, bool is_prefill, Half* x) {
  const LayerWeights& w = weights_.layers[static_cast<std::size_t>(index)];
  Lane& lane = lanes_[static_cast<std::size_t>(lane_index)];
  const GpuBatch& g = lane.batch;
  const int h = config_.hidden_size;
  const int f = config_.ffn_dim;
  const int heads = config_.num_heads;
  const int head_dim = config_.head_dim();
  const float eps = config_.layer_norm_eps;
  const bool pre_ln = config_.do_layer_norm_before;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const std::int64_t seq = last_seq_;
  const std::int64_t rows = std::int64_t{g.size} * seq;
  Half* t = t_.as<Half>();
  Half* qkv = qkv_.as<Half>();
  Half* attn = attn_.as<Half>();
  // Layer norm of x's rows into y (t before a block, pre-LN; x itself after one, post-LN).
  const auto norm = [&](const Half* gamma, const Half* beta, Half* y) {
    ops_.layer_norm(
        {.x = x, .gamma = gamma, .beta = beta, .y = y, .rows = rows, .dim = h, .eps = eps});
  };

  // Self-attention block.
  const Half* attn_in = x;
  if (pre_ln) {
    norm(w.attn_ln_weight, w.attn_ln_bias, t);
    attn_in = t;
  }
  ops_.linear({.x = attn_in,
               .weight = w.qkv_weight,
               .bias = w.qkv_bias,
               .y = qkv,
               .rows = rows,
               .out_features = 3 * h,
               .in_features = h});
  if (is_prefill) {
    const std::uint8_t* valid = valid_.as<std::uint8_t>() + std::int64_t{g.first} * seq;
    std::int32_t* token_slot = token_slot_.as<std::int32_t>() + std::int64_t{g.first} * heads * seq;
    kernels::PrefillAttentionArgs args;
    args.qkv = qkv;
    args.valid = valid;
    args.out = attn;
    args.batch = g.size;
    args.seq = last_seq_;
    args.heads = heads;
    args.head_dim = head_dim;
    args.scale = scale;
    if (lane.scored) args.key_prob_sums = lane.scored->prefill_probs();
    ops_.prefill_attention(args);
    if (lane.scored) lane.scored->after_prefill_attention(index, last_seq_, valid, token_slot);
    if (g.resident > 0) {
      ops_.store_prefill_kv({.qkv = qkv,
                             .token_slot = token_slot,
                             .k_cache = lane.k_cache[static_cast<std::size_t>(index)].as<Half>(),
                             .v_cache = lane.v_cache[static_cast<std::size_t>(index)].as<Half>(),
                             .batch = g.resident,
                             .seq = last_seq_,
                             .heads = heads,
                             .head_dim = head_dim,
                             .capacity = capacity_});
    }
    if (g.offloaded() > 0) {
      const std::int64_t resident = g.resident;
      offloaded_kv_->store_prefill({task, index, lane_index}, qkv + resident * seq * 3 * h,
                                   token_slot + resident * heads * seq, last_seq_);
    }
  } else {
    attend_decode(index, lane_index, task);
  }
  ops_.linear({.x = attn,
               .weight = w.out_weight,
               .bias = w.out_bias,
               .y = t,
               .rows = rows,
               .out_features = h,
               .in_features = h});
  ops_.add_inplace(x, t, rows * h);
  if (!pre_ln) norm(w.attn_ln_weight, w.attn_ln_bias, x);

  // MLP block.
  const Half* ffn_in = x;
  if (pre_ln) {
    norm(w.ffn_ln_weight, w.ffn_ln_bias, t);
    ffn_in = t;
  }
  ops_.linear({.x = ffn_in,
               .weight = w.fc1_weight,
               .bias = w.fc1_bias,
               .y = ffn_.as<Half>(),
               .rows = rows,
               .out_features = f,
               .in_features = h,
               .activation = Activation::relu});
  ops_.linear({.x = ffn_.as<Half>(),
               .weight = w.fc2_weight,
               .bias = w.fc2_bias,
               .y = t,
               .rows = rows,
               .out_features = h,
               .in_features = f});
  ops_.add_inplace(x, t, rows * h);
  if (!pre_ln) norm(w.ffn_ln_weight, w.ffn_ln_bias, x);
}

void BatchRunner::layers(bool is_prefill) {
  const int lanes = static_cast<int>(lanes_.size());
  const int tasks = config_.num_layers * lanes;
  const int h = config_.hidden_size;
  if (offloaded_kv_) offloaded_kv_->begin_pass();
  if (host_activations_) host_activations_->begin_pass(last_seq_);
  if (streamer_ != nullptr) streamer_->begin_pass();
  for (int l = 0; l < config_.num_layers; ++l) {
    if (streamer_ != nullptr) streamer_->acquire(l, compute_);
    for (int lane = 0; lane < lanes; ++lane) {
      const int task = l * lanes + lane;
      // The next task's host-resident KV and hidden states copy in while this one computes.
      if (task + 1 < tasks) {
        const int next_layer = (task + 1) / lanes, next_lane = (task + 1) % lanes;
        if (offloaded_kv_ && !is_prefill)
          offloaded_kv_->prefetch({task + 1, next_layer, next_lane});
        if (host_activations_) host_activations_->prefetch({task + 1, next_layer, next_lane});
      }
      const Lane& current = lanes_[static_cast<std::size_t>(lane)];
      Half* x = nullptr;
      if (host_activations_) {
        x = host_activations_->acquire({task, l, lane});
      } else {
        x = x_.as<Half>() + std::int64_t{current.batch.first} * last_seq_ * h;
      }
      if (l == 0) embed(current, x);
      layer(l, lane, task, is_prefill, x);
      if (host_activations_) host_activations_->release({task, l, lane});
    }
    if (streamer_ != nullptr) streamer_->release(l, compute_);
  }
  hidden_states_ = host_activations_ ? host_activations_->finish_pass() : x_.as<const Half>();
}

void BatchRunner::prefill(const PaddedBatch& prompts) {
  OFFGEN_CHECK(prompts.batch == batch_ && prompts.seq > 0 && prompts.seq <= max_prompt_,
               "prefill of a {}x{} batch does not fit a runner sized {}x{}", prompts.batch,
               prompts.seq, batch_, max_prompt_);
  sync();
  const std::int64_t rows = std::int64_t{prompts.batch} * prompts.seq;
  upload(ids_.data(), prompts.tokens.data(), bytes_of<std::int32_t>(rows));
  upload(valid_.data(), prompts.valid.data(), bytes_of<std::uint8_t>(rows));
  upload(positions_.data(), prompts.positions.data(), bytes_of<std::int32_t>(rows));
  seen_.assign(prompts.lengths.begin(), prompts.lengths.end());
  cached_.resize(prompts.lengths.size());
  for (std::size_t b = 0; b < cached_.size(); ++b) {
    cached_[b] = std::min(prompts.lengths[b], policies_[b]->budget());
  }
  if (slots_) {
    // The policy picks the prompt tokens each cache keeps (the same in every layer and head).
    slots_->start(prompts.lengths);
    const int heads = config_.num_heads;
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
    upload(token_slot_.data(), token_slot.data(), bytes_of<std::int32_t>(rows * heads));
  }  // else each layer's policy step writes token_slot_ after its attention
  last_was_prefill_ = true;
  last_seq_ = prompts.seq;
  layers(/*is_prefill=*/true);
  prefilled_ = true;
}

void BatchRunner::decode(std::span<const std::int32_t> tokens,
                         std::span<const std::uint8_t> advancing) {
  OFFGEN_CHECK(prefilled_, "decode() needs a prefill() first");
  OFFGEN_CHECK(
      tokens.size() == static_cast<std::size_t>(batch_) && advancing.size() == tokens.size(),
      "decode needs one token per sequence ({} given for a batch of {})", tokens.size(), batch_);
  // The step's inputs are staged in pinned memory that the previous step's copies read from.
  sync();
  const std::size_t n = tokens.size();
  step_positions_.resize(n);
  step_counts_.resize(n);
  for (std::size_t b = 0; b < n; ++b) {
    // HF position of the new token: the number of real tokens before it (cached or evicted).
    step_positions_[b] = seen_[b];
    step_counts_[b] = cached_[b] + 1;  // the cache plus the new token itself
  }
  upload(ids_.data(), tokens.data(), bytes_of<std::int32_t>(batch_));
  upload(positions_.data(), step_positions_.data(), bytes_of<std::int32_t>(batch_));
  upload(slot_count_.data(), step_counts_.data(), bytes_of<std::int32_t>(batch_));
  upload(advancing_.data(), advancing.data(), bytes_of<std::uint8_t>(batch_));
  if (slots_) {
    // Position-based policies keep the same tokens in every head: one slot per sequence.
    const int heads = config_.num_heads;
    step_sequence_slot_.resize(n);
    step_slot_counts_.resize(n);
    step_write_slot_.resize(n * static_cast<std::size_t>(heads));
    slots_->plan_decode(step_sequence_slot_.data(), step_slot_counts_.data());
    for (std::size_t b = 0; b < n; ++b) {
      std::fill_n(step_write_slot_.begin() + static_cast<std::ptrdiff_t>(b * heads), heads,
                  step_sequence_slot_[b]);
    }
    upload(write_slot_.data(), step_write_slot_.data(),
           bytes_of<std::int32_t>(std::int64_t{batch_} * heads));
  }  // else each layer's policy state holds its write slots
  last_was_prefill_ = false;
  last_seq_ = 1;
  layers(/*is_prefill=*/false);
  if (slots_) slots_->commit(advancing, step_positions_);
  // K and V of one token in one (layer, head); the step attends over step_counts_[b] of them.
  const auto row_bytes = static_cast<std::uint64_t>(config_.num_layers) * config_.num_heads * 2 *
                         config_.head_dim() * sizeof(Half);
  for (std::size_t b = 0; b < n; ++b) {
    traffic_.read_bytes += row_bytes * static_cast<std::uint64_t>(step_counts_[b]);
  }
  traffic_.written_bytes += row_bytes * n;
  ++traffic_.decode_steps;
  for (std::size_t b = 0; b < n; ++b) {
    if (!advancing[b]) continue;
    ++seen_[b];
    cached_[b] = std::min(cached_[b] + 1, policies_[b]->budget());
  }
}

void BatchRunner::head(int n, const std::int32_t* row_ids, std::int64_t rows_in_x) {
  const int h = config_.hidden_size;
  const int p = config_.word_embed_proj_dim;
  Half* g = gathered_.as<Half>();
  ops_.gather_rows({.table = hidden_states_,
                    .ids = row_ids,
                    .out = g,
                    .table_rows = rows_in_x,
                    .rows = n,
                    .dim = h});
  if (config_.has_final_layer_norm()) {
    ops_.layer_norm({.x = g,
                     .gamma = weights_.final_ln_weight,
                     .beta = weights_.final_ln_bias,
                     .y = g,
                     .rows = n,
                     .dim = h,
                     .eps = config_.layer_norm_eps});
  }
  const Half* features = g;
  if (config_.has_projections()) {
    ops_.linear({.x = g,
                 .weight = weights_.project_out,
                 .y = projected_.as<Half>(),
                 .rows = n,
                 .out_features = p,
                 .in_features = h});
    features = projected_.as<Half>();
  }
  ops_.logits({.x = features,
               .embed = weights_.embed_tokens,
               .out = logits_.as<float>(),
               .rows = n,
               .vocab = config_.vocab_size,
               .dim = p});
}

template <typename Use>
void BatchRunner::head_of_newest_tokens(const Use& use) {
  newest_rows_.resize(static_cast<std::size_t>(batch_));
  for (int b = 0; b < batch_; ++b) {
    // Left padding puts every sequence's newest token in the last column.
    newest_rows_[static_cast<std::size_t>(b)] =
        last_was_prefill_ ? b * last_seq_ + last_seq_ - 1 : b;
  }
  upload(newest_.data(), newest_rows_.data(), bytes_of<std::int32_t>(batch_));
  for (int first = 0; first < batch_; first += out_chunk_) {
    const int n = std::min(out_chunk_, batch_ - first);
    head(n, newest_.as<std::int32_t>() + first, std::int64_t{batch_} * last_seq_);
    use(first, n);
  }
}

std::span<const std::int32_t> BatchRunner::read_picks() {
  device_.copy_async(host_picks_.data(), picks_.data(), bytes_of<std::int32_t>(batch_), compute_);
  sync();
  return {host_picks_.as<const std::int32_t>(), static_cast<std::size_t>(batch_)};
}

std::span<const std::int32_t> BatchRunner::greedy_tokens() {
  head_of_newest_tokens([&](int first, int n) {
    ops_.argmax_rows({.logits = logits_.as<float>(),
                      .out = picks_.as<std::int32_t>() + first,
                      .rows = n,
                      .vocab = config_.vocab_size});
  });
  return read_picks();
}

std::span<const std::int32_t> BatchRunner::next_tokens(
    std::span<const kernels::SampleParams> params) {
  OFFGEN_CHECK(params.size() == static_cast<std::size_t>(batch_),
               "next_tokens needs one SampleParams per sequence ({} given for a batch of {})",
               params.size(), batch_);
  const bool all_greedy = std::all_of(params.begin(), params.end(), [](const auto& p) {
    return p.temperature == 0.0f || p.top_k == 1;
  });
  if (all_greedy) return greedy_tokens();
  upload(sample_params_.data(), params.data(), bytes_of<kernels::SampleParams>(batch_));
  head_of_newest_tokens([&](int first, int n) {
    kernels::SampleRowsArgs args;
    args.logits = logits_.as<float>();
    args.params = sample_params_.as<kernels::SampleParams>() + first;
    args.sampleable = sampleable_;
    args.out = picks_.as<std::int32_t>() + first;
    args.rows = n;
    args.vocab = config_.vocab_size;
    ops_.sample_rows(args);
  });
  return read_picks();
}

std::vector<float> BatchRunner::target_logprobs(std::span<const std::int32_t> targets) {
  const std::int64_t rows_in_x = std::int64_t{batch_} * last_seq_;
  OFFGEN_CHECK(static_cast<std::int64_t>(targets.size()) == rows_in_x,
               "target_logprobs needs {} targets, got {}", rows_in_x, targets.size());
  std::vector<float> out(targets.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<std::int32_t> wanted;
  for (std::size_t r = 0; r < targets.size(); ++r) {
    if (targets[r] >= 0) wanted.push_back(static_cast<std::int32_t>(r));
  }
  for (std::size_t start = 0; start < wanted.size();
       start += static_cast<std::size_t>(out_chunk_)) {
    const std::size_t n = std::min(wanted.size() - start, static_cast<std::size_t>(out_chunk_));
    std::vector<std::int32_t> chunk_targets(n);
    for (std::size_t i = 0; i < n; ++i) {
      chunk_targets[i] = targets[static_cast<std::size_t>(wanted[start + i])];
      OFFGEN_CHECK(chunk_targets[i] < config_.vocab_size, "target token {} is outside the vocab",
                   chunk_targets[i]);
    }
    upload(out_rows_.data(), wanted.data() + start,
           bytes_of<std::int32_t>(static_cast<std::int64_t>(n)));
    upload(targets_.data(), chunk_targets.data(),
           bytes_of<std::int32_t>(static_cast<std::int64_t>(n)));
    head(static_cast<int>(n), out_rows_.as<std::int32_t>(), rows_in_x);
    ops_.token_logprobs({.logits = logits_.as<float>(),
                         .targets = targets_.as<std::int32_t>(),
                         .out = logprobs_.as<float>(),
                         .rows = static_cast<std::int64_t>(n),
                         .vocab = config_.vocab_size});
    device_.copy_async(host_logprobs_.data(), logprobs_.data(),
                       bytes_of<float>(static_cast<std::int64_t>(n)), compute_);
    sync();
    for (std::size_t i = 0; i < n; ++i) {
      out[static_cast<std::size_t>(wanted[start + i])] = host_logprobs_.as<float>()[i];
    }
  }
  return out;
}

}  // namespace offgen
