#include "engine/runtime/block_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

#include "engine/core/error.h"
#include "engine/core/int_math.h"
#include "scheduler/runner_layout.h"

namespace offgen {
namespace {

using kernels::Activation;

std::vector<const KvPolicy*> policy_pointers(const std::vector<std::unique_ptr<KvPolicy>>& owned) {
  std::vector<const KvPolicy*> out;
  for (const auto& policy : owned) out.push_back(policy.get());
  return out;
}

}  // namespace

BlockRunner::BlockRunner(Device& device, Ops& ops, const ModelConfig& config,
                         const ModelWeights& weights, int max_prompt, int max_new,
                         std::vector<std::unique_ptr<KvPolicy>> policies, WeightStreamer* streamer,
                         const BlockShape& shape, Storage kv_storage, const PickExtras& extras,
                         int min_capacity, kernels::PrefillMath prefill_math,
                         int min_pages_per_step)
    : device_(device),
      ops_(ops),
      config_(config),
      weights_(weights),
      compute_(device.stream(StreamRole::compute)),
      block_(static_cast<int>(policies.size())),
      max_prompt_(max_prompt),
      policies_(std::move(policies)),
      streamer_(streamer),
      // Where idle_speculation (block_shape.h) says a guess applies, as the planner reckons.
      speculative_pages_(shape.speculative_pages && streamer == nullptr &&
                         shape.num_gpu_batches == 1),
      edit_capacity_(extras.logit_edits),
      top_k_(extras.top_logprobs),
      prefill_math_(prefill_math) {
  (void)max_new;  // the policies' budgets already size the cache for the decode steps
  const int block = block_;
  OFFGEN_CHECK(block > 0 && max_prompt > 0 && max_new >= 0,
               "batch runner needs a positive block and prompt length (got {} and {})", block,
               max_prompt);
  for (const auto& policy : policies_) {
    OFFGEN_CHECK(policy->kind() == policies_.front()->kind(),
                 "a block runs one KV policy ({} and {} given)", policy_name(policy->kind()),
                 policy_name(policies_.front()->kind()));
  }
  gpu_batches_ = split_block(block, shape);
  tasks_ = pass_tasks(config.num_layers, gpu_batches_);
  head_rows_ = block;
  out_chunk_ = output_chunk_rows(block, shape.num_gpu_batches);
  RunnerShape runner_shape;
  runner_shape.block = block;
  runner_shape.max_prompt = max_prompt;
  runner_shape.placement = shape;
  // The step staging holds a slot-count row per layer where budgets differ by layer.
  runner_shape.per_layer_budgets = policies_.front()->layer_policy(0, config.num_layers) != nullptr;
  runner_shape.page_size = policies_.front()->page_size();
  runner_shape.logit_edits = extras.logit_edits;
  runner_shape.top_logprobs = extras.top_logprobs;
  OFFGEN_CHECK(top_k_ >= 0 && top_k_ <= std::min(kernels::kMaxTopLogprobs, config.vocab_size),
               "top log-probs must be 0 to {} (got {})", kernels::kMaxTopLogprobs, top_k_);
  const MemoryLayout layout = runner_own_layout(config, runner_shape);
  ids_ = layout.allocate(device, "token ids");
  valid_ = layout.allocate(device, "valid mask");
  positions_ = layout.allocate(device, "positions");
  picks_ = layout.allocate(device, "picks");
  sample_params_ = layout.allocate(device, "sampling parameters");
  newest_ = layout.allocate(device, "newest rows");
  edits_ = layout.allocate(device, "logit edits");
  penalties_ = layout.allocate(device, "row penalties");
  saved_logits_ = layout.allocate(device, "saved logits");
  host_picks_ = layout.allocate(device, "host picks");
  staging_ = std::make_unique<StepStaging>(device, layout.allocate(device, "step staging"));
  if (shape.activations_on_host) {
    host_activations_ =
        std::make_unique<HostActivations>(device, gpu_batches_, max_prompt, config.hidden_size);
  }
  rope_inv_freq_ = layout.allocate(device, "rope frequencies");
  if (config.rotary()) {
    const std::vector<float> inv_freq = config.rope_inv_freq();
    staging_->upload(rope_inv_freq_.data(), inv_freq.data(), inv_freq.size() * sizeof(float));
  }
  x_ = layout.allocate(device, "hidden states");
  t_ = layout.allocate(device, "normed");
  emb_ = layout.allocate(device, "embedded");
  qkv_ = layout.allocate(device, "qkv");
  attn_ = layout.allocate(device, "attention output");
  ffn_ = layout.allocate(device, "ffn");
  gated_ = layout.allocate(device, "gated ffn");
  out_rows_ = layout.allocate(device, "output rows");
  gathered_ = layout.allocate(device, "gathered");
  projected_ = layout.allocate(device, "projected");
  logits_ = layout.allocate(device, "logits");
  targets_ = layout.allocate(device, "targets");
  logprobs_ = layout.allocate(device, "log-probs");
  host_logprobs_ = layout.allocate(device, "host log-probs");
  top_ids_ = layout.allocate(device, "top log-prob ids");
  top_values_ = layout.allocate(device, "top log-probs");
  host_top_ = layout.allocate(device, "host top log-probs");

  kv_cache_ = std::make_unique<BlockKvCache>(
      device, ops, config, policy_pointers(policies_), gpu_batches_, max_prompt,
      shape.cpu_attention, kv_storage, min_capacity, speculative_pages_, min_pages_per_step);
  if (kv_cache_->has_offloaded() || host_activations_) {
    kv_streams_[0] = &device.stream(StreamRole::h2d_kv);
    kv_streams_[1] = &device.stream(StreamRole::d2h_kv);
  }
}

BlockRunner::~BlockRunner() {
  // Queued kernels still reference this runner's buffers.
  try {
    sync();
  } catch (const std::exception& e) {
    spdlog::warn("batch runner: a stream failed while shutting down: {}", e.what());
  }
}

void BlockRunner::sync() {
  compute_.synchronize();
  // The KV streams' host tasks read host arrays of the step (its slot counts).
  for (Stream* stream : kv_streams_) {
    if (stream != nullptr) stream->synchronize();
  }
  staging_->reset();  // every copy out of staging has run
}

void BlockRunner::embed(const GpuBatch& batch, Half* x) {
  const auto& w = weights_;
  const int h = config_.hidden_size;
  const int p = config_.word_embed_proj_dim;
  const std::int64_t first = std::int64_t{batch.first} * last_seq_;
  const std::int64_t rows = std::int64_t{batch.size} * last_seq_;
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
  if (!config_.learned_positions()) return;  // rotary positions are applied to q and k
  ops_.add_position_embeddings({.x = x,
                                .table = w.embed_positions,
                                .positions = positions_.as<std::int32_t>() + first,
                                .rows = rows,
                                .dim = h,
                                .offset = config_.position_offset});
}

void BlockRunner::norm_rows(const Half* gamma, const Half* beta, const Half* x, Half* y,
                            std::int64_t rows) {
  const int h = config_.hidden_size;
  const float eps = config_.layer_norm_eps;
  if (config_.rms_norm()) {
    ops_.rms_norm({.x = x, .gamma = gamma, .y = y, .rows = rows, .dim = h, .eps = eps});
  } else {
    ops_.layer_norm(
        {.x = x, .gamma = gamma, .beta = beta, .y = y, .rows = rows, .dim = h, .eps = eps});
  }
}

void BlockRunner::project_qkv(const LayerWeights& w, const Half* x, Half* normed, Half* qkv,
                              std::int64_t rows, const std::int32_t* positions, bool prompt_rows,
                              bool q_only) {
  const Half* in = x;
  if (config_.do_layer_norm_before) {
    norm_rows(w.attn_ln_weight, w.attn_ln_bias, x, normed, rows);
    in = normed;
  }
  ops_.linear({.x = in,
               .weight = w.qkv_weight,
               .bias = w.qkv_bias,
               .y = qkv,
               .rows = rows,
               // q alone: the fused weight's first heads x head_dim rows (q, then k, then v).
               .out_features = q_only ? config_.num_heads * config_.head_dim() : config_.qkv_dim(),
               .in_features = config_.hidden_size,
               .prompt_rows = prompt_rows,
               .prefill_math = prefill_math_,
               .weight_int8 = w.qkv_int8 ? &w.qkv_int8 : nullptr});
  if (config_.rotary()) {
    // Keys are rotated before they are cached, so the cache never needs rotating again.
    ops_.rotary({.qkv = qkv,
                 .positions = positions,
                 .inv_freq = rope_inv_freq_.as<float>(),
                 .rows = rows,
                 .heads = config_.num_heads,
                 .kv_heads = q_only ? 0 : config_.kv_heads(),  // rows of q alone: no k heads
                 .head_dim = config_.head_dim()});
  }
}

void BlockRunner::speculate(const BlockTask& task, const BlockTask& next, const Half* x) {
  const LayerWeights& w = weights_.layers[static_cast<std::size_t>(next.layer)];
  const GpuBatch& g = task.batch;
  const std::int64_t rows = g.offloaded();  // a decode pass: one row per sequence
  const int h = config_.hidden_size;
  // Scratch in the MLP's buffer, which this task uses only after its attention.
  OFFGEN_CHECK(
      ffn_.bytes() >= static_cast<std::size_t>(rows) * (h + config_.qkv_dim()) * sizeof(Half),
      "speculative pages: the MLP buffer cannot hold the guess of {} rows", rows);
  Half* normed = ffn_.as<Half>();
  Half* q = normed + rows * h;
  // Only q is guessed, but an int8 matrix is multiplied whole: then q is read from qkv's rows.
  const bool q_only = !w.qkv_int8;
  project_qkv(w, x + std::int64_t{g.resident} * h, normed, q, rows,
              positions_.as<std::int32_t>() + g.first + g.resident, /*prompt_rows=*/false, q_only);
  kv_cache_->speculate(next, q, q_only ? std::int64_t{config_.num_heads} * config_.head_dim() : 0);
}

void BlockRunner::compute(const BlockTask& task, Step step, Half* x, const BlockTask* next) {
  const LayerWeights& w = weights_.layers[static_cast<std::size_t>(task.layer)];
  const GpuBatch& g = task.batch;
  const int h = config_.hidden_size;
  const int f = config_.ffn_dim;
  const bool pre_ln = config_.do_layer_norm_before;
  const std::int64_t seq = last_seq_;
  const std::int64_t rows = std::int64_t{g.size} * seq;
  Half* t = t_.as<Half>();
  Half* qkv = qkv_.as<Half>();
  Half* attn = attn_.as<Half>();
  // Layer norm (RMS norm) of x's rows into y (t before a block, pre-LN; x itself after one,
  // post-LN).
  const auto norm = [&](const Half* gamma, const Half* beta, Half* y) {
    norm_rows(gamma, beta, x, y, rows);
  };

  if (task.layer == 0) embed(g, x);
  if (step == Step::decode && speculative_pages_ && next != nullptr &&
      kv_cache_->speculates(task, *next)) {
    speculate(task, *next, x);
  }
  // A prompt token's GEMM rows are summed in the prompt order on the CPU (kernels/linear_args.h).
  const bool prompt_rows = step == Step::prefill;
  // Self-attention block.
  project_qkv(w, x, t, qkv, rows, positions_.as<std::int32_t>() + std::int64_t{g.first} * seq,
              prompt_rows);
  switch (step) {
    case Step::prefill:
      kv_cache_->attend_prefill(task, qkv, valid_.as<std::uint8_t>() + std::int64_t{g.first} * seq,
                                attn, last_seq_, prefill_math_);
      break;
    case Step::decode:
      kv_cache_->attend_decode(task, qkv, positions_.as<std::int32_t>(), attn);
      break;
  }
  ops_.linear({.x = attn,
               .weight = w.out_weight,
               .bias = w.out_bias,
               .y = t,
               .rows = rows,
               .out_features = h,
               .in_features = h,
               .prompt_rows = prompt_rows,
               .prefill_math = prefill_math_,
               .weight_int8 = w.out_int8 ? &w.out_int8 : nullptr});
  ops_.add_inplace(x, t, rows * h);
  if (!pre_ln) norm(w.attn_ln_weight, w.attn_ln_bias, x);

  // MLP block.
  const Half* ffn_in = x;
  if (pre_ln) {
    norm(w.ffn_ln_weight, w.ffn_ln_bias, t);
    ffn_in = t;
  }
  const bool gated = config_.gated_mlp();
  ops_.linear({.x = ffn_in,
               .weight = w.fc1_weight,
               .bias = w.fc1_bias,
               .y = ffn_.as<Half>(),
               .rows = rows,
               .out_features = config_.ffn_in_rows(),
               .in_features = h,
               .activation = gated ? Activation::none : Activation::relu,
               .prompt_rows = prompt_rows,
               .prefill_math = prefill_math_,
               .weight_int8 = w.fc1_int8 ? &w.fc1_int8 : nullptr});
  if (gated) {
    ops_.silu_mul({.gate_up = ffn_.as<Half>(), .out = gated_.as<Half>(), .rows = rows, .ffn = f});
  }
  ops_.linear({.x = gated ? gated_.as<Half>() : ffn_.as<Half>(),
               .weight = w.fc2_weight,
               .bias = w.fc2_bias,
               .y = t,
               .rows = rows,
               .out_features = h,
               .in_features = f,
               .prompt_rows = prompt_rows,
               .prefill_math = prefill_math_,
               .weight_int8 = w.fc2_int8 ? &w.fc2_int8 : nullptr});
  ops_.add_inplace(x, t, rows * h);
  if (!pre_ln) norm(w.ffn_ln_weight, w.ffn_ln_bias, x);
}

void BlockRunner::pass(Step step) {
  kv_cache_->begin_pass();
  if (host_activations_) host_activations_->begin_pass(last_seq_);
  if (streamer_ != nullptr) streamer_->begin_pass();
  const std::vector<BlockTask>& tasks = *pass_tasks_;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const BlockTask& task = tasks[i];
    // Load weights: a layer's are brought in once, for its first GPU batch.
    if (streamer_ != nullptr) streamer_->acquire(task, compute_);
    // Load cache and hidden states of the next task, while this one computes.
    if (i + 1 < tasks.size()) {
      if (step == Step::decode) kv_cache_->prefetch(tasks[i + 1]);
      if (host_activations_) host_activations_->prefetch(tasks[i + 1]);
    }
    Half* x = host_activations_ ? host_activations_->acquire(task)
                                : x_.as<Half>() + std::int64_t{task.batch.first} * last_seq_ *
                                                      config_.hidden_size;
    // Compute, storing the new K/V where the sequences keep their cache.
    compute(task, step, x, i + 1 < tasks.size() ? &tasks[i + 1] : nullptr);
    // Store hidden states.
    if (host_activations_) host_activations_->release(task);
    // Weights: free the slot for the layer two loads on, after the layer's last GPU batch.
    if (streamer_ != nullptr) streamer_->release(task, compute_);
  }
  hidden_states_ = host_activations_ ? host_activations_->finish_pass() : x_.as<const Half>();
}

