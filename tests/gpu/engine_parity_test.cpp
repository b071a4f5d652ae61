// The whole model on the cuda device against the cpu device: score log-probabilities and greedy
// tokens on the golden checkpoints (which the cpu device matches to Hugging Face) and on dummy
// opt-1.3b, for every KV policy, and with int4 weights and KV. Skipped without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/device/cuda_probe.h"
#include "engine/runtime/engine.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

// Different summation orders (cuBLASLt's split-K, tiled attention) move fp16 activations by an
// ulp or so per layer; 0.02 nats on a 2-4 layer model is far below what a wrong kernel gives.
constexpr double kLogprobTolerance = 0.02;

EngineOptions options_for(const std::string& model, DeviceChoice device, PolicyKind policy,
                          KvBudget budget) {
  EngineOptions options;
  options.model = model;
  options.device = device;
  options.placement.gpu_batch = 4;
  options.policy.kind = policy;
  options.policy.sinks = 2;
  options.policy.observation_window = 2;  // snapkv, pyramidkv: a window that fits 6 tokens
  options.kv_budget = budget;
  return options;
}

void expect_same_scores(const std::vector<ScoreResult>& cuda, const std::vector<ScoreResult>& cpu,
                        double tolerance) {
  ASSERT_EQ(cuda.size(), cpu.size());
  for (std::size_t r = 0; r < cpu.size(); ++r) {
    ASSERT_TRUE(cuda[r].error.empty()) << cuda[r].error;
    ASSERT_EQ(cuda[r].token_logprobs.size(), cpu[r].token_logprobs.size());
    for (std::size_t i = 1; i < cpu[r].token_logprobs.size(); ++i) {
      EXPECT_NEAR(cuda[r].token_logprobs[i], cpu[r].token_logprobs[i], tolerance)
          << "text " << r << " token " << i;
    }
  }
}

// Each step's three most likely tokens on both devices, up to the first step where the picks
// differ: whether the devices disagree by rounding at a near tie or by a real margin.
std::string top_logprobs_until_they_differ(const GenerationResult& cuda,
                                           const GenerationResult& cpu) {
  std::string out;
  const std::size_t steps = std::min(cuda.top_logprobs.size(), cpu.top_logprobs.size());
  for (std::size_t t = 0; t < steps; ++t) {
    out += fmt::format("step {}:", t);
    for (const auto* side : {&cuda, &cpu}) {
      out += side == &cuda ? "  cuda" : "  cpu";
      for (const auto& [id, logprob] : side->top_logprobs[t]) {
        out += fmt::format(" {}={:.6f}", id, logprob);
      }
    }
    out += "\n";
    if (t < cuda.tokens.size() && t < cpu.tokens.size() && cuda.tokens[t] != cpu.tokens[t]) break;
  }
  return out;
}

// The log-probability one device gives `id` at step t (from its top list), NaN when not listed.
double listed_logprob(const GenerationResult& result, std::size_t t, std::int32_t id) {
  for (const auto& [listed, logprob] : result.top_logprobs[t]) {
    if (listed == id) return logprob;
  }
  return std::nan("");
}

// Greedy tokens agree step by step, and each picked token's log-probability agrees within
// kLogprobTolerance. The only divergence allowed is a near tie: at the first step where the picks
// differ, each device ranks the other's pick within kLogprobTolerance of its own, so an ulp of
// fp16 rounding (a GEMM summed in another order) decided it. What follows depends on the pick and
// is not compared. A wrong kernel moves log-probs by far more than the tolerance, and fails.
void expect_same_tokens_or_a_near_tie(const GenerationResult& cuda, const GenerationResult& cpu,
                                      std::size_t request) {
  const std::string context =
      fmt::format("request {}\n{}", request, top_logprobs_until_they_differ(cuda, cpu));
  const std::size_t steps = std::min(cuda.tokens.size(), cpu.tokens.size());
  ASSERT_LE(steps, std::min(cuda.top_logprobs.size(), cpu.top_logprobs.size())) << context;
  for (std::size_t t = 0; t < steps; ++t) {
    if (cuda.tokens[t] == cpu.tokens[t]) {
      EXPECT_NEAR(cuda.token_logprobs[t], cpu.token_logprobs[t], kLogprobTolerance)
          << "step " << t << ", " << context;
      continue;
    }
    const double cuda_gap = cuda.token_logprobs[t] - listed_logprob(cuda, t, cpu.tokens[t]);
    const double cpu_gap = cpu.token_logprobs[t] - listed_logprob(cpu, t, cuda.tokens[t]);
    EXPECT_TRUE(cuda_gap < kLogprobTolerance && cpu_gap < kLogprobTolerance)
        << "the picks differ at step " << t << " by more than a near tie (cuda ranks its pick "
        << cuda_gap << " above the cpu's, the cpu " << cpu_gap << " above cuda's); " << context;
    return;
  }
  EXPECT_EQ(cuda.tokens, cpu.tokens) << context;  // same picks: same length, same stop
}

struct ParityCase {
  const char* model;
  PolicyKind policy;
  KvBudget budget;
};

class CudaMatchesCpu : public ::testing::TestWithParam<ParityCase> {};

TEST_P(CudaMatchesCpu, ScoresThroughTheKvCache) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  const ParityCase c = GetParam();
  const std::string model = (test::data_dir() / "golden" / c.model).string();
  const auto texts = test::golden_score_requests(c.model);
  Engine cuda(options_for(model, DeviceChoice::cuda, c.policy, c.budget));
  Engine cpu(options_for(model, DeviceChoice::cpu, c.policy, c.budget));
  // 3 prefill tokens, the rest decode steps: every kernel and the eviction ops run.
  expect_same_scores(cuda.score(texts, 3), cpu.score(texts, 3), kLogprobTolerance);
  expect_same_scores(cuda.score(texts, 0), cpu.score(texts, 0), kLogprobTolerance);
}

