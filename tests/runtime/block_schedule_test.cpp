// The block schedule and the KV placement: a block split into GPU batches, each GPU batch's KV
// split by sequences between the gpu tier and pinned memory, attended on the gpu (staged) or on
// the CPU, under every policy and with streamed weights. Whatever the plan, the outputs are
// those of the all-resident run of the same block (the same kernels see the same numbers), the
// tiers stay within their budgets, and the bytes that cross are the ones the plan says.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "engine/core/error.h"
#include "engine/core/units.h"
#include "engine/runtime/block_runner.h"
#include "engine/runtime/engine.h"
#include "scheduler/kv_cache_layout.h"
#include "scheduler/kv_footprint.h"
#include "scheduler/runner_layout.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

struct RandomPlan {
  Placement placement{4, {}, {}};  // GPU batches of 4
  PolicyKind policy = PolicyKind::full;
  // An OPT checkpoint, or a LLaMA one: grouped-query attention (2 KV heads of 4), rotary keys
  // cached after rotation, an untied head.
  std::string model = "tiny-preln";

  std::string describe() const {
    return fmt::format("{}, {}, policy {}", model, placement.describe(), policy_name(policy));
  }
};

constexpr const char* kModels[] = {"tiny-preln", "tiny-llama-gqa"};

EngineOptions tiny(const RandomPlan& plan) {
  EngineOptions options;
  options.model = (test::data_dir() / "golden" / plan.model).string();
  options.device = DeviceChoice::cpu;
  options.placement = plan.placement;
  options.policy.kind = plan.policy;
  options.kv_budget = plan.policy == PolicyKind::full ? KvBudget{} : KvBudget::tokens(6);
  options.policy.sinks = 2;
  options.policy.observation_window = 2;  // snapkv: below the budget
  options.policy.page_size = 2;           // quest: 3 pages of 2 a step, of texts of tens of tokens
  options.policy.dense_layers = 0;        // the tiny models have 2 layers: select in both
  return options;
}

// The same block, all resident, in one GPU batch: the reference outputs.
EngineOptions resident_block(const RandomPlan& plan) {
  RandomPlan resident;
  resident.placement.gpu_batch = plan.placement.block_size();
  resident.policy = plan.policy;
  resident.model = plan.model;
  return tiny(resident);
}

std::vector<GenerationRequest> prompts() {
  std::vector<GenerationRequest> requests;
  int n = 0;
  for (const ScoreRequest& text : test::golden_score_requests()) {
    GenerationRequest r;
    r.prompt.assign(text.tokens.begin(), text.tokens.begin() + 3 + (n++ % 3));
    r.max_tokens = 9;
    r.sampling.temperature = 0.0f;
    requests.push_back(r);
  }
  return requests;
}

void expect_same_outputs(Engine& got_engine, Engine& want_engine, const std::string& what) {
  SCOPED_TRACE(what);
  const auto want = want_engine.score(test::golden_score_requests(), 3);
  const auto got = got_engine.score(test::golden_score_requests(), 3);
  ASSERT_EQ(want.size(), got.size());
  for (std::size_t r = 0; r < want.size(); ++r) {
    ASSERT_TRUE(got[r].error.empty()) << got[r].error;
    ASSERT_EQ(got[r].token_logprobs.size(), want[r].token_logprobs.size());
    for (std::size_t i = 1; i < want[r].token_logprobs.size(); ++i) {
      EXPECT_EQ(got[r].token_logprobs[i], want[r].token_logprobs[i]) << "text " << r << " " << i;
    }
  }
  const auto generated = got_engine.generate(prompts());
  const auto expected = want_engine.generate(prompts());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    ASSERT_TRUE(generated[i].error.empty()) << generated[i].error;
    EXPECT_EQ(generated[i].tokens, expected[i].tokens) << "request " << i;
  }
}

