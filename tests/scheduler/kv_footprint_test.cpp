// KV memory and traffic as budgets change: the footprint bench uses and the runner's layout match
// what a runner allocates, the 512/512 h2o 0.2 claim holds, and the traffic counters add
// up.
#include <gtest/gtest.h>

#include "bench/table.h"
#include "bench/throughput.h"
#include "engine/runtime/block_runner.h"
#include "engine/runtime/engine.h"
#include "policies/kv_budget.h"
#include "scheduler/kv_cache_layout.h"
#include "scheduler/kv_footprint.h"
#include "scheduler/runner_layout.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

EngineOptions tiny_engine(PolicyKind kind, KvBudget budget) {
  EngineOptions options;
  options.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.device = DeviceChoice::cpu;
  options.policy.kind = kind;
  options.policy.sinks = 2;
  options.policy.observation_window = 2;  // snapkv, pyramidkv: below the budgets
  options.kv_budget = budget;
  return options;
}

// Grouped-query attention stores K and V per KV head: LLaMA-3-8B's 8 KV heads of 128 keep
// 2 x 32 layers x 8 x 128 fp16 = 128 KiB per token, a quarter of its 32 query heads' worth.
TEST(KvFootprint, GroupedQueryAttentionStoresPerKvHead) {
  const ModelConfig llama3 = *ModelConfig::from_name("llama-3-8b");
  const std::uint64_t per_token = 2 * std::uint64_t{32} * kv_cache_bytes(llama3, 1, 1);
  EXPECT_EQ(per_token, 128u * 1024u);
  ModelConfig multi_head = llama3;
  multi_head.num_kv_heads = 32;
  EXPECT_EQ(kv_cache_bytes(multi_head, 3, 100), 4 * kv_cache_bytes(llama3, 3, 100));
  EXPECT_EQ(kv_row_bytes(llama3, Storage::fp16), 128u * 2u);
}

class FootprintOfEveryPolicy : public ::testing::TestWithParam<PolicyKind> {};

TEST_P(FootprintOfEveryPolicy, EqualsWhatARunnerAllocatesPerSequence) {
  const KvBudget budget = GetParam() == PolicyKind::full ? KvBudget{} : KvBudget::fraction(0.25);
  Engine engine(tiny_engine(GetParam(), budget));
  const int batch = 3, prompt = 20, new_tokens = 12;
  const KvFootprint footprint = engine.kv_footprint(prompt, new_tokens);
  auto runner = engine.make_runner(batch, prompt, new_tokens);
  EXPECT_EQ(footprint.cache_bytes * batch, runner->kv_bytes());
  EXPECT_EQ(footprint.policy_state_bytes * batch, runner->policy_state_bytes());
  EXPECT_EQ(footprint.policy_state_bytes > 0, engine.keeps_attention_scores(prompt, new_tokens));
  EXPECT_EQ(runner->kv_capacity(), engine.kv_capacity(prompt, new_tokens));
}

// int4 KV: the packed cache, and the fp16 block a task expands it into, both per sequence.
TEST_P(FootprintOfEveryPolicy, EqualsWhatARunnerAllocatesPerSequenceWithInt4Kv) {
  const KvBudget budget = GetParam() == PolicyKind::full ? KvBudget{} : KvBudget::fraction(0.25);
  EngineOptions options = tiny_engine(GetParam(), budget);
  options.compression.kv = Storage::int4;
  Engine engine(options);
  const int batch = 3, prompt = 20, new_tokens = 12;
  const KvFootprint footprint = engine.kv_footprint(prompt, new_tokens);
  auto runner = engine.make_runner(batch, prompt, new_tokens);
  EXPECT_EQ(footprint.cache_bytes * batch, runner->kv_bytes());
  EXPECT_EQ(footprint.expanded_bytes * batch, runner->kv_expanded_bytes());
  EXPECT_EQ(footprint.policy_state_bytes * batch, runner->policy_state_bytes());
  // head_dim 16: each row's one group of 64 is 36 bytes against fp16's 32.
  EngineOptions fp16 = tiny_engine(GetParam(), budget);
  EXPECT_EQ(footprint.cache_bytes * 32,
            Engine(fp16).kv_footprint(prompt, new_tokens).cache_bytes * 36);
}

