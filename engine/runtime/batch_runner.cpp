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

}  // namespace

BatchRunner::BatchRunner(Device& device, Ops& ops, const OptConfig& config,
                         const ModelWeights& weights, int batch, int max_prompt, int max_new,
                         std::unique_ptr<KvPolicy> policy, WeightStreamer* streamer)
    : device_(device),
      ops_(ops),
      config_(config),
      weights_(weights),
      compute_(device.stream(StreamRole::compute)),
      batch_(batch),
      max_prompt_(max_prompt),
      capacity_(policy->budget() + 1),
      out_chunk_(std::max(batch, 64)),
      policy_(std::move(policy)),
      streamer_(streamer) {
  (void)max_new;  // the policy's budget already sizes the cache for the decode steps
  OFFGEN_CHECK(batch > 0 && max_prompt > 0 && max_new >= 0,
               "batch runner needs a positive batch and prompt length (got {} and {})", batch,
               max_prompt);
  const std::int64_t rows = static_cast<std::int64_t>(batch) * max_prompt;
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
  host_picks_ = device.allocate(Tier::pinned, bytes_of<std::int32_t>(batch));
  // Every step's inputs fit: ids + valid + positions + per-head token slots of a prefill, or the
  // arrays of a decode step, plus one chunk of output row ids and targets.
  const std::int64_t heads = config.num_heads;
  staging_ = device.allocate(
      Tier::pinned,
      bytes_of<std::int32_t>((3 + heads) * rows + (4 + heads) * batch + 2 * out_chunk_) + 1024);

  x_ = device.allocate(gpu, bytes_of<Half>(rows * h));
  t_ = device.allocate(gpu, bytes_of<Half>(rows * wide));
  emb_ = config.has_projections() ? device.allocate(gpu, bytes_of<Half>(rows * p)) : Buffer();
  qkv_ = device.allocate(gpu, bytes_of<Half>(rows * 3 * h));
  attn_ = device.allocate(gpu, bytes_of<Half>(rows * h));
  ffn_ = device.allocate(gpu, bytes_of<Half>(rows * f));

  out_rows_ = device.allocate(gpu, bytes_of<std::int32_t>(out_chunk_));
  gathered_ = device.allocate(gpu, bytes_of<Half>(out_chunk_ * h));
  projected_ = device.allocate(gpu, bytes_of<Half>(out_chunk_ * p));
  logits_ = device.allocate(gpu, bytes_of<float>(std::int64_t{out_chunk_} * config.vocab_size));
  targets_ = device.allocate(gpu, bytes_of<std::int32_t>(out_chunk_));
  logprobs_ = device.allocate(gpu, bytes_of<float>(out_chunk_));
  host_logits_ =
      device.allocate(Tier::pinned, bytes_of<float>(std::int64_t{batch} * config.vocab_size));
  host_logprobs_ = device.allocate(Tier::pinned, bytes_of<float>(out_chunk_));

  const std::int64_t kv_elements =
      std::int64_t{batch} * config.num_heads * capacity_ * config.head_dim();
  for (int l = 0; l < config.num_layers; ++l) {
    k_cache_.push_back(device.allocate(gpu, bytes_of<Half>(kv_elements)));
    v_cache_.push_back(device.allocate(gpu, bytes_of<Half>(kv_elements)));
  }
  if (policy_->needs_scores()) {
    scored_ = std::make_unique<ScoredKvState>(device, ops, *policy_, config.num_layers, batch,
                                              config.num_heads, capacity_, max_prompt);
  } else {
    slots_.emplace(*policy_);
  }
}

BatchRunner::~BatchRunner() {
  // Queued kernels still reference this runner's buffers.
  try {
    compute_.synchronize();
  } catch (const std::exception& e) {
    spdlog::warn("batch runner: compute stream failed while shutting down: {}", e.what());
  }
}

std::uint64_t BatchRunner::kv_bytes() const {
  std::uint64_t total = 0;
  for (const Buffer& b : k_cache_) total += b.bytes();
  for (const Buffer& b : v_cache_) total += b.bytes();
  return total;
}