TEST_P(CudaMatchesCpu, GreedyGenerationGivesTheSameTokens) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  const ParityCase c = GetParam();
  const std::string model = (test::data_dir() / "golden" / c.model).string();
  std::vector<GenerationRequest> requests;
  for (const ScoreRequest& text : test::golden_score_requests(c.model)) {
    GenerationRequest r;
    r.prompt.assign(text.tokens.begin(),
                    text.tokens.begin() + std::min<std::size_t>(5, text.tokens.size()));
    r.max_tokens = 12;
    r.sampling.temperature = 0.0f;
    r.logprobs = true;
    r.top_logprobs = 3;
    requests.push_back(r);
  }
  Engine cuda(options_for(model, DeviceChoice::cuda, c.policy, c.budget));
  Engine cpu(options_for(model, DeviceChoice::cpu, c.policy, c.budget));
  const auto on_cuda = cuda.generate(requests);
  const auto on_cpu = cpu.generate(requests);
  ASSERT_EQ(on_cuda.size(), on_cpu.size());
  for (std::size_t i = 0; i < on_cpu.size(); ++i) {
    expect_same_tokens_or_a_near_tie(on_cuda[i], on_cpu[i], i);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Golden, CudaMatchesCpu,
    ::testing::Values(ParityCase{"tiny-preln", PolicyKind::full, KvBudget{}},
                      ParityCase{"tiny-postln-proj", PolicyKind::full, KvBudget{}},
                      ParityCase{"tiny-bf16-noprefix", PolicyKind::full, KvBudget{}},
                      ParityCase{"tiny-preln", PolicyKind::local, KvBudget::tokens(6)},
                      ParityCase{"tiny-preln", PolicyKind::h2o, KvBudget::tokens(6)},
                      ParityCase{"tiny-preln", PolicyKind::streaming, KvBudget::tokens(6)},
                      ParityCase{"tiny-preln", PolicyKind::tova, KvBudget::tokens(6)},
                      ParityCase{"tiny-preln", PolicyKind::snapkv, KvBudget::tokens(6)},
                      ParityCase{"tiny-preln", PolicyKind::pyramidkv, KvBudget::tokens(6)},
                      // The LLaMA family: RMSNorm, rotary, SwiGLU, grouped / multi-query
                      // attention, and the attention-score policies over KV heads.
                      ParityCase{"tiny-llama-gqa", PolicyKind::full, KvBudget{}},
                      ParityCase{"tiny-llama3-tied", PolicyKind::full, KvBudget{}},
                      ParityCase{"tiny-qwen2-mqa", PolicyKind::full, KvBudget{}},
                      ParityCase{"tiny-llama-gqa", PolicyKind::h2o, KvBudget::tokens(6)},
                      ParityCase{"tiny-qwen2-mqa", PolicyKind::snapkv, KvBudget::tokens(6)}),
    [](const auto& param) {
      std::string name =
          std::string(param.param.model) + "_" + std::string(policy_name(param.param.policy));
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

TEST(CudaMatchesCpuAtScale, DummyOpt1_3bScores) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  std::vector<ScoreRequest> texts(4);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    texts[i].tokens.push_back(2);
    for (int t = 0; t < 40 + static_cast<int>(i) * 7; ++t) {
      texts[i].tokens.push_back(static_cast<std::int32_t>(4 + (i * 7919 + t * 104729) % 50000));
    }
  }
  Engine cuda(options_for("dummy:opt-1.3b", DeviceChoice::cuda, PolicyKind::full, KvBudget{}));
  Engine cpu(options_for("dummy:opt-1.3b", DeviceChoice::cpu, PolicyKind::full, KvBudget{}));
  // 24 layers of hidden 2048 accumulate more rounding differences than the tiny models.
  expect_same_scores(cuda.score(texts, 16), cpu.score(texts, 16), 0.05);
}

// int4 weights and KV (the quantize kernels are bit-exact on both devices, so only the GEMMs'
// and attention's summation orders differ) on the trained model, whose head_dim of 64 makes one
// group per row: streamed packed layers, packed caches resident, staged and cpu-attended, h2o.
TEST(CudaMatchesCpuCompressed, Int4WeightsAndKvOnEveryPlacement) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  std::vector<ScoreRequest> texts = test::score_requests(test::trained_golden_expected());
  for (ScoreRequest& text : texts) {
    if (text.tokens.size() > 256) text.tokens.resize(256);
  }
  for (const bool cpu_attention : {false, true}) {
    SCOPED_TRACE(cpu_attention ? "cpu attention" : "staged");
    const auto options = [&](DeviceChoice device) {
      EngineOptions o = options_for(test::trained_model_dir().string(), device, PolicyKind::h2o,
                                    KvBudget::parse("0.5"));
      o.compression = {Storage::int4, Storage::int4};
      o.placement.weights = {0.3, 0.7};
      o.placement.block.kv_gpu_fraction = 0.5;
      o.placement.block.cpu_attention = cpu_attention;
      return o;
    };
    Engine cuda(options(DeviceChoice::cuda));
    Engine cpu(options(DeviceChoice::cpu));
    expect_same_scores(cuda.score(texts, 64), cpu.score(texts, 64), 0.05);
  }
}

TEST(CudaDeviceChoice, AutoPicksTheGpu) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  EngineOptions options;
  options.model = (test::data_dir() / "golden" / "tiny-preln").string();
  Engine engine(options);
  EXPECT_EQ(engine.device().kind(), DeviceKind::cuda);
}

}  // namespace
}  // namespace offgen
