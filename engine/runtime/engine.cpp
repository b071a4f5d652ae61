#include "engine/runtime/engine.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

#include "engine/core/error.h"
#include "engine/core/parameter_error.h"
#include "engine/model/checkpoint.h"
#include "engine/model/dummy_weights.h"
#include "engine/model/model_name.h"
#include "engine/runtime/block_runner.h"
#include "engine/runtime/device_setup.h"
#include "engine/runtime/generation_picks.h"
#include "offload/weight_store.h"
#include "offload/weight_streamer.h"
#include "policies/kv_budget.h"
#include "scheduler/batch_formation.h"
#include "scheduler/block_sizer.h"

namespace offgen {

DeviceChoice parse_device_choice(const std::string& text) {
  if (text == "auto") return DeviceChoice::automatic;
  if (text == "cpu") return DeviceChoice::cpu;
  if (text == "cuda") return DeviceChoice::cuda;
  fail("unknown device '{}' (expected auto, cuda or cpu)", text);
}

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
  }
  return "?";
}

// Speculative page selection guesses pages only where BlockRunner can (BlockShape::
// speculative_pages): say so once when the run has nothing it applies to, rather than leave the
// option silently idle.
void Engine::warn_of_idle_speculation() const {
  const BlockShape& block = options_.placement.block;
  if (!block.speculative_pages) return;
  const char* why =
      idle_speculation(block, options_.policy.kind == PolicyKind::quest, streamer_ != nullptr);
  if (why != nullptr) spdlog::warn("speculative page selection does nothing in this run: {}", why);
}