void BlockRunner::prefill(const PaddedBatch& prompts) {
  OFFGEN_CHECK(prompts.batch == block_ && prompts.seq > 0 && prompts.seq <= max_prompt_,
               "prefill of a {}x{} batch does not fit a runner sized {}x{}", prompts.batch,
               prompts.seq, block_, max_prompt_);
  sync();
  const std::int64_t rows = std::int64_t{prompts.batch} * prompts.seq;
  staging_->upload(ids_.data(), prompts.tokens.data(), bytes_of<std::int32_t>(rows));
  staging_->upload(valid_.data(), prompts.valid.data(), bytes_of<std::uint8_t>(rows));
  staging_->upload(positions_.data(), prompts.positions.data(), bytes_of<std::int32_t>(rows));
  kv_cache_->start_prefill(prompts, *staging_);
  pass_tasks_ = &tasks_;
  head_rows_ = block_;
  last_was_prefill_ = true;
  last_seq_ = prompts.seq;
  pass(Step::prefill);
  const auto real = static_cast<std::uint64_t>(
      std::count(prompts.valid.begin(), prompts.valid.end(), std::uint8_t{1}));
  slot_use_.useful += real;
  slot_use_.padding += static_cast<std::uint64_t>(rows) - real;
  ++slot_use_.passes;
  prefilled_ = true;
}