TEST(BlockSchedule, SplitsABlockIntoGpuBatchesAndEachBatchsKvBySequences) {
  const std::vector<GpuBatch> split = split_block(10, {3, 0.5, false});
  ASSERT_EQ(split.size(), 3u);
  EXPECT_EQ(split[0].first, 0);
  EXPECT_EQ(split[0].size, 4);
  EXPECT_EQ(split[0].resident, 2);
  EXPECT_EQ(split[2].first, 8);
  EXPECT_EQ(split[2].size, 2);
  EXPECT_EQ(split[2].offloaded(), 1);
  EXPECT_EQ(split_block(2, {5, 1.0, false}).size(), 2u);  // never an empty GPU batch
  EXPECT_THROW(split_block(4, {1, 1.5, false}), Error);
  EXPECT_THROW(split_block(4, {0, 1.0, false}), Error);
}

TEST(BlockSchedule, RandomPlansGiveExactlyTheResidentRunsOutputs) {
  std::mt19937 rng(20261121);
  const PolicyKind policies[] = {PolicyKind::full, PolicyKind::local, PolicyKind::h2o,
                                 PolicyKind::streaming, PolicyKind::quest};
  const double kv_shares[] = {0.0, 0.34, 0.5, 1.0};
  const double weight_shares[] = {1.0, 0.5, 0.0};
  for (int trial = 0; trial < 25; ++trial) {
    RandomPlan plan;
    plan.model = kModels[trial % 3 == 2 ? 1 : 0];
    plan.placement.gpu_batch = 1 + static_cast<int>(rng() % 3);
    plan.placement.block.num_gpu_batches = 1 + static_cast<int>(rng() % 3);
    plan.placement.block.kv_gpu_fraction = kv_shares[rng() % 4];
    plan.placement.block.cpu_attention = rng() % 2 == 1;
    const double weights_gpu = weight_shares[rng() % 3];
    plan.placement.weights = {weights_gpu, 1.0 - weights_gpu};
    plan.placement.block.activations_on_host = rng() % 2 == 1;
    plan.policy = policies[trial % 5];
    Engine offloaded(tiny(plan));
    Engine resident(resident_block(plan));
    expect_same_outputs(offloaded, resident, plan.describe());
  }
}

TEST(BlockSchedule, EveryPolicyWithAllKvOnTheHostAttendedOnEitherSide) {
  for (const char* model : kModels) {
    for (PolicyKind policy :
         {PolicyKind::full, PolicyKind::local, PolicyKind::h2o, PolicyKind::streaming,
          PolicyKind::tova, PolicyKind::snapkv, PolicyKind::quest}) {
      for (bool cpu_attention : {false, true}) {
        RandomPlan plan;
        plan.model = model;
        plan.placement.gpu_batch = 2;
        plan.placement.block.num_gpu_batches = 2;
        plan.placement.block.kv_gpu_fraction = 0.0;
        plan.placement.block.cpu_attention = cpu_attention;
        plan.policy = policy;
        Engine offloaded(tiny(plan));
        Engine resident(resident_block(plan));
        expect_same_outputs(offloaded, resident, plan.describe());
      }
    }
  }
}

// Bytes a runner puts on the gpu tier and in pinned memory, from the device's accounting.
struct Taken {
  std::uint64_t gpu = 0;
  std::uint64_t pinned = 0;
};

