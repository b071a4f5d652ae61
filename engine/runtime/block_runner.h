// Runs one block of sequences through the model's forward pass: a prefill of the left-padded
// prompts, then decode steps of one token per sequence over the KV cache. It owns the block's KV
// cache (block_kv_cache.h), its hidden states and activation scratch, and the output head, and
// issues every op through `Ops` on the compute stream; the host waits only when it reads an output.
//
// The block schedule (design section 6): the block runs as GPU batches (block_shape.h); a pass
// runs its BlockTasks (block_task.h) layer by layer, GPU batch by GPU batch, so each layer's
// streamed weights are loaded once and shared by every GPU batch, while the next layer's weights
// and the next task's host-resident KV and hidden states load behind the compute. Each GPU batch
// keeps its hidden state between layers; the per-layer scratch is sized for one GPU batch and
// shared.
//
// Semantics are Hugging Face's OPTForCausalLM (design section 4): learned positions offset by 2
// with position ids cumsum(mask) - 1, q scaled by head_dim^-0.5, ReLU MLP, pre- or post-LN,
// optional project_in / project_out, LM head tied to the token embedding; or LlamaForCausalLM's
// (and Mistral's, Qwen2's): RMSNorm, rotary positions cumsum(mask) - 1 applied to q and k before
// K is cached, grouped-query attention over a cache of kv_heads, SwiGLU MLP, head tied or not.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/device/device.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/runtime/block_kv_cache.h"
#include "engine/runtime/logit_edits.h"
#include "engine/runtime/pick_extras.h"
#include "engine/runtime/slot_use.h"
#include "engine/runtime/step_staging.h"
#include "kernels/ops.h"
#include "offload/host_activations.h"
#include "offload/weight_streamer.h"
#include "policies/kv_policy.h"
#include "scheduler/batch_formation.h"
#include "scheduler/block_shape.h"
#include "scheduler/block_task.h"

namespace offgen {

class BlockRunner {
 public:
  // Sizes everything for policies.size() sequences of up to `max_prompt` prompt tokens and
  // `max_new` decode steps. Each sequence has its own policy (one kind, each with the sequence's
  // own budget C, so its tokens never depend on its batch-mates); the KV cache has the largest
  // C + 1 slots per (layer, sequence, head). Allocates what runner_layout says
  // (scheduler/runner_layout.h), and nothing later; throws OutOfMemoryError if it does not fit.
  // streamer: where layer weights are offloaded, what brings them in per layer (else null).
  // shape: GPU batches and KV placement. kv_storage: how the KV cache keeps its rows.
  // extras: logit edits and top log-probs the picks carry. min_capacity: KV slots per cache at
  // least (0: the largest C + 1), for sequences that take over finished ones (adopt); likewise
  // min_pages_per_step, quest's pages attended per step.
  BlockRunner(Device& device, Ops& ops, const ModelConfig& config, const ModelWeights& weights,
              int max_prompt, int max_new, std::vector<std::unique_ptr<KvPolicy>> policies,
              WeightStreamer* streamer = nullptr, const BlockShape& shape = {},
              Storage kv_storage = Storage::fp16, const PickExtras& extras = {},
              int min_capacity = 0, kernels::PrefillMath prefill_math = kernels::PrefillMath::fp32,
              int min_pages_per_step = 0);
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;
  ~BlockRunner();

  // Runs the prompts (prompts.batch must equal this runner's block, prompts.seq <= max_prompt).
  void prefill(const PaddedBatch& prompts);
  // One decode step: tokens[b] is sequence b's next input token. advancing[b] = 0 marks a
  // sequence that is done (finished, or past the end of its text): its token is computed but not
  // kept in the cache, so it costs nothing later.
  // running (optional, one per GPU batch): only the first running[g] sequences of GPU batch g are
  // computed (at least one per GPU batch), so rows that wait for a request cost nothing; every
  // advancing sequence must be among them (move_row keeps them first).
  void decode(std::span<const std::int32_t> tokens, std::span<const std::uint8_t> advancing,
              std::span<const int> running = {});

  // Continuous batching: sequence b, which has finished, is replaced by sequence from_b of
  // `from` — a runner of the same KV capacity and storage that has just prefilled it — under
  // `policy` (made for that sequence's lengths as from's was). Its KV cache and policy state are
  // copied in on the compute stream (from the gpu tier or a host cache, to wherever row b keeps
  // its KV); from then on it decodes here, with results exactly those it would have had here
  // from the start. With host caches on either side both runners are synchronized first; the
  // next decode's synchronization waits for the copies before its pass loads a host cache.
  void adopt(int b, BlockRunner& from, int from_b, std::unique_ptr<KvPolicy> policy);
  // Whether this runner can keep each GPU batch's running sequences first (move_row) and compute
  // only those (decode's `running`): when every sequence's KV and hidden states are on the gpu
  // tier. Host caches and host hidden states are laid out, loaded and stored per whole GPU batch.
  bool compacts() const;
  // Sequence `from` (running) moves to row `to` (finished) of this runner, caches and policy
  // state with it — so the running sequences of a GPU batch stay its first rows (compacts()).
  void move_row(int to, int from);

