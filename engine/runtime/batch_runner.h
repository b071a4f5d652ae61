// Runs one block of sequences through the OPT forward pass: a prefill of the left-padded prompts,
// then decode steps of one token per sequence over the KV cache. It owns the block's KV cache and
// activation scratch and issues every op through `Ops` on the compute stream; the host waits only
// when it reads an output.
//
// The block schedule (design section 6): the block runs as GPU batches (block_shape.h); a pass
// loops layer -> GPU batch, so each layer's streamed weights are loaded once and shared by every
// GPU batch, while the next layer's weights and the next GPU batch's host-resident KV load behind
// the compute (offloaded_kv.h). Each GPU batch keeps its hidden state between layers; the
// per-layer scratch is sized for one GPU batch and shared.
//
// Semantics are Hugging Face's OPTForCausalLM (design section 4): learned positions offset by 2
// with position ids cumsum(mask) - 1, q scaled by head_dim^-0.5, ReLU MLP, pre- or post-LN,
// optional project_in / project_out, LM head tied to the token embedding.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/device/device.h"
#include "engine/model/model_weights.h"
#include "engine/model/opt_config.h"
#include "engine/runtime/scored_kv_state.h"
#include "kernels/ops.h"
#include "offload/host_activations.h"
#include "offload/offloaded_kv.h"
#include "offload/weight_streamer.h"
#include "policies/cache_slots.h"
#include "policies/kv_policy.h"
#include "scheduler/batch_formation.h"
#include "scheduler/block_shape.h"

namespace offgen {

class BatchRunner {
 public:
  // Sizes everything for policies.size() sequences of up to `max_prompt` prompt tokens and
  // `max_new` decode steps. Each sequence has its own policy (one kind, each with the sequence's
  // own budget C, so its tokens never depend on its batch-mates); the KV cache has the largest
  // C + 1 slots per (layer, sequence, head). Throws OutOfMemoryError if the KV cache or scratch
  // does not fit the gpu tier.
  // streamer: where layer weights are offloaded, what brings them in per layer (else null).
  // shape: GPU batches and KV placement.
  BatchRunner(Device& device, Ops& ops, const OptConfig& config, const ModelWeights& weights,
              int max_prompt, int max_new, std::vector<std::unique_ptr<KvPolicy>> policies,
              WeightStreamer* streamer = nullptr, const BlockShape& shape = {});
  BatchRunner(const BatchRunner&) = delete;
  BatchRunner& operator=(const BatchRunner&) = delete;
  ~BatchRunner();

  // Runs the prompts (prompts.batch must equal this runner's batch, prompts.seq <= max_prompt).
  void prefill(const PaddedBatch& prompts);
  // One decode step: tokens[b] is sequence b's next input token. advancing[b] = 0 marks a
  // sequence that is done (finished, or past the end of its text): its token is computed but not
  // kept in the cache, so it costs nothing later.
  void decode(std::span<const std::int32_t> tokens, std::span<const std::uint8_t> advancing);

  // After prefill() or decode(): each sequence's greedy next token (argmax of its logits, ties:
  // the lowest id), computed on the device so only the ids come back. Valid until the next call.
  std::span<const std::int32_t> greedy_tokens();
  // After prefill() or decode(): each sequence's next token picked by params[b] (greedy where its
  // temperature is 0; kernels/sampling_args.h), on the device, so only the ids come back: by
  // argmax alone when every row is greedy, else by the sampler. Valid until the next call.
  std::span<const std::int32_t> next_tokens(std::span<const kernels::SampleParams> params);
  // Ids that sampling never draws (a device mask of vocab bytes, 0 = never, or null = none
  // excluded): the model's rows that the tokenizer has no entry for. Must outlive the runner.
  void set_sampleable(const std::uint8_t* mask) { sampleable_ = mask; }
  // After prefill() or decode(): log p(targets[r]) for each row r of the last step — prefill rows
  // are b * seq + i, decode rows are b. Rows with targets[r] < 0 are skipped and come back NaN.
  std::vector<float> target_logprobs(std::span<const std::int32_t> targets);

  int batch() const { return batch_; }
  int kv_capacity() const { return capacity_; }
  const std::vector<GpuBatch>& gpu_batches() const { return gpu_batches_; }
  // Bytes of KV cache this runner allocated (all layers, K and V, every tier).
  std::uint64_t kv_bytes() const;
  // Of those, in pinned host memory.
  std::uint64_t kv_host_bytes() const {
    return offloaded_kv_ ? offloaded_kv_->host_cache_bytes() : 0;
  }
  // Bytes of score-keeping policy state it allocated (0 for position-based policies).
  std::uint64_t policy_state_bytes() const;
  // Bytes of hidden states copied between the gpu tier and pinned memory so far (0 unless the
  // activations live on the host).
  std::uint64_t activation_bytes_moved() const {
    return host_activations_ ? host_activations_->moved_bytes() : 0;
  }