void BlockRunner::decode(std::span<const std::int32_t> tokens,
                         std::span<const std::uint8_t> advancing, std::span<const int> running) {
  OFFGEN_CHECK(prefilled_, "decode() needs a prefill() first");
  OFFGEN_CHECK(
      tokens.size() == static_cast<std::size_t>(block_) && advancing.size() == tokens.size(),
      "decode needs one token per sequence ({} given for a block of {})", tokens.size(), block_);
  // The rows this step computes: every row, or each GPU batch's first running[g].
  std::uint64_t computed = static_cast<std::uint64_t>(block_);
  pass_tasks_ = &tasks_;
  head_rows_ = block_;
  if (!running.empty()) {
    // Host-resident KV and hidden states are laid out, loaded and stored per whole GPU batch.
    OFFGEN_CHECK(!kv_cache_->has_offloaded() && host_activations_ == nullptr,
                 "decode of the running rows only needs every sequence's KV and hidden states on "
                 "the gpu tier");
    OFFGEN_CHECK(running.size() == gpu_batches_.size(),
                 "decode: {} running counts for {} GPU batches", running.size(),
                 gpu_batches_.size());
    // Reused step to step: a decode step allocates nothing once the runner has run one.
    std::vector<GpuBatch>& batches = step_batches_;
    batches = gpu_batches_;
    computed = 0;
    bool prefix = true;  // the computed rows so far are [0, head_rows_)
    head_rows_ = 0;
    for (std::size_t g = 0; g < batches.size(); ++g) {
      GpuBatch& batch = batches[g];
      const int n = running[g];
      OFFGEN_CHECK(n >= 0 && n <= batch.size, "decode: {} running rows in a GPU batch of {}", n,
                   batch.size);
      for (int b = batch.first + n; b < batch.first + batch.size; ++b) {
        OFFGEN_CHECK(!advancing[static_cast<std::size_t>(b)],
                     "decode: sequence {} advances but is not among its GPU batch's running rows",
                     b);
      }
      batch.size = std::max(n, 1);
      batch.resident = std::min(batch.resident, batch.size);
      computed += static_cast<std::uint64_t>(batch.size);
      if (prefix) head_rows_ = batch.first + batch.size;
      prefix = prefix && batch.size == gpu_batches_[g].size;
    }
    if (!prefix) {
      // Running rows after a GPU batch's free ones: the head computes every row then, unless
      // every later GPU batch is idle.
      bool rest_idle = true;
      for (std::size_t g = 0; g < batches.size(); ++g) {
        if (batches[g].first >= head_rows_ && running[g] > 0) rest_idle = false;
      }
      if (!rest_idle) head_rows_ = block_;
    }
    step_tasks_ = tasks_;
    for (BlockTask& task : step_tasks_)
      task.batch = batches[static_cast<std::size_t>(task.gpu_batch)];
    pass_tasks_ = &step_tasks_;
  }
  // The step's inputs are staged in pinned memory that the previous step's copies read from.
  sync();
  staging_->upload(ids_.data(), tokens.data(), bytes_of<std::int32_t>(block_));
  const std::span<const std::int32_t> positions = kv_cache_->start_decode(advancing, *staging_);
  staging_->upload(positions_.data(), positions.data(), bytes_of<std::int32_t>(block_));
  last_was_prefill_ = false;
  last_seq_ = 1;
  pass(Step::decode);
  kv_cache_->commit(advancing);
  const auto advanced =
      static_cast<std::uint64_t>(std::count(advancing.begin(), advancing.end(), std::uint8_t{1}));
  slot_use_.useful += advanced;
  slot_use_.idle += computed - advanced;
  ++slot_use_.passes;
}