TEST(BlockSchedule, MemoryEqualsWhatThePlanArithmeticSays) {
  for (const char* model : kModels) {
    for (bool cpu_attention : {false, true}) {
      for (PolicyKind policy : {PolicyKind::full, PolicyKind::h2o}) {
        RandomPlan plan;
        plan.model = model;
        plan.placement.gpu_batch = 3;
        plan.placement.block.num_gpu_batches = 2;
        plan.placement.block.kv_gpu_fraction =
            0.34;  // one of each GPU batch's three sequences stays on the gpu tier
        plan.placement.block.cpu_attention = cpu_attention;
        plan.policy = policy;
        Engine engine(tiny(plan));
        const int batch = 6, prompt = 12, new_tokens = 5;
        const std::uint64_t gpu_before = engine.device().usage(Tier::gpu).used;
        const std::uint64_t pinned_before = engine.device().usage(Tier::pinned).used;
        auto runner = engine.make_runner(batch, prompt, new_tokens);
        const Taken taken{engine.device().usage(Tier::gpu).used - gpu_before,
                          engine.device().usage(Tier::pinned).used - pinned_before};

        const KvFootprint kv = engine.kv_footprint(prompt, new_tokens);
        const int capacity = engine.kv_capacity(prompt, new_tokens);
        const bool keeps_scores = policy == PolicyKind::h2o;
        const MemoryLayout off =
            offloaded_kv_layout(engine.config(), {2, 2}, capacity, keeps_scores, cpu_attention);
        SCOPED_TRACE(plan.describe());
        EXPECT_EQ(runner->kv_host_bytes(), 4 * kv.cache_bytes);
        EXPECT_EQ(runner->kv_bytes(), 6 * kv.cache_bytes);
        RunnerShape shape;
        shape.block = batch;
        shape.max_prompt = prompt;
        shape.kv_capacity = capacity;
        shape.keeps_attention_scores = keeps_scores;
        shape.placement = engine.placement().block;
        const MemoryLayout layout = runner_layout(engine.config(), shape);
        // The KV of the 2 resident sequences and everyone's policy state, the offloaded KV's
        // staging, and the runner's own buffers.
        EXPECT_EQ(layout.bytes(Tier::gpu),
                  runner_own_layout(engine.config(), shape).bytes(Tier::gpu) +
                      block_kv_cache_own_layout(
                          engine.config(), {split_block(batch, shape.placement), capacity, prompt,
                                            keeps_scores, cpu_attention})
                          .bytes(Tier::gpu) +
                      6 * kv.policy_state_bytes + off.bytes(Tier::gpu));
        // The device accounts the bytes asked for (not its 256-byte rounding): exactly equal.
        EXPECT_EQ(taken.gpu, layout.bytes(Tier::gpu));
        EXPECT_EQ(taken.pinned, layout.bytes(Tier::pinned));
        EXPECT_GE(taken.pinned, off.bytes(Tier::pinned));
      }
    }
  }
}

TEST(BlockSchedule, ActivationsOnTheHostTakeTwoGpuBatchesOfTheGpuTierAndMoveEveryLayer) {
  const int batch = 8, prompt = 10, new_tokens = 3;
  std::uint64_t gpu_taken[2] = {0, 0};
  for (const bool on_host : {false, true}) {
    RandomPlan plan;
    plan.placement.gpu_batch = 2;
    plan.placement.block.num_gpu_batches = 4;
    plan.placement.block.activations_on_host = on_host;
    Engine engine(tiny(plan));
    const std::uint64_t gpu_before = engine.device().usage(Tier::gpu).used;
    const std::uint64_t pinned_before = engine.device().usage(Tier::pinned).used;
    auto runner = engine.make_runner(batch, prompt, new_tokens);
    gpu_taken[on_host] = engine.device().usage(Tier::gpu).used - gpu_before;
    const std::uint64_t pinned_taken = engine.device().usage(Tier::pinned).used - pinned_before;
    const MemoryLayout act =
        host_activations_layout(runner->gpu_batches(), prompt, engine.config().hidden_size);
    if (on_host) {
      EXPECT_GE(pinned_taken, act.bytes(Tier::pinned));
    }

    std::vector<std::vector<std::int32_t>> tokens;
    for (int b = 0; b < batch; ++b) {
      tokens.push_back({2});
      for (int i = 0; i < 1 + b % prompt; ++i) tokens.back().push_back(40 + (b * 7 + i) % 50);
    }
    const PaddedBatch padded = left_pad(tokens, engine.config().pad_token_id);
    runner->prefill(padded);
    runner->greedy_tokens();
    // Every layer stores the block's rows; every layer but the first loads them.
    const std::uint64_t pass = std::uint64_t{2} * engine.config().hidden_size * batch * padded.seq;
    const int layers = engine.config().num_layers;
    EXPECT_EQ(runner->activation_bytes_moved(), on_host ? (2 * layers - 1) * pass : 0u);
  }
  const std::uint64_t h = 64;  // tiny-preln's hidden size
  const std::uint64_t rows = batch * prompt, lane_rows = 2 * prompt;
  EXPECT_EQ(gpu_taken[false] - gpu_taken[true], 2 * h * rows - 2 * (2 * h * lane_rows));
}