  // KV cache traffic of the decode steps so far: attention reads every cached K and V row of
  // each (layer, sequence, head) it attends over, and each step writes one new row.
  struct KvTraffic {
    std::uint64_t read_bytes = 0;
    std::uint64_t written_bytes = 0;
    int decode_steps = 0;
    // Of the host-resident KV: bytes copied host-to-device and device-to-host (prefill included).
    std::uint64_t loaded_bytes = 0;
    std::uint64_t stored_bytes = 0;
    double moved_per_step() const {
      return decode_steps > 0 ? static_cast<double>(read_bytes + written_bytes) / decode_steps
                              : 0.0;
    }
  };
  KvTraffic kv_traffic() const;

 private:
  void upload(void* device_dst, const void* host_src, std::size_t bytes);
  struct Lane;  // a GPU batch and its state
  // The embedding of a GPU batch's tokens into x, its hidden states.
  void embed(const Lane& lane, Half* x);
  void layer(int index, int lane, int task, bool is_prefill, Half* x);
  void attend_decode(int index, int lane, int task);
  // Every layer once, in order, each over every GPU batch, with streamed weights brought in
  // around each layer.
  void layers(bool is_prefill);
  // Final norm, project_out and logits for `n` rows of the block's hidden states whose row ids
  // are at `row_ids`.
  void head(int n, const std::int32_t* row_ids, std::int64_t rows_in_x);
  // head() of each sequence's newest token (the last column after a left-padded prefill), a chunk
  // of sequences at a time: use(first, n) follows each chunk with logits_ holding its rows.
  template <typename Use>
  void head_of_newest_tokens(const Use& use);
  // Copies the picked ids back (waits for the device) and returns them.
  std::span<const std::int32_t> read_picks();
  void sync();

  Device& device_;
  Ops& ops_;
  const OptConfig& config_;
  const ModelWeights& weights_;
  Stream& compute_;
  int batch_;
  int max_prompt_;
  int capacity_;
  int out_chunk_;
  std::vector<std::unique_ptr<KvPolicy>> policies_;  // one per sequence
  WeightStreamer* streamer_;
  BlockShape shape_;
  std::vector<GpuBatch> gpu_batches_;
  struct Lane {
    GpuBatch batch;
    // KV cache of its gpu-resident sequences, per layer: [resident, heads, capacity, head_dim].
    std::vector<Buffer> k_cache, v_cache;
    // Per-head state of a score-keeping policy (h2o), for all its sequences, on the gpu tier.
    std::unique_ptr<ScoredKvState> scored;
  };
  std::vector<Lane> lanes_;
  int lane_rows_ = 0;  // the largest GPU batch's rows (batch x max_prompt)
  // The KV of the sequences kept in pinned memory (null when there are none).
  std::unique_ptr<OffloadedKv> offloaded_kv_;
  Stream* kv_streams_[2] = {nullptr, nullptr};  // h2d_kv and d2h_kv, when there is offloaded KV
  // Position-based policies plan slots on the host (null for score-keeping ones, whose per-head
  // state lives in each lane).
  std::optional<CacheSlots> slots_;
  bool scored_ = false;
  std::vector<int> cached_;         // tokens held per sequence (the same in every layer and head)
  std::vector<std::int32_t> seen_;  // real tokens of each sequence so far: the next HF position
  // The current decode step's positions and attended slot counts (uploaded with its inputs).
  std::vector<std::int32_t> step_positions_, step_counts_;
  // Host arrays rebuilt every step, kept so a step allocates nothing: the position-based
  // policies' slot plan and each sequence's newest row for the output head.
  std::vector<std::int32_t> step_sequence_slot_, step_slot_counts_, step_write_slot_;
  std::vector<std::int32_t> newest_rows_;

  // Inputs of the current step (device) and the pinned host staging they are copied from.
  // Sized for the whole block; a GPU batch's part starts at its first sequence.
  Buffer ids_, valid_, positions_, token_slot_, write_slot_, slot_count_, advancing_;
  Buffer staging_;
  std::size_t staging_used_ = 0;
  // Activations: the block's hidden states (on the gpu tier, unless host_activations_ keeps them
  // in pinned memory), and one GPU batch's scratch.
  Buffer x_, t_, emb_, qkv_, attn_, ffn_;
  std::unique_ptr<HostActivations> host_activations_;
  // Where the output head finds the block's hidden states after the last pass.
  const Half* hidden_states_ = nullptr;
  // Output head: the newest rows of every sequence, and a chunk's scratch.
  Buffer newest_, out_rows_, gathered_, projected_, logits_, targets_, logprobs_;
  Buffer host_logprobs_;
  Buffer picks_, host_picks_;  // greedy or sampled ids: device and pinned host
  Buffer sample_params_;       // [batch] SampleParams of the step being sampled
  const std::uint8_t* sampleable_ = nullptr;

  KvTraffic traffic_;

  // Shape of the last step.
  bool prefilled_ = false;
  bool last_was_prefill_ = false;
  int last_seq_ = 0;
};

}  // namespace offgen