void BlockRunner::move_row(int to, int from) {
  OFFGEN_CHECK(prefilled_ && compacts() && to != from && to >= 0 && to < block_ && from >= 0 &&
                   from < block_,
               "sequence {} of a block of {} cannot move to row {}", from, block_, to);
  auto& moving = policies_[static_cast<std::size_t>(from)];
  std::swap(policies_[static_cast<std::size_t>(to)], moving);
  kv_cache_->adopt(device_, compute_, to, *kv_cache_, from,
                   policies_[static_cast<std::size_t>(to)].get());
  kv_cache_->park(from, policies_[static_cast<std::size_t>(from)].get());
}

bool BlockRunner::compacts() const {
  return host_activations_ == nullptr && !kv_cache_->has_offloaded();
}

void BlockRunner::adopt(int b, BlockRunner& from, int from_b, std::unique_ptr<KvPolicy> policy) {
  OFFGEN_CHECK(prefilled_ && from.prefilled_ && b >= 0 && b < block_ && from_b >= 0 &&
                   from_b < from.block_ && policy->kind() == policies_.front()->kind(),
               "sequence {} of a block of {} cannot take sequence {} of a block of {}", b, block_,
               from_b, from.block_);
  const bool host_caches = kv_cache_->has_offloaded() || from.kv_cache_->has_offloaded();
  if (host_caches) {
    // The host caches are written by host tasks and copies on the KV streams: idle them all.
    sync();
    from.sync();
  }
  // The copies run on compute; the next step's sync() waits for them before its pass loads a
  // host cache on another stream.
  kv_cache_->adopt(device_, compute_, b, *from.kv_cache_, from_b, policy.get());
  policies_[static_cast<std::size_t>(b)] = std::move(policy);
}