// pyramidkv's lower layers keep more than C: every cache has the largest layer budget + 1 slots,
// and the footprint (so the planner and bench) counts them.
TEST(KvFootprint, PyramidKvCountsItsLargestLayerBudget) {
  Engine snapkv(tiny_engine(PolicyKind::snapkv, KvBudget::tokens(8)));
  Engine pyramidkv(tiny_engine(PolicyKind::pyramidkv, KvBudget::tokens(8)));
  EXPECT_EQ(snapkv.kv_capacity(20, 12), 9);
  ASSERT_EQ(pyramidkv.config().num_layers, 2);
  // prefix 6: lo = 1, hi = 11 -> layer budgets 13 and 3.
  EXPECT_EQ(pyramidkv.kv_capacity(20, 12), 14);
  EXPECT_EQ(pyramidkv.kv_footprint(20, 12).cache_bytes * 9,
            snapkv.kv_footprint(20, 12).cache_bytes * 14);
}

TEST(RunnerLayout, EqualsWhatARunnerTakes) {
  for (const char* model : {"tiny-preln", "tiny-postln-proj"}) {
    EngineOptions options = tiny_engine(PolicyKind::h2o, KvBudget::fraction(0.25));
    options.model = (test::data_dir() / "golden" / model).string();
    Engine engine(options);
    for (const auto& [batch, prompt] : {std::pair{3, 20}, std::pair{70, 5}}) {
      const std::uint64_t before = engine.device().usage(Tier::gpu).used;
      auto runner = engine.make_runner(batch, prompt, 4);
      const std::uint64_t taken = engine.device().usage(Tier::gpu).used - before;
      RunnerShape shape;
      shape.block = batch;
      shape.max_prompt = prompt;
      shape.kv_capacity = runner->kv_capacity();
      shape.keeps_attention_scores = true;
      const MemoryLayout layout = runner_layout(engine.config(), shape);
      EXPECT_EQ(taken, layout.bytes(Tier::gpu))
          << model << " batch " << batch << " prompt " << prompt;
      // Besides its KV cache and policy state, the runner's own buffers and the step's slots.
      EXPECT_GT(taken - runner->kv_bytes() - runner->policy_state_bytes(),
                runner_own_layout(engine.config(), shape).bytes(Tier::gpu));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, FootprintOfEveryPolicy,
                         ::testing::Values(PolicyKind::full, PolicyKind::local, PolicyKind::h2o,
                                           PolicyKind::streaming, PolicyKind::tova,
                                           PolicyKind::snapkv, PolicyKind::pyramidkv),
                         [](const auto& param) { return std::string(policy_name(param.param)); });

TEST(KvFootprint, H2oAtOneFifthOfA512By512RunNeedsAFifthOfTheMemoryAndFitsMoreThan4_5xTheBatch) {
  for (const char* name : {"opt-125m", "opt-6.7b", "opt-30b"}) {
    const ModelConfig config = ModelConfig::from_name(name).value();
    const int prompt = 512, gen = 512;
    // As the engine sizes them: full caches every fed-back position, h2o 0.2 of the length.
    const KvFootprint full = kv_footprint(config, prompt + gen - 1 + 1, false, prompt);
    const int h2o_budget = KvBudget::fraction(0.2).tokens_for(prompt + gen);
    EXPECT_EQ(h2o_budget, 205);
    const KvFootprint h2o = kv_footprint(config, h2o_budget + 1, true, prompt);
    const double ratio =
        static_cast<double>(h2o.per_sequence()) / static_cast<double>(full.per_sequence());
    EXPECT_LE(ratio, 0.21) << name;
    const std::uint64_t memory = std::uint64_t{64} << 30;
    ASSERT_GT(full.largest_batch(memory), 0u) << name;
    EXPECT_GE(static_cast<double>(h2o.largest_batch(memory)) /
                  static_cast<double>(full.largest_batch(memory)),
              4.5)
        << name;
  }
}

TEST(KvFootprint, Opt30bFullCacheIsTheKnown1_38MBPerToken) {
  const ModelConfig config = ModelConfig::from_name("opt-30b").value();
  const KvFootprint one_token = kv_footprint(config, 1, false, 1);
  EXPECT_NEAR(static_cast<double>(one_token.cache_bytes), 1.38e6, 0.01e6);
}

TEST(KvTraffic, DecodeReadsEveryCachedRowAndWritesOne) {
  // local, budget 4: a 6-token prompt caches 4 tokens; each step attends the cache plus itself.
  Engine engine(tiny_engine(PolicyKind::local, KvBudget::tokens(4)));
  const ModelConfig& config = engine.config();
  auto runner = engine.make_runner(2, 6, 3);
  const std::vector<std::vector<std::int32_t>> texts = {{2, 10, 11, 12, 13, 14}, {2, 20, 21}};
  const PaddedBatch prompts = left_pad(texts, config.pad_token_id);
  runner->prefill(prompts);
  EXPECT_EQ(runner->kv_traffic().decode_steps, 0);
  const std::vector<std::int32_t> tokens = {30, 31};
  runner->decode(tokens, std::vector<std::uint8_t>{1, 1});
  runner->decode(tokens, std::vector<std::uint8_t>{1, 1});
  runner->decode(tokens, std::vector<std::uint8_t>{1, 1});
  const std::uint64_t row =
      std::uint64_t{2} * config.num_layers * config.num_heads * config.head_dim() * sizeof(Half);
  // Sequence 0 attends 5, 5, 5 rows; sequence 1 (3 prompt tokens) attends 4, 5, 5.
  const BlockRunner::KvTraffic& traffic = runner->kv_traffic();
  EXPECT_EQ(traffic.decode_steps, 3);
  EXPECT_EQ(traffic.read_bytes, row * (5 + 5 + 5 + 4 + 5 + 5));
  EXPECT_EQ(traffic.written_bytes, row * 2 * 3);
  EXPECT_DOUBLE_EQ(traffic.moved_per_step(), static_cast<double>(row * (29 + 6)) / 3);
}

TEST(KvTraffic, QuestReadsOnlyTheChosenPages) {
  // quest, pages of 2, budget 4: each step attends 2 pages, the sink and the newest one (a
  // partial newest page brings only its slots); the cache keeps every token.
  EngineOptions options = tiny_engine(PolicyKind::quest, KvBudget::tokens(4));
  options.policy.page_size = 2;
  options.policy.dense_layers = 0;
  Engine engine(options);
  const ModelConfig& config = engine.config();
  auto runner = engine.make_runner(2, 6, 3);
  const std::vector<std::vector<std::int32_t>> texts = {{2, 10, 11, 12, 13, 14}, {2, 20, 21}};
  runner->prefill(left_pad(texts, config.pad_token_id));
  const std::vector<std::int32_t> tokens = {30, 31};
  for (int step = 0; step < 3; ++step) runner->decode(tokens, std::vector<std::uint8_t>{1, 1});
  const std::uint64_t row =
      std::uint64_t{2} * config.num_layers * config.num_heads * config.head_dim() * sizeof(Half);
  // Sequence 0 holds 7, 8, 9 slots (4, 4, 5 pages): page 0 and the newest's 1, 2, 1 slots.
  // Sequence 1 holds 4 (2 pages: both), then 5 and 6 (3 pages): page 0 and 1, 2 slots.
  const BlockRunner::KvTraffic& traffic = runner->kv_traffic();
  EXPECT_EQ(traffic.read_bytes, row * (3 + 4 + 3 + 4 + 3 + 4));
  EXPECT_EQ(traffic.written_bytes, row * 2 * 3);
  // Nothing is evicted: the cache holds the whole sequence, as full's does.
  Engine full(tiny_engine(PolicyKind::full, KvBudget{}));
  EXPECT_EQ(runner->kv_bytes(), full.make_runner(2, 6, 3)->kv_bytes());
}

TEST(BenchTable, ReportsTheKvComparisonWithFullAndTheLargestBatchInAKvMemory) {
  Engine engine(tiny_engine(PolicyKind::h2o, KvBudget::fraction(0.2)));
  const bench::BenchRow row = bench::run_case(engine, {2, 24, 8}, 0);
  ASSERT_TRUE(row.error.empty()) << row.error;
  EXPECT_GT(row.kv_moved_per_step, 0.0);
  EXPECT_LT(row.kv_per_sequence.per_sequence(), row.full_kv_per_sequence.per_sequence());
  const std::uint64_t memory = std::uint64_t{1} << 30;
  const std::string table = bench::format_table({row}, memory);
  EXPECT_NE(table.find("max batch"), std::string::npos) << table;
  EXPECT_NE(table.find(std::to_string(row.kv_per_sequence.largest_batch(memory))),
            std::string::npos)
      << table;
  EXPECT_EQ(bench::format_table({row}).find("max batch"), std::string::npos);
}

TEST(BenchRow, CopyOverlapIsTheShareOfCopyTimeHiddenBehindCompute) {
  bench::BenchRow row;
  row.prefill_seconds = 0.2;
  row.decode_seconds = 1.0;            // wall 1.2 s
  EXPECT_LT(row.copy_overlap(), 0.0);  // not measured
  row.compute_busy_seconds = 1.0;
  row.weight_copy_busy_seconds = 0.5;  // 1.5 s of work in 1.2 s: 0.3 s of copying was hidden
  EXPECT_DOUBLE_EQ(row.copy_overlap(), 0.6);
  row.compute_busy_seconds = 0.5;  // 1.0 s of work in 1.2 s: nothing overlapped
  EXPECT_DOUBLE_EQ(row.copy_overlap(), 0.0);
}

}  // namespace
}  // namespace offgen