Engine::Engine(const EngineOptions& options) : options_(options) {
  const auto load_start = std::chrono::steady_clock::now();
  options.placement.validate();
  validate_policy_budget(options.policy, options.kv_budget);
  namespace fs = std::filesystem;
  std::unique_ptr<WeightSource> source;
  std::unique_ptr<Checkpoint> checkpoint;
  const ModelName name = resolve_model_name(options.model, BareConfigName::refused);
  switch (name.kind) {
    case ModelName::Kind::checkpoint:
      checkpoint = Checkpoint::open(name.dir);
      config_ = checkpoint->config();
      model_description_ = checkpoint->describe();
      break;
    case ModelName::Kind::dummy:
      config_ = name.config();
      source = std::make_unique<DummyWeights>(config_, options.dummy_seed);
      model_description_ = source->describe();
      break;
  }

  OpenedDevice opened =
      open_device(options.device, options.budgets, options.cpu_kernels, options.gpu_slot,
                  options.prefill_math, options.compression.weights);
  device_ = std::move(opened.device);
  ops_ = std::move(opened.ops);

  const WeightSource& weights =
      checkpoint ? static_cast<const WeightSource&>(*checkpoint) : *source;
  const WeightPlacement& shares = options.placement.weights;
  try {
    weights_ = std::make_unique<WeightStore>(*device_, config_, weights, shares, options.disk,
                                             options.compression.weights, ops_.get());
    if (weights_->streamed() || weights_->expands()) {
      streamer_ = std::make_unique<WeightStreamer>(*device_, *weights_, config_.num_layers);
    }
  } catch (const OutOfMemoryError& e) {
    // Say which placement did not fit and which parameters move it.
    fail_naming<OutOfMemoryError>([model = model_description_, shares,
                                   cause = std::string(e.what())](ParameterNamer name_of) {
      return fmt::format(
          "the weights of {} do not fit with {:.0f}% of each layer on the gpu tier, {:.0f}% in "
          "pinned memory and {:.0f}% on disk: {}. Lower {} / {} (with a {} folder for the rest), "
          "raise {} / {}, or give no {} and let the planner choose",
          model, 100.0 * shares.gpu, 100.0 * shares.pinned, 100.0 * shares.disk(), cause,
          name_of(Parameter::weights_gpu_share), name_of(Parameter::weights_pinned_share),
          name_of(Parameter::disk_folder), name_of(Parameter::gpu_budget),
          name_of(Parameter::pinned_budget), name_of(Parameter::placement));
    });
  }

  warn_of_idle_speculation();

  fs::path tokenizer_dir = options.tokenizer;
  // A checkpoint's own tokenizer: vocab.json + merges.txt (OPT), tokenizer.json (the LLaMA
  // family) or a GGUF file's metadata, as the CLI finds it (engine/cli/request_fields.cpp).
  if (tokenizer_dir.empty() && checkpoint && Tokenizer::found_in(checkpoint->dir())) {
    tokenizer_dir = checkpoint->dir();
  }
  if (!tokenizer_dir.empty()) tokenizer_ = Tokenizer::load(tokenizer_dir);
  if (tokenizer_) {
    // OPT's head has 50272 rows and its tokenizer 50265 entries: the rows without one are never
    // sampled (greedy picks stay the exact argmax, as Hugging Face's).
    std::vector<std::uint8_t> sampleable(static_cast<std::size_t>(config_.vocab_size));
    for (std::int32_t id = 0; id < config_.vocab_size; ++id) {
      sampleable[static_cast<std::size_t>(id)] = tokenizer_->has_id(id) ? 1 : 0;
    }
    if (std::find(sampleable.begin(), sampleable.end(), 0) != sampleable.end()) {
      sampleable_ = device_->allocate(Tier::gpu, sampleable.size());
      Stream& stream = device_->stream(StreamRole::compute);
      device_->copy_async(sampleable_.data(), sampleable.data(), sampleable.size(), stream);
      stream.synchronize();
    }
  }
  // Load time covers reading, converting (dequantizing a GGUF) and placing the weights.
  spdlog::info(
      "model {} ({}{} layers, hidden {}) on {}, loaded in {:.2f} s", model_description_,
      checkpoint ? checkpoint->weights_file() + ", " : std::string(), config_.num_layers,
      config_.hidden_size, device_->name(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());
}

Engine::~Engine() {
  if (device_) {
    try {
      device_->synchronize();
    } catch (const std::exception& e) {
      spdlog::warn("engine: device error while shutting down: {}", e.what());
    }
  }
}

std::uint64_t Engine::weight_bytes() const {
  return weights_->bytes();
}

std::uint64_t Engine::weight_gpu_bytes() const {
  return weights_->gpu_bytes() + (streamer_ ? streamer_->slot_bytes() : 0);
}

std::uint64_t Engine::weight_offloaded_bytes() const {
  return weights_->offloaded_bytes();
}

std::uint64_t Engine::weight_disk_bytes() const {
  return weights_->disk_bytes();
}

std::uint64_t Engine::weight_bytes_moved() const {
  return streamer_ ? streamer_->bytes_moved() : 0;
}

namespace {

// Runs one block; if its runner does not fit the memory budgets, splits it in two and retries,
// down to single requests, which then fail alone. Safe because a block's only allocation is its
// runner, made before anything is reported (run_in_blocks retries only blocks that reported
// nothing, so no request is ever reported twice).
template <typename Run, typename FailOne>
void run_splitting_on_oom(const std::vector<std::size_t>& indices, const Run& run,
                          const FailOne& fail_one) {
  try {
    run(std::span<const std::size_t>(indices));
  } catch (const OutOfMemoryError& e) {
    if (indices.size() == 1) {
      fail_one(indices.front(), e.what());
      return;
    }
    const auto middle = indices.begin() + static_cast<std::ptrdiff_t>(indices.size() / 2);
    spdlog::info("a block of {} does not fit; retrying as {} + {}", indices.size(),
                 indices.size() / 2, indices.size() - indices.size() / 2);
    run_splitting_on_oom(std::vector<std::size_t>(indices.begin(), middle), run, fail_one);
    run_splitting_on_oom(std::vector<std::size_t>(middle, indices.end()), run, fail_one);
  }
}

// What the sizer learns from a run of `ran` slots in `seconds`, of which `prefill` were the
// prefills': the prefills and the decode steps apart, two shapes of pass, when both ran.
void observe_run(BlockSizer& sizer, const SlotUse& ran, const PassTime& prefill, double seconds) {
  if (prefill.passes > 0 && ran.passes > prefill.passes && prefill.seconds < seconds &&
      ran.computed() > prefill.slots) {
    sizer.observe(static_cast<int>(prefill.passes), static_cast<double>(prefill.slots),
                  prefill.seconds);
    sizer.observe(static_cast<int>(ran.passes - prefill.passes),
                  static_cast<double>(ran.computed() - prefill.slots), seconds - prefill.seconds);
  } else {
    sizer.observe(static_cast<int>(ran.passes), static_cast<double>(ran.computed()), seconds);
  }
}

// What generate and score share: each request is checked (a bad one is reported at once and
// skipped), the good ones run in order of length. Results, and a report that counts them.
template <typename Result>
struct JobResults {
  JobResults(std::size_t requests, const std::function<void(std::size_t, const Result&)>& on_done)
      : results(requests), on_done_(on_done) {}
  std::vector<Result> results;
  std::size_t reported = 0;
  std::function<void(std::size_t, const Result&)> on_done_;
  const std::function<void(std::size_t, const Result&)> report = [this](std::size_t index,
                                                                        const Result& result) {
    ++reported;
    if (on_done_) on_done_(index, result);
  };
};

// The requests that pass `check`, in the order they run (by length); the others are reported.
template <typename Result, typename Request, typename Check, typename Length>
std::vector<std::size_t> checked_in_order(std::span<const Request> requests, const Check& check,
                                          const Length& length, JobResults<Result>& job) {
  std::vector<std::size_t> checked;
  std::vector<std::size_t> lengths;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    job.results[i].error = check(requests[i]);
    if (job.results[i].error.empty()) {
      checked.push_back(i);
      lengths.push_back(length(requests[i]));
    } else {
      job.report(i, job.results[i]);
    }
  }
  std::vector<std::size_t> good;
  for (std::size_t k : order_by_length(lengths)) good.push_back(checked[k]);
  return good;
}

// Runs `good` (checked, in order) in blocks whose size the sizer keeps near the time target, and
// a request that does not fit even alone gets its own "does not fit" error.
// `before_block(n)` runs before each block of n requests (the interrupt check, progress);
// run_block(block, results, report) reports each request it finishes through `report`; slots()
// is the engine's token-slot count, whose growth over a block the sizer learns the cost from.
// prefills() is the engine's count of prefill passes, their slots and seconds: the sizer sees a
// block as its prefill and its decode steps, two shapes of pass, so one block tells fixed costs
// from per-slot ones.
template <typename Result, typename Request, typename Work, typename RunBlock, typename BeforeBlock,
          typename Slots, typename Prefills>
void run_in_blocks(std::span<const Request> requests, std::span<const std::size_t> good,
                   BlockSizer& sizer, const Work& work, const RunBlock& run_block,
                   JobResults<Result>& job, const BeforeBlock& before_block, const Slots& slots,
                   const Prefills& prefills) {
  std::vector<SequenceWork> upcoming;
  for (std::size_t index : good) upcoming.push_back(work(requests[index]));
  using Clock = std::chrono::steady_clock;
  std::vector<Result>& results = job.results;
  std::size_t start = 0;
  while (start < good.size()) {
    const std::size_t n = sizer.next(std::span(upcoming).subspan(start));
    before_block(n);
    const std::vector<std::size_t> indices(good.begin() + static_cast<std::ptrdiff_t>(start),
                                           good.begin() + static_cast<std::ptrdiff_t>(start + n));
    const auto began = Clock::now();
    const SlotUse slots_before = slots();
    const PassTime prefills_before = prefills();
    run_splitting_on_oom(
        indices,
        [&](std::span<const std::size_t> block) {
          const std::size_t before = job.reported;
          try {
            run_block(block, results, job.report);
          } catch (const OutOfMemoryError& e) {
            // An allocation failing after some of the block was reported (a device's own
            // workspace, not the runner) cannot be retried without answering a request twice.
            if (job.reported != before) {
              throw Error(
                  fmt::format("the device ran out of memory while running a block: {}", e.what()));
            }
            for (std::size_t index : block) results[index] = Result{};  // a retry starts afresh
            throw;
          }
        },
        [&](std::size_t index, const std::string& why) {
          results[index] = Result{};
          results[index].error = fmt::format("does not fit the memory budgets: {}", why);
          job.report(index, results[index]);
        });
    // What actually ran: passes and slots (early stops end a block sooner than its max_tokens;
    // a block split to fit runs its halves one after the other).
    const SlotUse ran = slots() - slots_before;
    const double seconds = std::chrono::duration<double>(Clock::now() - began).count();
    observe_run(sizer, ran, prefills() - prefills_before, seconds);
    start += n;
  }
}

// Rows of a scoring pass that have a target (the tokens it scored).
std::uint64_t scored_rows(std::span<const std::int32_t> targets) {
  return static_cast<std::uint64_t>(
      std::count_if(targets.begin(), targets.end(), [](std::int32_t t) { return t >= 0; }));
}

std::string check_ids(std::span<const std::int32_t> ids, const ModelConfig& config) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= config.vocab_size) {
      return fmt::format("token id {} at position {} is outside the vocabulary [0, {})", ids[i], i,
                         config.vocab_size);
    }
  }
  return {};
}