void BlockRunner::head(int n, const std::int32_t* row_ids, std::int64_t rows_in_x) {
  const int h = config_.hidden_size;
  const int p = config_.word_embed_proj_dim;
  Half* g = gathered_.as<Half>();
  ops_.gather_rows({.table = hidden_states_,
                    .ids = row_ids,
                    .out = g,
                    .table_rows = rows_in_x,
                    .rows = n,
                    .dim = h});
  if (config_.rms_norm()) {
    ops_.rms_norm({.x = g,
                   .gamma = weights_.final_ln_weight,
                   .y = g,
                   .rows = n,
                   .dim = h,
                   .eps = config_.layer_norm_eps});
  } else if (config_.has_final_layer_norm()) {
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
               .embed = weights_.head(),
               .out = logits_.as<float>(),
               .rows = n,
               .vocab = config_.vocab_size,
               .dim = p});
}

template <typename Use>
void BlockRunner::head_of_newest_tokens(const Use& use) {
  newest_rows_.resize(static_cast<std::size_t>(block_));
  for (int b = 0; b < block_; ++b) {
    // Left padding puts every sequence's newest token in the last column.
    newest_rows_[static_cast<std::size_t>(b)] =
        last_was_prefill_ ? b * last_seq_ + last_seq_ - 1 : b;
  }
  staging_->upload(newest_.data(), newest_rows_.data(), bytes_of<std::int32_t>(block_));
  for (int first = 0; first < head_rows_; first += out_chunk_) {
    const int n = std::min(out_chunk_, head_rows_ - first);
    head(n, newest_.as<std::int32_t>() + first, std::int64_t{block_} * last_seq_);
    use(first, n);
  }
}