  // After prefill() or decode(): each sequence's greedy next token (argmax of its logits, ties:
  // the lowest id), computed on the device so only the ids come back. Valid until the next call.
  // With `edits`, each row's logits are edited first (kernels/logit_edit_args.h); log-probs are
  // still of the raw logits.
  std::span<const std::int32_t> greedy_tokens(std::vector<float>* logprobs = nullptr,
                                              const StepLogitEdits* edits = nullptr);
  // After prefill() or decode(): each sequence's next token picked by params[b] (greedy where its
  // temperature is 0; kernels/sampling_args.h), on the device, so only the ids come back: by
  // argmax alone when every row is greedy, else by the sampler. Valid until the next call.
  // With `logprobs`, also each picked token's log-probability under the model's distribution
  // (log-softmax of the raw logits: temperature 1, before top-k / top-p), computed on the device
  // by the scoring kernel while the logits are there; one float per sequence comes back.
  std::span<const std::int32_t> next_tokens(std::span<const kernels::SampleParams> params,
                                            std::vector<float>* logprobs = nullptr,
                                            const StepLogitEdits* edits = nullptr);
  // After a pick that read log-probs, with extras.top_logprobs = k > 0: sequence b's k most
  // likely ids and their log-probs (of the raw logits) at [b * k, b * k + k), most likely first.
  int top_logprobs() const { return top_k_; }
  std::span<const std::int32_t> top_logprob_ids() const { return top_ids_out_; }
  std::span<const float> top_logprob_values() const { return top_values_out_; }
  // Ids that sampling never draws (a device mask of vocab bytes, 0 = never, or null = none
  // excluded): the model's rows that the tokenizer has no entry for. Must outlive the runner.
  void set_sampleable(const std::uint8_t* mask) { sampleable_ = mask; }
  // After prefill() or decode(): log p(targets[r]) for each row r of the last step — prefill rows
  // are b * seq + i, decode rows are b. Rows with targets[r] < 0 are skipped and come back NaN.
  // With `argmax` (the runner made with extras.top_logprobs >= 1): also each row's most likely
  // id, by the top-k kernel (equal logits: the lower id, as greedy picks); -1 where skipped.
  std::vector<float> target_logprobs(std::span<const std::int32_t> targets,
                                     std::vector<std::int32_t>* argmax = nullptr);

  int block() const { return block_; }
  int kv_capacity() const { return kv_cache_->capacity(); }
  const std::vector<GpuBatch>& gpu_batches() const { return gpu_batches_; }
  // Bytes of KV cache this runner allocated (all layers, K and V, every tier).
  std::uint64_t kv_bytes() const { return kv_cache_->bytes(); }
  // Of those, in pinned host memory.
  std::uint64_t kv_host_bytes() const { return kv_cache_->host_bytes(); }
  // int4 KV: bytes of the fp16 block its resident caches are expanded into (0 for fp16).
  std::uint64_t kv_expanded_bytes() const { return kv_cache_->expanded_bytes(); }
  // Bytes of attention-score policy state it allocated (0 for position-based policies).
  std::uint64_t policy_state_bytes() const { return kv_cache_->policy_state_bytes(); }
  // Bytes of hidden states copied between the gpu tier and pinned memory so far (0 unless the
  // activations live on the host).
  std::uint64_t activation_bytes_moved() const {
    return host_activations_ ? host_activations_->moved_bytes() : 0;
  }

  // KV cache traffic so far (block_kv_cache.h).
  // The token slots this runner's passes computed, and those that carried a real token.
  const SlotUse& slot_use() const { return slot_use_; }
  using KvTraffic = offgen::KvTraffic;
  KvTraffic kv_traffic() const { return kv_cache_->traffic(); }