// Why a sliding-window model's limit is its window.
std::string window_note(const ModelConfig& config) {
  if (config.max_positions() == config.max_position_embeddings) return {};
  return " (its sliding window: offgen attends every cached token, which equals the model only "
         "within the window)";
}
}  // namespace

std::string Engine::check(const GenerationRequest& request) const {
  if (request.prompt.empty()) return "the prompt is empty";
  if (request.max_tokens < 1)
    return fmt::format("max_tokens must be >= 1 (got {})", request.max_tokens);
  // Positions used: the prompt's, then one per generated token fed back — the last one never is.
  const std::int64_t positions =
      static_cast<std::int64_t>(request.prompt.size()) + request.max_tokens - 1;
  if (positions > config_.max_positions()) {
    return fmt::format(
        "prompt ({} tokens) + max_tokens ({}) - 1 exceeds the model's {} positions{}",
        request.prompt.size(), request.max_tokens, config_.max_positions(), window_note(config_));
  }
  try {
    validate(request.sampling);
    validate(request.shaping, config_.vocab_size);
    OFFGEN_CHECK(request.top_logprobs >= 0 &&
                     request.top_logprobs <= std::min(kernels::kMaxTopLogprobs, config_.vocab_size),
                 "top_logprobs must be 0 to {} (got {})", kernels::kMaxTopLogprobs,
                 request.top_logprobs);
  } catch (const Error& e) {
    return e.what();
  }
  return check_ids(request.prompt, config_);
}