std::span<const std::int32_t> BlockRunner::read_picks() {
  device_.copy_async(host_picks_.data(), picks_.data(), bytes_of<std::int32_t>(block_), compute_);
  sync();
  return {host_picks_.as<const std::int32_t>(), static_cast<std::size_t>(block_)};
}

void BlockRunner::picked_logprobs(int first, int n, std::vector<float>& out) {
  // The chunk's logits are overwritten by the next chunk's, so its log-probs are read now (the
  // logprobs buffers hold one chunk of rows).
  ops_.token_logprobs({.logits = logits_.as<float>(),
                       .targets = picks_.as<std::int32_t>() + first,
                       .out = logprobs_.as<float>(),
                       .rows = n,
                       .vocab = config_.vocab_size});
  device_.copy_async(host_logprobs_.data(), logprobs_.data(), bytes_of<float>(n), compute_);
  const std::int64_t top = std::int64_t{n} * top_k_;
  if (top_k_ > 0) {
    ops_.top_logprobs({.logits = logits_.as<float>(),
                       .ids = top_ids_.as<std::int32_t>(),
                       .values = top_values_.as<float>(),
                       .rows = n,
                       .vocab = config_.vocab_size,
                       .k = top_k_});
    device_.copy_async(host_top_.data(), top_ids_.data(), bytes_of<std::int32_t>(top), compute_);
    device_.copy_async(host_top_.as<float>() + top, top_values_.data(), bytes_of<float>(top),
                       compute_);
  }
  sync();
  out.resize(static_cast<std::size_t>(block_));
  std::copy_n(host_logprobs_.as<const float>(), n, out.begin() + first);
  if (top_k_ > 0) {
    const auto block_top = static_cast<std::size_t>(block_) * static_cast<std::size_t>(top_k_);
    top_ids_out_.resize(block_top);
    top_values_out_.resize(block_top);
    const auto at = static_cast<std::ptrdiff_t>(std::int64_t{first} * top_k_);
    std::copy_n(host_top_.as<const std::int32_t>(), top, top_ids_out_.begin() + at);
    std::copy_n(host_top_.as<const float>() + top, top, top_values_out_.begin() + at);
  }
}