std::uint64_t BatchRunner::policy_state_bytes() const {
  return scored_ ? scored_->bytes() : 0;
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
  staging_used_ = 0;  // every copy out of staging has run
}

void BatchRunner::embed(std::int64_t rows) {
  const auto& w = weights_;
  const int h = config_.hidden_size;
  const int p = config_.word_embed_proj_dim;
  Half* x = x_.as<Half>();
  if (config_.has_projections()) {
    ops_.gather_rows(w.embed_tokens, config_.vocab_size, p, ids_.as<std::int32_t>(), rows,
                     emb_.as<Half>());
    ops_.linear(emb_.as<Half>(), w.project_in, nullptr, x, rows, h, p, Activation::none);
  } else {
    ops_.gather_rows(w.embed_tokens, config_.vocab_size, h, ids_.as<std::int32_t>(), rows, x);
  }
  ops_.add_position_embeddings(x, w.embed_positions, h, positions_.as<std::int32_t>(), rows,
                               config_.position_offset);
}

void BatchRunner::layer(int index, std::int64_t rows, bool is_prefill) {
  const LayerWeights& w = weights_.layers[static_cast<std::size_t>(index)];
  const int h = config_.hidden_size;
  const int f = config_.ffn_dim;
  const int heads = config_.num_heads;
  const int head_dim = config_.head_dim();
  const float eps = config_.layer_norm_eps;
  const bool pre_ln = config_.do_layer_norm_before;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  Half* x = x_.as<Half>();
  Half* t = t_.as<Half>();
  Half* qkv = qkv_.as<Half>();
  Half* attn = attn_.as<Half>();
  Half* k_cache = k_cache_[static_cast<std::size_t>(index)].as<Half>();
  Half* v_cache = v_cache_[static_cast<std::size_t>(index)].as<Half>();

  // Self-attention block.
  const Half* attn_in = x;
  if (pre_ln) {
    ops_.layer_norm(x, w.attn_ln_weight, w.attn_ln_bias, t, rows, h, eps);
    attn_in = t;
  }
  ops_.linear(attn_in, w.qkv_weight, w.qkv_bias, qkv, rows, 3 * h, h, Activation::none);
  if (is_prefill) {
    kernels::PrefillAttentionArgs args;
    args.qkv = qkv;
    args.valid = valid_.as<std::uint8_t>();
    args.out = attn;
    args.batch = batch_;
    args.seq = last_seq_;
    args.heads = heads;
    args.head_dim = head_dim;
    args.scale = scale;
    if (scored_) args.key_prob_sums = scored_->prefill_probs();
    ops_.prefill_attention(args);
    if (scored_) {
      scored_->after_prefill_attention(index, last_seq_, valid_.as<std::uint8_t>(),
                                       token_slot_.as<std::int32_t>());
    }
    ops_.store_prefill_kv(qkv, token_slot_.as<std::int32_t>(), batch_, last_seq_, heads, head_dim,
                          k_cache, v_cache, capacity_);
  } else {
    const std::int32_t* write_slot =
        scored_ ? scored_->write_slots(index) : write_slot_.as<std::int32_t>();
    ops_.append_kv(qkv, write_slot, batch_, heads, head_dim, k_cache, v_cache, capacity_);
    kernels::DecodeAttentionArgs args;
    args.qkv = qkv;
    args.k_cache = k_cache;
    args.v_cache = v_cache;
    args.slot_count = slot_count_.as<std::int32_t>();
    args.out = attn;
    args.batch = batch_;
    args.heads = heads;
    args.head_dim = head_dim;
    args.capacity = capacity_;
    args.scale = scale;
    if (scored_) args.probs = scored_->decode_probs();
    ops_.decode_attention(args);
    if (scored_) {
      scored_->after_decode_attention(index, advancing_.as<std::uint8_t>(),
                                      positions_.as<std::int32_t>(),
                                      slot_count_.as<std::int32_t>());
    }
  }
  ops_.linear(attn, w.out_weight, w.out_bias, t, rows, h, h, Activation::none);
  ops_.add_inplace(x, t, rows * h);
  if (!pre_ln) ops_.layer_norm(x, w.attn_ln_weight, w.attn_ln_bias, x, rows, h, eps);

  // MLP block.
  const Half* ffn_in = x;
  if (pre_ln) {
    ops_.layer_norm(x, w.ffn_ln_weight, w.ffn_ln_bias, t, rows, h, eps);
    ffn_in = t;
  }
  ops_.linear(ffn_in, w.fc1_weight, w.fc1_bias, ffn_.as<Half>(), rows, f, h, Activation::relu);
  ops_.linear(ffn_.as<Half>(), w.fc2_weight, w.fc2_bias, t, rows, h, f, Activation::none);
  ops_.add_inplace(x, t, rows * h);
  if (!pre_ln) ops_.layer_norm(x, w.ffn_ln_weight, w.ffn_ln_bias, x, rows, h, eps);
}