TEST(BlockSchedule, OffloadedKvMovesTheCacheOnlyWithGpuAttention) {
  std::uint64_t loaded[2] = {0, 0};
  for (bool cpu_attention : {false, true}) {
    RandomPlan plan;
    plan.placement.gpu_batch = 2;
    plan.placement.block.kv_gpu_fraction = 0.0;
    plan.placement.block.cpu_attention = cpu_attention;
    Engine engine(tiny(plan));
    auto runner = engine.make_runner(2, 8, 4);
    std::vector<std::vector<std::int32_t>> tokens = {{2, 40, 41, 42, 43, 44, 45, 46},
                                                     {2, 50, 51, 52, 53}};
    runner->prefill(left_pad(tokens, engine.config().pad_token_id));
    runner->greedy_tokens();
    const std::uint64_t after_prefill = runner->kv_traffic().loaded_bytes;
    EXPECT_EQ(after_prefill, 0u);  // a prefill only stores
    EXPECT_EQ(runner->kv_traffic().stored_bytes, runner->kv_host_bytes());
    const std::vector<std::uint8_t> advancing = {1, 1};
    for (int step = 0; step < 4; ++step) {
      const auto picks = runner->greedy_tokens();
      runner->decode(std::vector<std::int32_t>(picks.begin(), picks.end()), advancing);
    }
    loaded[cpu_attention ? 1 : 0] = runner->kv_traffic().loaded_bytes;
  }
  // Gpu attention copies the whole host cache in per step; cpu attention only the outputs.
  EXPECT_GT(loaded[0], 0u);
  EXPECT_GT(loaded[1], 0u);
  EXPECT_LT(loaded[1] * 4, loaded[0]);
}

TEST(BlockSchedule, QuestOverHostCachesMovesOnlyTheChosenPages) {
  // quest, pages of 2, 6 tokens a step: 3 pages. All KV on the host, attended on the gpu tier.
  const auto loaded = [](PolicyKind policy) {
    RandomPlan plan;
    plan.placement.gpu_batch = 2;
    plan.placement.block.kv_gpu_fraction = 0.0;
    plan.policy = policy;
    Engine engine(tiny(plan));
    auto runner = engine.make_runner(2, 8, 4);
    std::vector<std::vector<std::int32_t>> tokens = {{2, 40, 41, 42, 43, 44, 45, 46},
                                                     {2, 50, 51, 52, 53}};
    runner->prefill(left_pad(tokens, engine.config().pad_token_id));
    const std::vector<std::uint8_t> advancing = {1, 1};
    for (int step = 0; step < 4; ++step) {
      const auto picks = runner->greedy_tokens();
      runner->decode(std::vector<std::int32_t>(picks.begin(), picks.end()), advancing);
    }
    return runner->kv_traffic().loaded_bytes;
  };
  // Sequence 0 attends 9..12 slots (5, 5, 6, 6 pages): the sink, the best page and the newest's
  // 1, 2, 1, 2 slots, of which all but the new token come in: 4 + 5 + 4 + 5 rows. Sequence 1
  // attends 6 slots (3 pages: all), then 7, 8, 9 (4, 4, 5 pages): 5 + 4 + 5 + 4 rows.
  const ModelConfig config = Engine(tiny(RandomPlan{})).config();
  const std::uint64_t row =
      std::uint64_t{2} * config.num_layers * config.kv_heads() * config.head_dim() * sizeof(Half);
  const std::uint64_t quest = loaded(PolicyKind::quest);
  EXPECT_EQ(quest, row * (18 + 18));
  // Full's gpu attention copies each whole cache in, every slot of its capacity (13 for a
  // runner of 8 + 4), of 2 sequences, 4 steps.
  EXPECT_EQ(loaded(PolicyKind::full), row * 13 * 2 * 4);
}