void BlockRunner::upload_edits(const StepLogitEdits* edits) {
  step_edits_ = {};
  if (edits == nullptr || edits->edits.empty()) return;
  const auto count = static_cast<std::int64_t>(edits->edits.size());
  OFFGEN_CHECK(
      count <= edit_capacity_ && edits->penalties.size() == static_cast<std::size_t>(block_),
      "a step's logit edits ({}) must fit the runner's {} and give {} rows' penalties", count,
      edit_capacity_, block_);
  OFFGEN_CHECK(std::ranges::is_sorted(edits->edits, {}, &kernels::LogitEdit::row),
               "a step's logit edits must be sorted by row");
  step_edits_ = edits->edits;
  staging_->upload(edits_.data(), edits->edits.data(), bytes_of<kernels::LogitEdit>(count));
  staging_->upload(penalties_.data(), edits->penalties.data(),
                   bytes_of<kernels::RowPenalties>(block_));
}

kernels::EditLogitsArgs BlockRunner::chunk_edits(int first, int n) const {
  // The chunk's run of the step's edits (the caller keeps them until the pick returns).
  const auto begin = std::ranges::lower_bound(step_edits_, first, {}, &kernels::LogitEdit::row);
  const auto end =
      std::ranges::lower_bound(begin, step_edits_.end(), first + n, {}, &kernels::LogitEdit::row);
  const auto offset = begin - step_edits_.begin();
  return {.logits = logits_.as<float>(),
          .edits = edits_.as<kernels::LogitEdit>() + offset,
          .penalties = penalties_.as<kernels::RowPenalties>(),
          .saved = saved_logits_.as<float>() + offset,
          .count = end - begin,
          .first_row = first,
          .vocab = config_.vocab_size};
}

template <typename Pick>
void BlockRunner::pick_chunk(int first, int n, std::vector<float>* logprobs, const Pick& pick) {
  const kernels::EditLogitsArgs edits = chunk_edits(first, n);
  if (edits.count > 0) ops_.edit_logits(edits);
  pick();
  if (logprobs == nullptr) return;
  if (edits.count > 0) ops_.restore_logits(edits);
  picked_logprobs(first, n, *logprobs);
}

