// The Engine API: load a model onto a device, then generate completions or score texts in
// blocks. The CLI, the bench drivers and the tests all go through it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/core/compression.h"
#include "engine/core/error.h"
#include "engine/device/device.h"
#include "engine/model/model_config.h"
#include "engine/runtime/device_setup.h"
#include "engine/runtime/logit_edits.h"
#include "engine/runtime/pick_extras.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/slot_use.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/ops.h"
#include "offload/weight_store.h"
#include "policies/kv_budget.h"
#include "policies/kv_policy.h"
#include "scheduler/block_sizer.h"
#include "scheduler/kv_footprint.h"
#include "scheduler/placement.h"

namespace offgen {

class BlockRunner;
class WeightSource;
class WeightStreamer;

DeviceChoice parse_device_choice(const std::string& text);

struct EngineOptions {
  // A Hugging Face OPT checkpoint directory, a Hugging Face name (org/name) in the local cache, or
  // dummy:NAME for deterministic dummy weights of a config name (opt-125m ... opt-175b); see
  // engine/model/model_name.h. A bare config name is refused: dummy weights are asked for by name.
  std::string model;
  // Tokenizer directory (vocab.json + merges.txt); empty = the model directory, if it has one.
  std::string tokenizer;
  DeviceChoice device = DeviceChoice::automatic;
  CpuKernelSet cpu_kernels = CpuKernelSet::optimized;
  // How the cpu device multiplies a prefill's GEMM rows (kernels/linear_args.h): exactly, or in
  // bf16 at twice the rate on a CPU with AVX512-BF16. Decode is exact either way.
  kernels::PrefillMath prefill_math = kernels::PrefillMath::fp32;
  std::uint64_t dummy_seed = 0;
  // Which visible GPU the cuda device takes (modulo their count): an MPI rank's local rank.
  int gpu_slot = 0;
  // Where the run's sequences, KV, hidden states and weights live (scheduler/placement.h): a
  // block of gpu_batch x num_gpu_batches sequences shares each layer's weight load; the KV of
  // each GPU batch is split by sequences between the gpu tier and pinned host memory, where cpu
  // attention attends it on the CPU; weights not on the gpu tier stream in layer by layer.
  Placement placement;
  // How weights and the KV cache are stored and moved: fp16, or FlexGen's 4-bit group-wise format
  // (engine/core/compression.h).
  Compression compression{};
  DeviceBudgets budgets;
  // KV eviction: the policy, and its budget (the whole sequence by default).
  PolicyOptions policy;
  KvBudget kv_budget;
  // Folder of the disk tier, for the weights' disk share.
  std::string disk;
  // Batch jobs (generate, score) write results as each block finishes; blocks are kept near this
  // many seconds of work (learned from the blocks that ran; scheduler/block_sizer.h), so results
  // appear and an interrupt loses at most about this much. 0: every block is the planned block.
  double block_seconds = 30.0;
  // generate: a finished sequence's row takes the job's next request at once (continuous
  // batching), where every sequence keeps its KV and hidden states on the gpu tier; otherwise,
  // or when false, a block runs until its last request is done.
  bool continuous_batching = true;
};

enum class FinishReason { stop, length };
const char* finish_reason_name(FinishReason reason);

struct GenerationRequest {
  std::vector<std::int32_t> prompt;  // token ids, BOS included
  int max_tokens = 16;
  SamplingParams sampling;
  std::uint64_t seed = 0;
  bool ignore_eos = false;  // benchmarks generate exactly max_tokens
  // Each generated token's log-probability under the model (log-softmax of the raw logits:
  // temperature 1, before top-k / top-p), in GenerationResult::token_logprobs.
  bool logprobs = false;
  // With logprobs: also the top_logprobs most likely ids at each step with their log-probs
  // (0 to kernels::kMaxTopLogprobs), in GenerationResult::top_logprobs.
  int top_logprobs = 0;
  // Optional: called with the tokens generated so far after each new one (from the
  // shaping.min_tokens-th on); true ends the request there with finish reason `stop` (stop
  // strings and stop ids: the caller decodes and looks for them).
  std::function<bool(std::span<const std::int32_t>)> stop;
  // Logit edits before each pick: penalties, logit_bias, min_tokens (engine/runtime/logit_edits.h).
  LogitShaping shaping;
};

struct GenerationResult {
  std::vector<std::int32_t> tokens;   // generated ids (the EOS that stopped it included)
  std::vector<float> token_logprobs;  // request.logprobs: one per token of `tokens`
  // request.top_logprobs > 0: per token of `tokens`, the most likely ids and their log-probs,
  // most likely first.
  std::vector<std::vector<std::pair<std::int32_t, float>>> top_logprobs;
  FinishReason finish = FinishReason::length;
  std::string error;  // non-empty: the request was rejected, nothing generated
};

struct ScoreRequest {
  std::vector<std::int32_t> tokens;  // BOS included when the caller wants it scored against
  // Also the most likely id at each position (ScoreResult::argmax_ids): whether a text is what
  // greedy decoding would write, as lm-evaluation-harness asks of a continuation.
  bool argmax = false;
};

// Tokens of a text of `len` tokens that score feeds as its prefill with --prefill-tokens
// `prefill_tokens` (0: all it feeds): never its last token, which is only a target (at least
// one, so a one-token text still runs); the rest up to len - 1 are teacher-forced decode steps.
int score_prefill_length(int prefill_tokens, int len);
// The longest text score takes: the model's positions, plus the last token that is never fed.
std::int64_t score_max_tokens(const ModelConfig& config);

struct ScoreResult {
  // token_logprobs[i] = log p(tokens[i] | tokens[:i]); [0] is NaN (nothing to condition on).
  std::vector<float> token_logprobs;
  // request.argmax: argmax_ids[i] = the most likely id given tokens[:i] (equal logits: the lower
  // id, as greedy picks); [0] is -1.
  std::vector<std::int32_t> argmax_ids;
  std::string error;
};

// Thrown by Engine::generate and Engine::score when the interrupt check (set_interrupt_check)
// asks them to stop: every request reported through on_done before it is complete; the others
// did not run, or were dropped unfinished from the block in flight.
class Interrupted : public Error {
 public:
  using Error::Error;
};

class Engine {
 public:
  // Loads the model (and tokenizer, if one is found) onto the chosen device. Throws offgen::Error
  // with a message naming the model / file and the problem.
  explicit Engine(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelConfig& config() const { return config_; }
  // Null when the model has no tokenizer files (dummy weights without --tokenizer).
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  Device& device() { return *device_; }
  const std::string& model_description() const { return model_description_; }
  std::uint64_t weight_bytes() const;
  // Weight bytes on the gpu tier (resident parts, plus the two streaming slots when offloaded).
  std::uint64_t weight_gpu_bytes() const;
  // Weight bytes kept off the gpu tier (pinned), copied in by every pass over the layers.
  std::uint64_t weight_offloaded_bytes() const;
  std::uint64_t weight_disk_bytes() const;  // of those, on the disk tier
  // Weight bytes copied host-to-device so far by layer streaming (0 when all resident).
  std::uint64_t weight_bytes_moved() const;
  // Token slots of every block run so far: those the passes computed (padding and the rows of
  // finished sequences included) and those that carried a request's token.
  const SlotUse& slot_use() const { return slot_use_; }
  // The placement it runs (EngineOptions::placement).
  const Placement& placement() const { return options_.placement; }
  const Compression& compression() const { return options_.compression; }
  kernels::PrefillMath prefill_math() const { return options_.prefill_math; }
  // The KV storage of runners made from now on (compare switches it cell by cell; the weights'
  // storage is fixed at load).
  void set_kv_storage(Storage kv) { options_.compression.kv = kv; }
  // The KV policy of runners made from now on (bench and compare sweep policies over one loaded
  // model). Throws offgen::Error as the constructor does for a policy without a budget.
  void set_policy(const PolicyOptions& policy, const KvBudget& kv_budget);
  PolicyKind policy_kind() const { return options_.policy.kind; }
  // Whether the policy of runners made for these lengths keeps attention scores (h2o).
  bool keeps_attention_scores(int max_prompt, int max_new, int total_len = 0) const;

  // Checks a request against the model (ids in the vocab, prompt + max_tokens within the
  // positions); returns the problem, or an empty string.
  std::string check(const GenerationRequest& request) const;
  std::string check(const ScoreRequest& request) const;

  // Checked before each block and each step of a block (the prefill, every decode step): when
  // it returns true, generate and score stop there and throw Interrupted. Empty: never. Called
  // on the thread that runs generate / score; a signal handler's flag is the usual source.
  void set_interrupt_check(std::function<bool()> check) { interrupted_ = std::move(check); }
  // Throws Interrupted when the interrupt check says stop. Drivers that run a BlockRunner
  // themselves (bench's cases) call it between steps as generate and score do.
  void check_interrupt() const;

  // What generate and score report while they work (either may be empty): the requests each
  // block starts with, and tokens as every step produces them (generated tokens; for score, the
  // tokens each pass scored), so a progress rate counts from the first step. Called on the
  // thread that runs generate / score.
  struct JobProgress {
    std::function<void(std::size_t requests)> block_started;
    std::function<void(std::uint64_t tokens)> tokens;
  };
  void set_job_progress(JobProgress progress) { progress_ = std::move(progress); }

  // Runs every request; bad requests get `error` set and the rest still run. `on_done(index,
  // result)` is called as each request finishes (block by block, not in input order).
  using GenerationCallback = std::function<void(std::size_t, const GenerationResult&)>;
  std::vector<GenerationResult> generate(std::span<const GenerationRequest> requests,
                                         const GenerationCallback& on_done = {});

  // Scores every request. The first `prefill_tokens` tokens of each text run as one prefill, the
  // rest as teacher-forced decode steps through the KV cache (0 = the whole text as prefill).
  // A text's last token is only a target, never fed, so a text may be one token longer than the
  // model's positions (score_prefill_length).
  using ScoreCallback = std::function<void(std::size_t, const ScoreResult&)>;
  std::vector<ScoreResult> score(std::span<const ScoreRequest> requests, int prefill_tokens = 0,
                                 const ScoreCallback& on_done = {});

  // The lengths that decide one sequence's KV budget C (design section 5): its own prompt tokens,
  // the decode steps it feeds back, and the tokens of the whole request (the base of a fraction
  // budget; 0 = prompt + new_tokens). Never its batch-mates'.
  struct SequenceLengths {
    int prompt = 0;
    int new_tokens = 0;
    int total = 0;
  };
  // A runner for one sequence per entry, of up to max_prompt prompt tokens and max_new decode
  // steps, each with the engine's policy at the budget its own lengths give; the KV cache is
  // sized for the largest, split into the engine's GPU batches and KV placement.
  // min_capacity: KV slots per cache at least (0: the largest sequence's), so that requests of
  // larger budgets can take finished sequences' caches (BlockRunner::adopt); likewise
  // min_pages_per_step for quest's pages attended per step.
  std::unique_ptr<BlockRunner> make_runner(int max_prompt, int max_new,
                                           std::span<const SequenceLengths> sequences,
                                           const PickExtras& extras = {}, int min_capacity = 0,
                                           int min_pages_per_step = 0);
  // The same for a block of `block` sequences of equal lengths (benchmarks drive it directly):
  // max_prompt prompt tokens, max_new decode steps, `total_len` tokens (0 = max_prompt + max_new).
  std::unique_ptr<BlockRunner> make_runner(int block, int max_prompt, int max_new,
                                           int total_len = 0);
  // Slots per (layer, sequence, head) make_runner's KV cache would have (the policy's
  // cache_slots: C + 1, more for pyramidkv).
  int kv_capacity(int max_prompt, int max_new, int total_len = 0) const {
    return sequence_policy(max_prompt, max_new, total_len)->cache_slots(config_.num_layers);
  }
  // Whether the policy's budgets differ by layer (pyramidkv), as PlanRequest::per_layer_budgets.
  bool budgets_differ_by_layer(int max_prompt, int max_new, int total_len = 0) const {
    return sequence_policy(max_prompt, max_new, total_len)->layer_policy(0, config_.num_layers) !=
           nullptr;
  }
  // Tokens a decode step attends per (sequence, kv head) at most: C (kv_capacity - 1), or for a
  // selection policy its pages' worth (S x P, no more than the sequence).
  int kv_attended(int max_prompt, int max_new, int total_len = 0) const {
    const std::unique_ptr<KvPolicy> policy = sequence_policy(max_prompt, max_new, total_len);
    if (policy->page_size() > 0) {
      return std::min(policy->pages_per_step() * policy->page_size(), policy->budget());
    }
    return policy->cache_slots(config_.num_layers) - 1;
  }
  // quest's slots per page (PlanRequest::page_size); 0 for a policy that selects no pages.
  int kv_page_size() const {
    return options_.policy.kind == PolicyKind::quest ? options_.policy.page_size : 0;
  }
  // quest's pages a decode step attends (at least 2) and its layers that attend every slot
  // (RunShape); 0 for a policy that selects no pages.
  int kv_pages_per_step(int max_prompt, int max_new, int total_len = 0) const {
    if (kv_page_size() == 0) return 0;
    return sequence_policy(max_prompt, max_new, total_len)->pages_per_step();
  }
  int kv_dense_layers() const { return kv_page_size() > 0 ? options_.policy.dense_layers : 0; }
  // What make_runner's KV cache costs per sequence, without allocating it.
  KvFootprint kv_footprint(int max_prompt, int max_new, int total_len = 0) const;

 private:
  void warn_of_idle_speculation() const;
  SlotUse slot_use_;
  PassTime prefill_time_;  // generate's block prefills, timed up to their picks (the sizer's)
  // Whether generate refills finished rows with the next requests (continuous batching; every
  // placement, unless the options turn it off).
  bool refills_rows() const;
  // A refill waits for rows / refill_divisor() free rows (BlockSizer::rows simulates the same).
  std::size_t refill_divisor() const;
  // Runs `order` (checked requests, in the order they run) through a runner of `rows` rows
  // whose finished rows take the next requests (continuous_generation.cpp); returns how many of
  // `order` it ran — all, unless that runner does not fit, when the rest is left to blocks.
  std::size_t generate_continuously(std::span<const GenerationRequest> requests,
                                    std::span<const std::size_t> order, std::size_t rows,
                                    std::vector<GenerationResult>& results,
                                    const GenerationCallback& report);
  void generate_block(std::span<const GenerationRequest> requests,
                      std::span<const std::size_t> indices, std::vector<GenerationResult>& results,
                      const GenerationCallback& on_done);
  void score_block(std::span<const ScoreRequest> requests, std::span<const std::size_t> indices,
                   int prefill_tokens, std::vector<ScoreResult>& results,
                   const ScoreCallback& on_done);

  // The policy a sequence of these lengths runs, with its budget C (sequence_policy in
  // policies/kv_budget.h).
  std::unique_ptr<KvPolicy> sequence_policy(int max_prompt, int max_new, int total_len) const;
  // The block sizes of one job (scheduler/block_sizer.h).
  BlockSizer job_sizer() const;
  // Before each block of a job: the interrupt check, then progress_.block_started.
  void before_block(std::size_t requests) const;

  EngineOptions options_;
  ModelConfig config_;
  std::string model_description_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<WeightStore> weights_;
  std::unique_ptr<WeightStreamer> streamer_;  // when weights are offloaded or packed
  // [vocab] bytes on the gpu tier, 0 for the ids sampling never draws (the head's rows without a
  // tokenizer entry); empty when every id can be drawn.
  Buffer sampleable_;
  std::function<bool()> interrupted_;
  JobProgress progress_;
  // Reports tokens to progress_ (if it listens).
  void report_tokens(std::uint64_t tokens) const;
};

}  // namespace offgen