int score_prefill_length(int prefill_tokens, int len) {
  const int fed = std::max(1, len - 1);
  return prefill_tokens > 0 ? std::min(prefill_tokens, fed) : fed;
}

std::int64_t score_max_tokens(const ModelConfig& config) {
  return config.max_positions() + 1;
}

std::string Engine::check(const ScoreRequest& request) const {
  if (request.tokens.empty()) return "the text has no tokens";
  if (static_cast<std::int64_t>(request.tokens.size()) > score_max_tokens(config_)) {
    return fmt::format(
        "the text has {} tokens, more than the {} the model's {} positions score (the last token "
        "is only a target){}",
        request.tokens.size(), score_max_tokens(config_), config_.max_positions(),
        window_note(config_));
  }
  return check_ids(request.tokens, config_);
}

std::size_t Engine::refill_divisor() const {
  // Where the weights stream in every pass, a refill's pass costs a weight load: fewer, larger.
  return weights_->streamed() ? 4 : 8;
}

std::unique_ptr<KvPolicy> Engine::sequence_policy(int max_prompt, int max_new,
                                                  int total_len) const {
  return offgen::sequence_policy(options_.policy, options_.kv_budget, max_prompt, max_new,
                                 total_len);
}

void Engine::check_interrupt() const {
  if (interrupted_ && interrupted_()) throw Interrupted("interrupted");
}