TEST(BlockSchedule, QuestSpeculationMovesOtherBytesButAttendsTheExactChoice) {
  std::uint64_t extra = 0;  // bytes the guesses moved past the exact choice's, over all runs
  for (const char* model : kModels) {
    for (const double kv_share : {0.0, 0.5}) {
      for (const int gpu_batches : {1, 2}) {
        RandomPlan plan;
        plan.model = model;
        plan.placement.gpu_batch = 3;
        plan.placement.block.num_gpu_batches = gpu_batches;
        plan.placement.block.kv_gpu_fraction = kv_share;
        plan.policy = PolicyKind::quest;
        plan.placement.block.speculative_pages = true;
        Engine speculative(tiny(plan));
        Engine resident(resident_block(plan));
        expect_same_outputs(speculative, resident, plan.describe() + ", speculative pages");
        // The same steps without the guesses: never fewer bytes with them (a guess brings in
        // what it guessed; the gather after the choice only what it missed).
        const auto loaded = [&](bool guess) {
          RandomPlan run = plan;
          run.placement.block.speculative_pages = guess;
          Engine engine(tiny(run));
          auto runner = engine.make_runner(6, 9, 6);
          std::vector<std::vector<std::int32_t>> tokens;
          for (int b = 0; b < 6; ++b) {
            tokens.push_back({2});
            for (int i = 0; i < 3 + b; ++i) tokens.back().push_back(40 + (b * 11 + i * 7) % 60);
          }
          runner->prefill(left_pad(tokens, engine.config().pad_token_id));
          const std::vector<std::uint8_t> advancing(6, 1);
          std::vector<std::vector<std::int32_t>> picks;
          for (int step = 0; step < 6; ++step) {
            const auto next = runner->greedy_tokens();
            picks.emplace_back(next.begin(), next.end());
            runner->decode(picks.back(), advancing);
          }
          return std::pair{runner->kv_traffic().loaded_bytes, picks};
        };
        const auto [with_guess, guessed_picks] = loaded(true);
        const auto [exact, exact_picks] = loaded(false);
        EXPECT_EQ(guessed_picks, exact_picks) << plan.describe();
        EXPECT_GE(with_guess, exact) << plan.describe();
        extra += with_guess - exact;
      }
    }
  }
  // Guesses from a random model's next layer miss now and then.
  EXPECT_GT(extra, 0u);
}

// A compact staging (quest over host caches attended on the gpu tier): chosen pages laid out in
// the order of the choice, dense layers and prefills through it a chunk of whole caches at a time
// (GPU batches of 4 hold one whole cache per chunk here), fp16 and int4 rows: the resident run's
// outputs exactly.
TEST(BlockSchedule, QuestOverACompactStagingGivesTheResidentRunsOutputs) {
  for (const char* model : kModels) {
    for (const int dense : {0, 1}) {
      for (const Storage storage : {Storage::fp16, Storage::int4}) {
        for (const double kv_share : {0.0, 0.5}) {
          RandomPlan plan;
          plan.model = model;
          plan.placement.gpu_batch = 4;
          plan.placement.block.kv_gpu_fraction = kv_share;
          plan.policy = PolicyKind::quest;
          EngineOptions options = tiny(plan);
          options.policy.dense_layers = dense;
          options.compression.kv = storage;
          EngineOptions reference = resident_block(plan);
          reference.policy.dense_layers = dense;
          reference.compression.kv = storage;
          Engine compact(options);
          Engine resident(reference);
          expect_same_outputs(
              compact, resident,
              plan.describe() +
                  fmt::format(", {} dense, {}", dense, storage == Storage::int4 ? "int4" : "fp16"));
        }
      }
    }
  }
}