 private:
  // What a pass runs: the prompts, or one new token per sequence.
  enum class Step { prefill, decode };
  // The embedding of a GPU batch's tokens into x, its hidden states.
  void embed(const GpuBatch& batch, Half* x);
  // One layer over one GPU batch (the task's), its hidden states at x.
  // Layer norm (RMS norm) of `rows` rows of x into y, with the model's eps.
  void norm_rows(const Half* gamma, const Half* beta, const Half* x, Half* y, std::int64_t rows);
  // The attention block's input projection of `rows` rows of x: the pre-LN norm into `normed`
  // (post-LN models project x itself), the fused qkv GEMM into qkv and, for rotary models, q and
  // k rotated at `positions`. q_only: rows of q alone (heads x head_dim), for a guess of q.
  void project_qkv(const LayerWeights& w, const Half* x, Half* normed, Half* qkv, std::int64_t rows,
                   const std::int32_t* positions, bool prompt_rows, bool q_only = false);
  // next: the task after it in the pass (null for the last).
  void compute(const BlockTask& task, Step step, Half* x, const BlockTask* next);
  // Decode, during `task`: the next layer's query guessed from this layer's input x (the next
  // layer's norm and q projection, rotated at the step's positions) for the offloaded sequences,
  // and the KV cache's speculative gather of `next`'s pages from it.
  void speculate(const BlockTask& task, const BlockTask& next, const Half* x);
  // One pass (a prefill or a decode step): every task in the zig-zag order, with weights, KV and
  // hidden states loaded ahead of the compute and stored behind it.
  void pass(Step step);
  // Final norm, project_out and logits for `n` rows of the block's hidden states whose row ids
  // are at `row_ids`.
  void head(int n, const std::int32_t* row_ids, std::int64_t rows_in_x);
  // head() of each sequence's newest token (the last column after a left-padded prefill), a chunk
  // of sequences at a time: use(first, n) follows each chunk with logits_ holding its rows.
  template <typename Use>
  void head_of_newest_tokens(const Use& use);
  // Log p(picks[first + r]) of rows [0, n) of the logits now held, into (*out)[first + r].
  void picked_logprobs(int first, int n, std::vector<float>& out);
  // Uploads a step's edits (none: null or empty), and returns the arguments that edit the chunk
  // of rows [first, first + n) of the logits now held (count 0: nothing to edit).
  void upload_edits(const StepLogitEdits* edits);
  kernels::EditLogitsArgs chunk_edits(int first, int n) const;
  // Picks rows [first, first + n) with `pick` between the chunk's edits and their undoing (when
  // log-probs are read, they are of the raw logits).
  template <typename Pick>
  void pick_chunk(int first, int n, std::vector<float>* logprobs, const Pick& pick);
  // Copies the picked ids back (waits for the device) and returns them.
  std::span<const std::int32_t> read_picks();
  void sync();

  Device& device_;
  Ops& ops_;
  const ModelConfig& config_;
  const ModelWeights& weights_;
  Stream& compute_;
  int block_;  // sequences of the block (every GPU batch)
  SlotUse slot_use_;
  int max_prompt_;
  int out_chunk_;
  std::vector<std::unique_ptr<KvPolicy>> policies_;  // one per sequence
  WeightStreamer* streamer_;
  bool speculative_pages_;  // BlockShape::speculative_pages, every weight resident, 1 GPU batch
  std::vector<GpuBatch> gpu_batches_;
  std::vector<BlockTask> tasks_;  // of every pass, in issue order
  // A decode step that computes only its running rows: its tasks, and the pass's (one of them).
  std::vector<GpuBatch> step_batches_;
  std::vector<BlockTask> step_tasks_;
  const std::vector<BlockTask>* pass_tasks_ = &tasks_;
  int head_rows_ = 0;  // the output head computes sequences [0, head_rows_)
  std::unique_ptr<BlockKvCache> kv_cache_;
  Stream* kv_streams_[2] = {nullptr, nullptr};  // h2d_kv and d2h_kv, when KV or hidden states move
  // Each sequence's newest row for the output head, rebuilt every step (kept so a step allocates
  // nothing).
  std::vector<std::int32_t> newest_rows_;

  // Inputs of the current step (device), for the whole block; a GPU batch's part starts at its
  // first sequence. They, and the KV cache's, are copied from pinned staging.
  Buffer ids_, valid_, positions_;
  std::unique_ptr<StepStaging> staging_;
  // Activations: the block's hidden states (on the gpu tier, unless host_activations_ keeps them
  // in pinned memory), and one GPU batch's scratch.
  Buffer x_, t_, emb_, qkv_, attn_, ffn_, gated_;
  Buffer rope_inv_freq_;  // [head_dim / 2] fp32, with rotary positions
  std::unique_ptr<HostActivations> host_activations_;
  // Where the output head finds the block's hidden states after the last pass.
  const Half* hidden_states_ = nullptr;
  // Output head: the newest rows of every sequence, and a chunk's scratch.
  Buffer newest_, out_rows_, gathered_, projected_, logits_, targets_, logprobs_;
  Buffer host_logprobs_;
  Buffer picks_, host_picks_;  // greedy or sampled ids: device and pinned host
  Buffer sample_params_;       // [block] SampleParams of the step being sampled
  // Logit edits of the step (sorted by row), their rows' penalties, the logits they replaced.
  Buffer edits_, penalties_, saved_logits_;
  std::span<const kernels::LogitEdit> step_edits_;  // the step's, sorted by row (host)
  std::int64_t edit_capacity_ = 0;
  // Top log-probs of a chunk (device, then pinned: ids then values), and of the block (host).
  int top_k_ = 0;
  // How the prefill's GEMM rows are multiplied (kernels/linear_args.h); decode rows are exact.
  kernels::PrefillMath prefill_math_ = kernels::PrefillMath::fp32;
  Buffer top_ids_, top_values_, host_top_;
  std::vector<std::int32_t> top_ids_out_;
  std::vector<float> top_values_out_;
  const std::uint8_t* sampleable_ = nullptr;

  // Shape of the last step.
  bool prefilled_ = false;
  bool last_was_prefill_ = false;
  int last_seq_ = 0;
};

}  // namespace offgen