std::unique_ptr<BlockRunner> Engine::make_runner(int max_prompt, int max_new,
                                                 std::span<const SequenceLengths> sequences,
                                                 const PickExtras& extras, int min_capacity,
                                                 int min_pages_per_step) {
  std::vector<std::unique_ptr<KvPolicy>> policies;
  for (const SequenceLengths& s : sequences) {
    policies.push_back(sequence_policy(s.prompt, s.new_tokens, s.total));
  }
  auto runner = std::make_unique<BlockRunner>(
      *device_, *ops_, config_, weights_->weights(), max_prompt, max_new, std::move(policies),
      streamer_.get(), options_.placement.block, options_.compression.kv, extras, min_capacity,
      options_.prefill_math, min_pages_per_step);
  if (sampleable_) runner->set_sampleable(sampleable_.as<const std::uint8_t>());
  return runner;
}

std::unique_ptr<BlockRunner> Engine::make_runner(int block, int max_prompt, int max_new,
                                                 int total_len) {
  const std::vector<SequenceLengths> sequences(static_cast<std::size_t>(block),
                                               {max_prompt, max_new, total_len});
  return make_runner(max_prompt, max_new, sequences);
}

void Engine::set_policy(const PolicyOptions& policy, const KvBudget& kv_budget) {
  validate_policy_budget(policy, kv_budget);
  options_.policy = policy;
  options_.kv_budget = kv_budget;
}

bool Engine::keeps_attention_scores(int max_prompt, int max_new, int total_len) const {
  return sequence_policy(max_prompt, max_new, total_len)->needs_attention_scores();
}

KvFootprint Engine::kv_footprint(int max_prompt, int max_new, int total_len) const {
  const std::unique_ptr<KvPolicy> policy = sequence_policy(max_prompt, max_new, total_len);
  return offgen::kv_footprint(config_, policy->cache_slots(config_.num_layers),
                              policy->needs_attention_scores(), max_prompt,
                              options_.compression.kv);
}

BlockSizer Engine::job_sizer() const {
  // Streamed weights make every pass cost about the same whatever the block: no small first one.
  return BlockSizer(static_cast<std::size_t>(options_.placement.block_size()),
                    options_.block_seconds,
                    /*probe=*/!weights_->streamed());
}

void Engine::report_tokens(std::uint64_t tokens) const {
  if (progress_.tokens && tokens > 0) progress_.tokens(tokens);
}

void Engine::before_block(std::size_t requests) const {
  check_interrupt();
  if (progress_.block_started) progress_.block_started(requests);
}

