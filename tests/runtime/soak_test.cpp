// Soak: many blocks of generation and scoring on the cpu device, each run under a random plan
// (GPU batch split, KV share and attention side, activations' tier, weights over gpu / pinned /
// disk) and a random policy, checked against the all-resident run of the same blocks. Between
// jobs every tier's bytes return to what the loaded model holds, and no file descriptor is left
// open, so a job that runs for hours does not creep. OFFGEN_SOAK_TRIALS=N runs N plans (default
// 24; docs/reliability.md has a long run).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "engine/runtime/engine.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

int trials_from_environment(int fallback) {
  const char* text = std::getenv("OFFGEN_SOAK_TRIALS");
  if (text == nullptr || *text == '\0') return fallback;
  return std::max(1, std::atoi(text));
}

std::size_t open_file_descriptors() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++n;
  }
  return n;
}

struct SoakPlan {
  Placement placement{1, {}, {}};  // GPU batches of 1
  PolicyKind policy = PolicyKind::full;
  KvBudget kv_budget;

  std::string describe() const {
    return fmt::format("{}, {} budget {}", placement.describe(), policy_name(policy),
                       kv_budget.value());
  }
};

SoakPlan random_plan(std::mt19937& rng) {
  const PolicyKind policies[] = {PolicyKind::full, PolicyKind::local, PolicyKind::h2o,
                                 PolicyKind::streaming};
  const double kv_shares[] = {0.0, 0.25, 0.5, 1.0};
  const KvBudget budgets[] = {KvBudget::fraction(0.3), KvBudget::fraction(0.5),
                              KvBudget::tokens(7)};
  SoakPlan plan;
  Placement& p = plan.placement;
  p.gpu_batch = 1 + static_cast<int>(rng() % 4);
  p.block.num_gpu_batches = 1 + static_cast<int>(rng() % 3);
  p.block.kv_gpu_fraction = kv_shares[rng() % 4];
  p.block.cpu_attention = rng() % 2 == 1;
  p.block.activations_on_host = rng() % 2 == 1;
  switch (rng() % 4) {
    case 0:
      break;  // all resident
    case 1:
      p.weights = {0.5, 0.5};
      break;
    case 2:
      p.weights = {0.0, 1.0};
      break;
    default:  // a share on the disk tier
      p.weights = {0.25, 0.25};
      break;
  }
  plan.policy = policies[rng() % 4];
  if (plan.policy != PolicyKind::full) plan.kv_budget = budgets[rng() % 3];
  return plan;
}

EngineOptions options_for(const SoakPlan& plan, const std::string& disk) {
  EngineOptions options;
  options.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.device = DeviceChoice::cpu;
  options.placement = plan.placement;
  if (plan.placement.weights_disk() > 1e-9) options.disk = disk;
  options.policy.kind = plan.policy;
  options.policy.sinks = 1;
  options.kv_budget = plan.kv_budget;
  return options;
}

// The same blocks as one GPU batch each, with everything resident: placement, the split into GPU
// batches and the padding each split brings change nothing (every CPU kernel sums an output in
// one order whatever the row count and the left padding).
EngineOptions resident_options(const SoakPlan& plan) {
  SoakPlan resident;
  resident.placement.gpu_batch = plan.placement.gpu_batch * plan.placement.block.num_gpu_batches;
  resident.placement.block.num_gpu_batches = 1;
  resident.policy = plan.policy;
  resident.kv_budget = plan.kv_budget;
  return options_for(resident, "");
}

// More requests than a block holds, of mixed prompt lengths, greedy and sampled, so every job
// runs several blocks with ragged padding.
std::vector<GenerationRequest> requests_for(std::mt19937& rng) {
  const std::vector<ScoreRequest> texts = test::golden_score_requests();
  std::vector<GenerationRequest> requests;
  const int n = 5 + static_cast<int>(rng() % 8);
  for (int i = 0; i < n; ++i) {
    const auto& text = texts[rng() % texts.size()].tokens;
    GenerationRequest r;
    const std::size_t length = 2 + rng() % std::min<std::size_t>(text.size() - 1, 12);
    r.prompt.assign(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(length));
    r.max_tokens = 1 + static_cast<int>(rng() % 10);
    if (rng() % 3 == 0) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_k = 20;
      r.seed = rng();
    } else {
      r.sampling.temperature = 0.0f;
    }
    requests.push_back(r);
  }
  return requests;
}

struct TierBytes {
  std::uint64_t bytes[kNumTiers] = {};
  explicit TierBytes(Device& device) {
    for (int t = 0; t < kNumTiers; ++t) bytes[t] = device.usage(static_cast<Tier>(t)).used;
  }
};

void expect_back_to(Engine& engine, const TierBytes& baseline, const std::string& when) {
  const TierBytes now(engine.device());
  for (int t = 0; t < kNumTiers; ++t) {
    EXPECT_EQ(now.bytes[t], baseline.bytes[t])
        << tier_name(static_cast<Tier>(t)) << " bytes after " << when;
  }
}

TEST(Soak, RandomPlansAndPoliciesOverManyBlocksMatchTheResidentRunAndLeakNothing) {
  const int trials = trials_from_environment(24);
  std::mt19937 rng(0x50a6);
  test::TempDir disk;
  const std::size_t fds_at_start = open_file_descriptors();
  int blocks = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const SoakPlan plan = random_plan(rng);
    SCOPED_TRACE(fmt::format("trial {}: {}", trial, plan.describe()));
    Engine offloaded(options_for(plan, disk.path().string()));
    Engine resident(resident_options(plan));
    const TierBytes loaded(offloaded.device());

    for (int job = 0; job < 3; ++job) {
      const std::vector<GenerationRequest> requests = requests_for(rng);
      blocks += static_cast<int>((requests.size() + offloaded.placement().block_size() - 1) /
                                 static_cast<std::size_t>(offloaded.placement().block_size()));
      const auto got = offloaded.generate(requests);
      const auto want = resident.generate(requests);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < want.size(); ++i) {
        ASSERT_TRUE(got[i].error.empty()) << got[i].error;
        EXPECT_EQ(got[i].tokens, want[i].tokens) << "job " << job << " request " << i;
        EXPECT_EQ(got[i].finish, want[i].finish) << "job " << job << " request " << i;
      }
      expect_back_to(offloaded, loaded, fmt::format("generate job {}", job));
    }

    const std::vector<ScoreRequest> texts = test::golden_score_requests();
    const int prefill = 2 + static_cast<int>(rng() % 6);
    const auto got = offloaded.score(texts, prefill);
    const auto want = resident.score(texts, prefill);
    for (std::size_t r = 0; r < want.size(); ++r) {
      ASSERT_TRUE(got[r].error.empty()) << got[r].error;
      ASSERT_EQ(got[r].token_logprobs.size(), want[r].token_logprobs.size());
      for (std::size_t i = 1; i < want[r].token_logprobs.size(); ++i) {
        EXPECT_EQ(got[r].token_logprobs[i], want[r].token_logprobs[i]) << "text " << r << " " << i;
      }
    }
    expect_back_to(offloaded, loaded, "score");
    for (int t = 0; t < kNumTiers; ++t) {
      const TierUsage usage = offloaded.device().usage(static_cast<Tier>(t));
      EXPECT_LE(usage.peak, usage.budget) << tier_name(static_cast<Tier>(t));
    }
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(open_file_descriptors(), fds_at_start) << "file descriptors left open";
  RecordProperty("generation_blocks", blocks);
}

}  // namespace
}  // namespace offgen