void BatchRunner::layers(std::int64_t rows, bool is_prefill) {
  if (streamer_ == nullptr) {
    for (int l = 0; l < config_.num_layers; ++l) layer(l, rows, is_prefill);
    return;
  }
  streamer_->begin_pass();
  for (int l = 0; l < config_.num_layers; ++l) {
    streamer_->acquire(l, compute_);
    layer(l, rows, is_prefill);
    streamer_->release(l, compute_);
  }
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
    cached_[b] = std::min(prompts.lengths[b], policy_->budget());
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
  embed(rows);
  layers(rows, /*is_prefill=*/true);
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
  embed(batch_);
  layers(batch_, /*is_prefill=*/false);
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
    cached_[b] = std::min(cached_[b] + 1, policy_->budget());
  }
}

void BatchRunner::head(int n, std::int64_t rows_in_x) {
  const int h = config_.hidden_size;
  const int p = config_.word_embed_proj_dim;
  Half* g = gathered_.as<Half>();
  ops_.gather_rows(x_.as<Half>(), rows_in_x, h, out_rows_.as<std::int32_t>(), n, g);
  if (config_.has_final_layer_norm()) {
    ops_.layer_norm(g, weights_.final_ln_weight, weights_.final_ln_bias, g, n, h,
                    config_.layer_norm_eps);
  }
  const Half* features = g;
  if (config_.has_projections()) {
    ops_.linear(g, weights_.project_out, nullptr, projected_.as<Half>(), n, p, h, Activation::none);
    features = projected_.as<Half>();
  }
  ops_.logits(features, weights_.embed_tokens, logits_.as<float>(), n, config_.vocab_size, p);
}

void BatchRunner::head_of_newest_tokens() {
  newest_rows_.resize(static_cast<std::size_t>(batch_));
  for (int b = 0; b < batch_; ++b) {
    // Left padding puts every sequence's newest token in the last column.
    newest_rows_[static_cast<std::size_t>(b)] =
        last_was_prefill_ ? b * last_seq_ + last_seq_ - 1 : b;
  }
  upload(out_rows_.data(), newest_rows_.data(), bytes_of<std::int32_t>(batch_));
  head(batch_, std::int64_t{batch_} * last_seq_);
}

std::span<const float> BatchRunner::last_logits() {
  head_of_newest_tokens();
  const std::size_t bytes = bytes_of<float>(std::int64_t{batch_} * config_.vocab_size);
  device_.copy_async(host_logits_.data(), logits_.data(), bytes, compute_);
  sync();
  return {host_logits_.as<const float>(),
          static_cast<std::size_t>(batch_) * static_cast<std::size_t>(config_.vocab_size)};
}

std::span<const std::int32_t> BatchRunner::greedy_tokens() {
  head_of_newest_tokens();
  ops_.argmax_rows(logits_.as<float>(), batch_, config_.vocab_size, picks_.as<std::int32_t>());
  device_.copy_async(host_picks_.data(), picks_.data(), bytes_of<std::int32_t>(batch_), compute_);
  sync();
  return {host_picks_.as<const std::int32_t>(), static_cast<std::size_t>(batch_)};
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
    head(static_cast<int>(n), rows_in_x);
    ops_.token_logprobs(logits_.as<float>(), targets_.as<std::int32_t>(), logprobs_.as<float>(),
                        static_cast<std::int64_t>(n), config_.vocab_size);
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