std::vector<GenerationResult> Engine::generate(std::span<const GenerationRequest> requests,
                                               const GenerationCallback& on_done) {
  JobResults<GenerationResult> job(requests.size(), on_done);
  const std::vector<std::size_t> good = checked_in_order<GenerationResult>(
      requests, [&](const GenerationRequest& r) { return check(r); },
      [](const GenerationRequest& r) { return r.prompt.size(); }, job);
  BlockSizer sizer = job_sizer();
  const auto work = [](const GenerationRequest& r) {
    return SequenceWork{static_cast<int>(r.prompt.size()), r.max_tokens};
  };
  const auto run_blocks = [&](std::span<const std::size_t> order) {
    run_in_blocks<GenerationResult>(
        requests, order, sizer, work,
        [&](std::span<const std::size_t> block, std::vector<GenerationResult>& results,
            const GenerationCallback& report) { generate_block(requests, block, results, report); },
        job, [&](std::size_t n) { before_block(n); }, [&] { return slot_use_; },
        [&] { return prefill_time_; });
  };
  std::size_t started = 0;
  if (refills_rows() && !good.empty()) {
    std::vector<SequenceWork> upcoming;
    for (const std::size_t index : good) upcoming.push_back(work(requests[index]));
    // The sizer's first, small block measures the cost of work (its rows start together and
    // none is refilled); then one runner of the rows the sizer fits to the target runs the rest,
    // each finished row taking the next request.
    const auto planned = static_cast<std::size_t>(options_.placement.block_size());
    const std::size_t probe = sizer.next(upcoming);
    if (!sizer.measured() && probe < std::min(planned, good.size())) {
      const auto began = std::chrono::steady_clock::now();
      const SlotUse slots_before = slot_use_;
      const PassTime prefills_before = prefill_time_;
      started = generate_continuously(requests, std::span(good).first(probe), probe, job.results,
                                      job.report);
      observe_run(sizer, slot_use_ - slots_before, prefill_time_ - prefills_before,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
    }
    const std::size_t rows = sizer.rows(std::span(upcoming).subspan(started), refill_divisor());
    started += generate_continuously(requests, std::span(good).subspan(started), rows, job.results,
                                     job.report);
  }
  run_blocks(std::span(good).subspan(started));
  return std::move(job.results);
}

void Engine::generate_block(std::span<const GenerationRequest> requests,
                            std::span<const std::size_t> indices,
                            std::vector<GenerationResult>& results,
                            const GenerationCallback& on_done) {
  std::vector<std::vector<std::int32_t>> prompts;
  int max_new = 0;
  std::vector<std::mt19937_64> rngs;
  // The last sampled token is never fed back, so a request caches max_tokens - 1 decode tokens;
  // a fraction budget is of its own prompt + max_tokens.
  std::vector<SequenceLengths> lengths;
  std::vector<LogitEditor::Sequence> shaped;
  std::vector<std::int32_t> eos_ids = {config_.eos_token_id};
  eos_ids.insert(eos_ids.end(), config_.more_eos_token_ids.begin(),
                 config_.more_eos_token_ids.end());
  for (std::size_t index : indices) {
    const GenerationRequest& r = requests[index];
    prompts.push_back(r.prompt);
    max_new = std::max(max_new, r.max_tokens);
    rngs.emplace_back(r.seed);
    const int prompt = static_cast<int>(r.prompt.size());
    lengths.push_back({prompt, r.max_tokens - 1, prompt + r.max_tokens});
    shaped.push_back({&r.shaping, r.prompt,
                      r.ignore_eos ? std::span<const std::int32_t>{} : eos_ids, r.max_tokens});
  }
  // Penalties, logit_bias and min_tokens: each step's edits of the rows that ask for them.
  LogitEditor editor(shaped);
  const PaddedBatch padded = left_pad(prompts, config_.pad_token_id);
  int top_logprobs = 0;
  for (std::size_t index : indices) {
    if (requests[index].logprobs)
      top_logprobs = std::max(top_logprobs, requests[index].top_logprobs);
  }
  auto runner = make_runner(padded.seq, max_new - 1, lengths, {editor.capacity(), top_logprobs});
  const SlotUseCounter count_slots{*runner, slot_use_};
  check_interrupt();
  const auto prefill_began = std::chrono::steady_clock::now();
  const SlotUse before_prefill = runner->slot_use();
  runner->prefill(padded);

  // Tokens are picked on the device and one id per sequence comes back each step, each sampled
  // sequence fed its own draw (a greedy one, or one that is done, takes none).
  std::vector<kernels::SampleParams> sample(indices.size());
  std::span<const std::int32_t> picks;
  // Log-probs are read back only for blocks where some request asks for them.
  const bool want_logprobs = std::any_of(indices.begin(), indices.end(),
                                         [&](std::size_t i) { return requests[i].logprobs; });
  std::vector<float> logprobs;
  auto read_step = [&](std::span<const std::uint8_t> active) {
    for (std::size_t b = 0; b < indices.size(); ++b) {
      sample[b] =
          active[b] ? next_sample(requests[indices[b]].sampling, rngs[b]) : kernels::SampleParams{};
    }
    StepLogitEdits edits;
    if (editor.any()) edits = editor.step(active);
    picks = runner->next_tokens(sample, want_logprobs ? &logprobs : nullptr,
                                editor.any() ? &edits : nullptr);
  };

  std::vector<std::uint8_t> active(indices.size(), 1);
  std::vector<std::int32_t> next(indices.size(), config_.pad_token_id);
  read_step(active);  // waits for the prefill
  prefill_time_ += PassTime{
      1, (runner->slot_use() - before_prefill).computed(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - prefill_began).count()};
  for (int step = 0; step < max_new; ++step) {
    report_tokens(static_cast<std::uint64_t>(std::count(active.begin(), active.end(), 1)));
    bool any_active = false;
    for (std::size_t b = 0; b < indices.size(); ++b) {
      if (!active[b]) continue;
      const GenerationRequest& request = requests[indices[b]];
      GenerationResult& result = results[indices[b]];
      const std::int32_t token = picks[b];
      editor.record(b, token);
      if (record_pick(config_, request, result, token, *runner, b, logprobs)) {
        active[b] = 0;
        if (on_done) on_done(indices[b], result);
      } else {
        next[b] = token;
        any_active = true;
      }
    }
    if (!any_active) break;
    for (std::size_t b = 0; b < indices.size(); ++b) {
      if (!active[b]) next[b] = config_.pad_token_id;
    }
    check_interrupt();
    runner->decode(next, active);
    read_step(active);
  }
}

std::vector<ScoreResult> Engine::score(std::span<const ScoreRequest> requests, int prefill_tokens,
                                       const ScoreCallback& on_done) {
  OFFGEN_CHECK_NAMING(prefill_tokens >= 0, [=](ParameterNamer name) {
    return fmt::format("{} must be >= 0 (got {})", name(Parameter::prefill_tokens), prefill_tokens);
  });
  JobResults<ScoreResult> job(requests.size(), on_done);
  const std::vector<std::size_t> good = checked_in_order<ScoreResult>(
      requests, [&](const ScoreRequest& r) { return check(r); },
      [](const ScoreRequest& r) { return r.tokens.size(); }, job);
  BlockSizer sizer = job_sizer();
  run_in_blocks<ScoreResult>(
      requests, std::span<const std::size_t>(good), sizer,
      [&](const ScoreRequest& r) {
        const int len = static_cast<int>(r.tokens.size());
        const int prefix = score_prefill_length(prefill_tokens, len);
        return SequenceWork{prefix, std::max(1, len - prefix)};
      },
      [&](std::span<const std::size_t> block, std::vector<ScoreResult>& results,
          const ScoreCallback& report) {
        score_block(requests, block, prefill_tokens, results, report);
      },
      job, [&](std::size_t n) { before_block(n); }, [&] { return slot_use_; },
      [] { return PassTime{}; });
  return std::move(job.results);
}

void Engine::score_block(std::span<const ScoreRequest> requests,
                         std::span<const std::size_t> indices, int prefill_tokens,
                         std::vector<ScoreResult>& results, const ScoreCallback& on_done) {
  const int block = static_cast<int>(indices.size());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::vector<std::int32_t>> prefixes;
  std::vector<int> lengths;
  int decode_steps = 0;
  bool any_argmax = false;
  for (std::size_t index : indices) {
    const auto& tokens = requests[index].tokens;
    const int len = static_cast<int>(tokens.size());
    const int prefix = score_prefill_length(prefill_tokens, len);
    prefixes.emplace_back(tokens.begin(), tokens.begin() + prefix);
    lengths.push_back(len);
    // Teacher forcing feeds tokens prefix .. len-2; the last token is only ever a target.
    decode_steps = std::max(decode_steps, len - prefix - 1);
    results[index].token_logprobs.assign(tokens.size(), nan);
    if (requests[index].argmax) {
      results[index].argmax_ids.assign(tokens.size(), -1);
      any_argmax = true;
    }
  }
  const PaddedBatch padded = left_pad(prefixes, config_.pad_token_id);
  // Each text's budget is of its own length: its prefix, then its teacher-forced steps.
  std::vector<SequenceLengths> sequences;
  for (std::size_t b = 0; b < indices.size(); ++b) {
    const int prefix = static_cast<int>(prefixes[b].size());
    sequences.push_back({prefix, std::max(0, lengths[b] - prefix - 1), lengths[b]});
  }
  // The most likely id comes from the top-k kernel with k = 1.
  auto runner = make_runner(padded.seq, decode_steps, sequences, PickExtras{0, any_argmax ? 1 : 0});
  const SlotUseCounter count_slots{*runner, slot_use_};
  std::vector<std::int32_t> argmax;
  std::vector<std::int32_t>* const want_argmax = any_argmax ? &argmax : nullptr;
  check_interrupt();
  runner->prefill(padded);

  // Prefill rows: row (b, column) holds token i = column - padding; its target is token i + 1.
  std::vector<std::int32_t> targets(padded.tokens.size(), -1);
  for (int b = 0; b < block; ++b) {
    const auto& tokens = requests[indices[static_cast<std::size_t>(b)]].tokens;
    const int prefix = padded.lengths[static_cast<std::size_t>(b)];
    const int pad = padded.seq - prefix;
    for (int i = 0; i + 1 < lengths[static_cast<std::size_t>(b)] && i < prefix; ++i) {
      targets[static_cast<std::size_t>(b * padded.seq + pad + i)] =
          tokens[static_cast<std::size_t>(i + 1)];
    }
  }
  std::vector<float> lp = runner->target_logprobs(targets, want_argmax);
  report_tokens(scored_rows(targets));
  for (int b = 0; b < block; ++b) {
    const int prefix = padded.lengths[static_cast<std::size_t>(b)];
    const int pad = padded.seq - prefix;
    ScoreResult& result = results[indices[static_cast<std::size_t>(b)]];
    for (int i = 0; i + 1 < lengths[static_cast<std::size_t>(b)] && i < prefix; ++i) {
      const auto row = static_cast<std::size_t>(b * padded.seq + pad + i);
      result.token_logprobs[static_cast<std::size_t>(i + 1)] = lp[row];
      if (!result.argmax_ids.empty())
        result.argmax_ids[static_cast<std::size_t>(i + 1)] = argmax[row];
    }
  }
  // Each text is reported as soon as its last token is scored, so an interrupted block keeps
  // the texts that finished before it stopped.
  auto report_finished = [&](int last_step) {
    if (!on_done) return;
    for (std::size_t b = 0; b < indices.size(); ++b) {
      const int steps = std::max(0, lengths[b] - padded.lengths[b] - 1);
      if (steps == last_step) on_done(indices[b], results[indices[b]]);
    }
  };
  report_finished(0);  // scored by the prefill alone

  std::vector<std::int32_t> inputs(indices.size());
  std::vector<std::uint8_t> advancing(indices.size());
  std::vector<std::int32_t> step_targets(indices.size());
  for (int step = 0; step < decode_steps; ++step) {
    for (std::size_t b = 0; b < indices.size(); ++b) {
      const auto& tokens = requests[indices[b]].tokens;
      const int at = padded.lengths[b] + step;  // index of the token fed this step
      const bool real = at + 1 < lengths[b];
      inputs[b] = real ? tokens[static_cast<std::size_t>(at)] : config_.pad_token_id;
      advancing[b] = real ? 1 : 0;
      step_targets[b] = real ? tokens[static_cast<std::size_t>(at + 1)] : -1;
    }
    check_interrupt();
    runner->decode(inputs, advancing);
    lp = runner->target_logprobs(step_targets, want_argmax);
    report_tokens(scored_rows(step_targets));
    for (std::size_t b = 0; b < indices.size(); ++b) {
      if (step_targets[b] >= 0) {
        ScoreResult& result = results[indices[b]];
        const auto at = static_cast<std::size_t>(padded.lengths[b] + step + 1);
        result.token_logprobs[at] = lp[b];
        if (!result.argmax_ids.empty()) result.argmax_ids[at] = argmax[b];
      }
    }
    report_finished(step + 1);
  }
}

}  // namespace offgen