std::span<const std::int32_t> BlockRunner::greedy_tokens(std::vector<float>* logprobs,
                                                         const StepLogitEdits* edits) {
  upload_edits(edits);
  head_of_newest_tokens([&](int first, int n) {
    pick_chunk(first, n, logprobs, [&] {
      ops_.argmax_rows({.logits = logits_.as<float>(),
                        .out = picks_.as<std::int32_t>() + first,
                        .rows = n,
                        .vocab = config_.vocab_size});
    });
  });
  return read_picks();
}

std::span<const std::int32_t> BlockRunner::next_tokens(
    std::span<const kernels::SampleParams> params, std::vector<float>* logprobs,
    const StepLogitEdits* edits) {
  OFFGEN_CHECK(params.size() == static_cast<std::size_t>(block_),
               "next_tokens needs one SampleParams per sequence ({} given for a batch of {})",
               params.size(), block_);
  const bool all_greedy = std::all_of(params.begin(), params.end(), [](const auto& p) {
    return p.temperature == 0.0f || p.top_k == 1;
  });
  if (all_greedy) return greedy_tokens(logprobs, edits);
  upload_edits(edits);
  staging_->upload(sample_params_.data(), params.data(), bytes_of<kernels::SampleParams>(block_));
  head_of_newest_tokens([&](int first, int n) {
    pick_chunk(first, n, logprobs, [&] {
      kernels::SampleRowsArgs args;
      args.logits = logits_.as<float>();
      args.params = sample_params_.as<kernels::SampleParams>() + first;
      args.sampleable = sampleable_;
      args.out = picks_.as<std::int32_t>() + first;
      args.rows = n;
      args.vocab = config_.vocab_size;
      ops_.sample_rows(args);
    });
  });
  return read_picks();
}

std::vector<float> BlockRunner::target_logprobs(std::span<const std::int32_t> targets,
                                                std::vector<std::int32_t>* argmax) {
  const std::int64_t rows_in_x = std::int64_t{block_} * last_seq_;
  OFFGEN_CHECK(static_cast<std::int64_t>(targets.size()) == rows_in_x,
               "target_logprobs needs {} targets, got {}", rows_in_x, targets.size());
  OFFGEN_CHECK(argmax == nullptr || top_k_ >= 1,
               "target_logprobs' argmax needs a runner made with top log-probs");
  std::vector<float> out(targets.size(), std::numeric_limits<float>::quiet_NaN());
  if (argmax != nullptr) argmax->assign(targets.size(), -1);
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
    staging_->upload(out_rows_.data(), wanted.data() + start,
                     bytes_of<std::int32_t>(static_cast<std::int64_t>(n)));
    staging_->upload(targets_.data(), chunk_targets.data(),
                     bytes_of<std::int32_t>(static_cast<std::int64_t>(n)));
    head(static_cast<int>(n), out_rows_.as<std::int32_t>(), rows_in_x);
    ops_.token_logprobs({.logits = logits_.as<float>(),
                         .targets = targets_.as<std::int32_t>(),
                         .out = logprobs_.as<float>(),
                         .rows = static_cast<std::int64_t>(n),
                         .vocab = config_.vocab_size});
    device_.copy_async(host_logprobs_.data(), logprobs_.data(),
                       bytes_of<float>(static_cast<std::int64_t>(n)), compute_);
    const std::int64_t top = static_cast<std::int64_t>(n) * top_k_;
    if (argmax != nullptr) {
      ops_.top_logprobs({.logits = logits_.as<float>(),
                         .ids = top_ids_.as<std::int32_t>(),
                         .values = top_values_.as<float>(),
                         .rows = static_cast<std::int64_t>(n),
                         .vocab = config_.vocab_size,
                         .k = top_k_});
      device_.copy_async(host_top_.data(), top_ids_.data(), bytes_of<std::int32_t>(top), compute_);
    }
    sync();
    for (std::size_t i = 0; i < n; ++i) {
      const auto row = static_cast<std::size_t>(wanted[start + i]);
      out[row] = host_logprobs_.as<float>()[i];
      if (argmax != nullptr) {
        (*argmax)[row] = host_top_.as<const std::int32_t>()[i * static_cast<std::size_t>(top_k_)];
      }
    }
  }
  return out;
}

}  // namespace offgen
