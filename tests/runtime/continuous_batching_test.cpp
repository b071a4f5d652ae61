// Continuous batching (engine/runtime/continuous_generation.cpp): when a sequence finishes, the
// job's next request is prefilled beside the running block and takes its row. A request's tokens,
// finish reason and log-probs must be exactly those it gets in a block of its own — every policy,
// int4 KV, both kernel sets, GPU batches, seeded sampling, stops, penalties — while the rows that
// finished early stop costing decode steps, and an interrupt keeps every answered request.
#include <gtest/gtest.h>

#include <cstring>
#include <span>
#include <vector>

#include "engine/runtime/engine.h"
#include "tests/runtime/real_vocab_model.h"

namespace offgen {
namespace {

// Mixed prompts (1 to 30 tokens) and max_tokens (1 to 12), a third stopping early at a token
// the stop hook looks for, greedy and seeded sampling, log-probs and penalties on some.
std::vector<GenerationRequest> mixed_job(int n) {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < n; ++i) {
    GenerationRequest r;
    r.prompt = {2};
    for (int t = 0; t < (i * 13) % 30; ++t) r.prompt.push_back(4 + (i * 37 + t * 11) % 980);
    r.max_tokens = 1 + (i * 7) % 12;
    r.seed = 500 + static_cast<std::uint64_t>(i);
    r.ignore_eos = i % 5 != 0;
    if (i % 2 == 1) r.sampling = {0.8f, i % 4 == 1 ? 0 : 30, 0.9f};
    if (i % 3 == 0) {
      r.stop = [](std::span<const std::int32_t> tokens) {
        return tokens.size() >= 2 && tokens.back() % 3 == 0;
      };
    }
    if (i % 4 == 2) {
      r.logprobs = true;
      r.top_logprobs = 2;
    }
    if (i % 6 == 4) {
      r.shaping.repetition_penalty = 1.3f;
      r.shaping.min_tokens = 2;
    }
    requests.push_back(std::move(r));
  }
  return requests;
}

// Where the KV and hidden states live: the gpu tier (rows compacted, only running rows computed),
// or a share of each GPU batch's KV in host caches (cpu attention or not), or hidden states in
// pinned memory (every row computed; a refill copies into host caches).
struct Placement {
  double kv_gpu = 1.0;
  bool cpu_attention = false;
  bool activations_on_host = false;
};

struct Case {
  PolicyKind policy;
  KvBudget kv_budget;
  Storage kv = Storage::fp16;
  CpuKernelSet kernels = CpuKernelSet::optimized;
  Placement placement = {};
};

class ContinuousBatching : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { test::write_real_vocab_model(dir_.path()); }
  Engine engine(bool continuous, int gpu_batch, int gpu_batches = 1) {
    const Case& c = GetParam();
    EngineOptions options;
    options.model = dir_.path().string();
    options.device = DeviceChoice::cpu;
    options.cpu_kernels = c.kernels;
    options.placement.gpu_batch = gpu_batch;
    options.placement.block.num_gpu_batches = gpu_batches;
    options.placement.block.kv_gpu_fraction = c.placement.kv_gpu;
    options.placement.block.cpu_attention = c.placement.cpu_attention;
    options.placement.block.activations_on_host = c.placement.activations_on_host;
    options.policy.kind = c.policy;
    options.policy.sinks = 2;
    options.policy.observation_window = 2;
    options.policy.pool_kernel = 3;
    options.policy.page_size = 2;     // quest: pages small enough to choose among
    options.policy.dense_layers = 0;  // in both of the model's layers
    options.kv_budget = c.kv_budget;
    options.compression.kv = c.kv;
    options.continuous_batching = continuous;
    return Engine(options);
  }
  test::TempDir dir_;
};

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