TEST(BlockSchedule, QuestStagesOnlyTheAttendedPagesSoABatchFitsWhereFullsStagingDoesNot) {
  // Dummy opt-125m, 16 sequences of a 1000-token KV, every cache in pinned memory and attended on
  // the gpu tier: full stages two copies of the 16 whole caches (98 MiB); quest at a tenth, pages
  // of 16, only the 7 pages a step attends, beside its page summaries.
  const int batch = 16, prompt = 8, new_tokens = 992;
  const auto options_for = [](PolicyKind policy, std::uint64_t gpu) {
    EngineOptions options;
    options.model = "dummy:opt-125m";
    options.device = DeviceChoice::cpu;
    if (gpu > 0) options.budgets.gpu = gpu;
    options.budgets.pinned = parse_bytes("2GiB");
    options.placement.gpu_batch = batch;
    options.placement.block.kv_gpu_fraction = 0.0;
    options.policy.kind = policy;
    options.kv_budget = policy == PolicyKind::quest ? KvBudget::fraction(0.1) : KvBudget{};
    return options;
  };
  std::uint64_t used[2] = {0, 0};
  for (const PolicyKind policy : {PolicyKind::full, PolicyKind::quest}) {
    Engine engine(options_for(policy, 0));
    const std::uint64_t before = engine.device().usage(Tier::gpu).used;
    auto runner = engine.make_runner(batch, prompt, new_tokens);
    const std::uint64_t taken = engine.device().usage(Tier::gpu).used - before;
    used[policy == PolicyKind::quest] = engine.device().usage(Tier::gpu).used;
    // The plan arithmetic says the same (the planner sizes blocks by it).
    RunnerShape shape;
    shape.block = batch;
    shape.max_prompt = prompt;
    shape.kv_capacity = engine.kv_capacity(prompt, new_tokens);
    shape.placement = engine.placement().block;
    shape.page_size = engine.kv_page_size();
    shape.kv_staged_capacity = compact_staged_capacity(
        shape.kv_capacity, shape.page_size, engine.kv_pages_per_step(prompt, new_tokens),
        /*cpu_attention=*/false, /*speculates=*/false);
    EXPECT_EQ(shape.kv_staged_capacity, policy == PolicyKind::quest ? 7 * 16 : 0);
    EXPECT_EQ(taken, runner_layout(engine.config(), shape).bytes(Tier::gpu)) << policy_name(policy);
  }
  ASSERT_GT(used[0], used[1] + parse_bytes("40MiB"));
  const std::uint64_t budget = (used[0] + used[1]) / 2;
  Engine full(options_for(PolicyKind::full, budget));
  EXPECT_THROW(full.make_runner(batch, prompt, new_tokens), OutOfMemoryError);
  Engine quest(options_for(PolicyKind::quest, budget));
  quest.device().reset_peaks();
  auto runner = quest.make_runner(batch, prompt, new_tokens);
  std::vector<std::vector<std::int32_t>> tokens;
  for (int b = 0; b < batch; ++b) tokens.push_back({2, 100 + b, 200, 300 + 7 * b});
  runner->prefill(left_pad(tokens, quest.config().pad_token_id));
  const std::vector<std::uint8_t> advancing(batch, 1);
  for (int step = 0; step < 3; ++step) {
    const auto picks = runner->greedy_tokens();
    runner->decode(std::vector<std::int32_t>(picks.begin(), picks.end()), advancing);
  }
  runner->greedy_tokens();
  EXPECT_LE(quest.device().usage(Tier::gpu).peak, budget);
}

TEST(BlockSchedule, KvOnTheHostLetsABatchRunUnderAGpuBudgetItsKvExceeds) {
  // Dummy opt-125m with a 1000-token KV: 36 MiB of KV per sequence. 8 sequences do not fit
  // 500 MiB with the weights; with their KV in pinned memory they do.
  EngineOptions options;
  options.model = "dummy:opt-125m";
  options.device = DeviceChoice::cpu;
  options.budgets.gpu = parse_bytes("500MiB");
  options.budgets.pinned = parse_bytes("1GiB");
  options.placement.gpu_batch = 4;
  options.placement.block.num_gpu_batches = 2;
  Engine resident(options);
  EXPECT_THROW(resident.make_runner(8, 8, 992), OutOfMemoryError);

  options.placement.block.kv_gpu_fraction = 0.0;
  Engine offloaded(options);
  offloaded.device().reset_peaks();
  auto runner = offloaded.make_runner(8, 8, 992);
  std::vector<std::vector<std::int32_t>> tokens(8, std::vector<std::int32_t>{2, 100, 200, 300});
  runner->prefill(left_pad(tokens, offloaded.config().pad_token_id));
  const std::vector<std::uint8_t> advancing(8, 1);
  for (int step = 0; step < 4; ++step) {
    const auto picks = runner->greedy_tokens();
    runner->decode(std::vector<std::int32_t>(picks.begin(), picks.end()), advancing);
  }
  runner->greedy_tokens();
  EXPECT_LE(offloaded.device().usage(Tier::gpu).peak, parse_bytes("500MiB"));
  EXPECT_LE(offloaded.device().usage(Tier::pinned).peak, parse_bytes("1GiB"));
  EXPECT_GE(runner->kv_host_bytes(), 8 * parse_bytes("35MiB"));
}

}  // namespace
}  // namespace offgen