TEST_P(ContinuousBatching, ARefilledRowGivesTheTokensOfABlockOfItsOwn) {
  const auto requests = mixed_job(30);
  Engine refilled = engine(true, 3, 2);  // a block of 6 rows in two GPU batches
  Engine blocks = engine(false, 3, 2);
  Engine single = engine(false, 1);
  const auto together = refilled.generate(requests);
  const auto in_blocks = blocks.generate(requests);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(together[i].error.empty()) << together[i].error;
    const GenerationResult alone = single.generate(std::span(&requests[i], 1)).front();
    EXPECT_EQ(together[i].tokens, alone.tokens) << "request " << i;
    EXPECT_EQ(together[i].tokens, in_blocks[i].tokens) << "request " << i;
    EXPECT_EQ(together[i].finish, alone.finish) << "request " << i;
    ASSERT_EQ(together[i].token_logprobs.size(), alone.token_logprobs.size());
    for (std::size_t t = 0; t < alone.token_logprobs.size(); ++t) {
      EXPECT_TRUE(same_bits(together[i].token_logprobs[t], alone.token_logprobs[t]))
          << "request " << i << " token " << t;
    }
    EXPECT_EQ(together[i].top_logprobs, alone.top_logprobs) << "request " << i;
  }
  // Rows were refilled: fewer decode rows of finished sequences than blocks compute.
  EXPECT_LT(refilled.slot_use().idle, blocks.slot_use().idle / 2);
  EXPECT_EQ(refilled.slot_use().useful, blocks.slot_use().useful);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, ContinuousBatching,
    ::testing::Values(Case{PolicyKind::full, {}}, Case{PolicyKind::local, KvBudget::fraction(0.5)},
                      Case{PolicyKind::streaming, KvBudget::fraction(0.5)},
                      Case{PolicyKind::h2o, KvBudget::fraction(0.3)},
                      Case{PolicyKind::tova, KvBudget::fraction(0.4)},
                      Case{PolicyKind::snapkv, KvBudget::fraction(0.5)},
                      Case{PolicyKind::pyramidkv, KvBudget::fraction(0.5)},
                      Case{PolicyKind::quest, KvBudget::fraction(0.3)},
                      Case{PolicyKind::quest, KvBudget::fraction(0.3), Storage::int4},
                      Case{PolicyKind::h2o, KvBudget::fraction(0.3), Storage::int4},
                      Case{PolicyKind::full, {}, Storage::int4},
                      Case{PolicyKind::h2o, KvBudget::fraction(0.3), Storage::fp16,
                           CpuKernelSet::reference},
                      // Offloaded placements: a third of each GPU batch's KV on the gpu tier,
                      // the rest in host caches, attended on the gpu or the CPU; hidden states in
                      // pinned memory.
                      Case{PolicyKind::full, {}, Storage::fp16, CpuKernelSet::optimized, {0.34}},
                      Case{PolicyKind::h2o,
                           KvBudget::fraction(0.3),
                           Storage::fp16,
                           CpuKernelSet::optimized,
                           {0.34, true}},
                      Case{PolicyKind::streaming,
                           KvBudget::fraction(0.5),
                           Storage::int4,
                           CpuKernelSet::optimized,
                           {0.0, true}},
                      Case{PolicyKind::h2o,
                           KvBudget::fraction(0.3),
                           Storage::int4,
                           CpuKernelSet::optimized,
                           {0.34}},
                      Case{PolicyKind::snapkv,
                           KvBudget::fraction(0.5),
                           Storage::fp16,
                           CpuKernelSet::optimized,
                           {1.0, false, true}},
                      Case{PolicyKind::tova,
                           KvBudget::fraction(0.4),
                           Storage::fp16,
                           CpuKernelSet::optimized,
                           {0.34, true, true}},
                      // quest's summaries move with the caches, on both sides.
                      Case{PolicyKind::quest,
                           KvBudget::fraction(0.3),
                           Storage::fp16,
                           CpuKernelSet::optimized,
                           {0.34, true}},
                      Case{PolicyKind::quest,
                           KvBudget::fraction(0.3),
                           Storage::int4,
                           CpuKernelSet::optimized,
                           {0.0}}),
    [](const ::testing::TestParamInfo<Case>& param) {
      const Case& c = param.param;
      const Placement& p = c.placement;
      std::string name = std::string(policy_name(c.policy)) +
                         (c.kv == Storage::int4 ? "_int4" : "") +
                         (c.kernels == CpuKernelSet::reference ? "_reference" : "");
      if (p.kv_gpu < 1.0) name += "_kv" + std::to_string(static_cast<int>(p.kv_gpu * 100));
      if (p.cpu_attention) name += "_cpu_attention";
      if (p.activations_on_host) name += "_host_activations";
      return name;
    });

class ContinuousJob : public ::testing::Test {
 protected:
  void SetUp() override { test::write_real_vocab_model(dir_.path()); }
  Engine engine() {
    EngineOptions options;
    options.model = dir_.path().string();
    options.device = DeviceChoice::cpu;
    options.placement.gpu_batch = 8;
    return Engine(options);
  }
  test::TempDir dir_;
};

TEST_F(ContinuousJob, AnswersComeAsRequestsFinishAndEveryTokenIsReported) {
  Engine e = engine();
  std::uint64_t tokens = 0;
  e.set_job_progress({{}, [&](std::uint64_t t) { tokens += t; }});
  std::vector<std::uint64_t> tokens_when_answered;
  const auto requests = mixed_job(40);
  const auto results = e.generate(requests, [&](std::size_t, const GenerationResult&) {
    tokens_when_answered.push_back(tokens);
  });
  ASSERT_EQ(tokens_when_answered.size(), requests.size());
  std::uint64_t generated = 0;
  for (const auto& r : results) generated += r.tokens.size();
  EXPECT_EQ(tokens, generated);
  // The first answers come long before the job's last token.
  EXPECT_LT(tokens_when_answered[requests.size() / 4], generated / 2);
}

TEST_F(ContinuousJob, AnInterruptKeepsEveryAnsweredRequestWhole) {
  const auto requests = mixed_job(40);
  Engine whole = engine();
  const auto expected = whole.generate(requests);
  Engine e = engine();
  std::uint64_t tokens = 0;
  e.set_job_progress({{}, [&](std::uint64_t t) { tokens += t; }});
  e.set_interrupt_check([&] { return tokens >= 60; });
  std::vector<std::pair<std::size_t, GenerationResult>> answered;
  EXPECT_THROW(
      e.generate(requests,
                 [&](std::size_t i, const GenerationResult& r) { answered.emplace_back(i, r); }),
      Interrupted);
  EXPECT_GT(answered.size(), 0u);
  EXPECT_LT(answered.size(), requests.size());
  for (const auto& [i, r] : answered) {
    EXPECT_EQ(r.tokens, expected[i].tokens) << "request " << i;
    EXPECT_EQ(r.finish, expected[i].finish) << "request " << i;
  }
}

}  // namespace
}  // namespace offgen
