// An independent check of the local policy through the KV cache: scoring with --policy local
// --kv-budget C and --prefill-tokens P <= C + 1 must equal one ordinary forward pass (no cache)
// whose causal attention is limited to a band — each query sees itself and the C tokens before it.
// The band forward below is written here from the reference kernels; it shares no code with the
// runner's cache, slots or policies.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/device/cpu_device.h"
#include "engine/model/checkpoint.h"
#include "engine/runtime/engine.h"
#include "kernels/reference/reference.h"
#include "offload/weight_store.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

namespace ref = kernels::reference;

// Causal attention over qkv rows [n, 3·H·D] where query i attends keys max(0, i-window) .. i.
std::vector<Half> band_attention(const std::vector<Half>& qkv, int n, int heads, int head_dim,
                                 int window) {
  const int hd = heads * head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  std::vector<Half> out(static_cast<std::size_t>(n) * hd);
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < n; ++i) {
      const int first = std::max(0, i - window);
      std::vector<double> p(static_cast<std::size_t>(i - first + 1));
      double max_score = -1e300;
      for (int j = first; j <= i; ++j) {
        double dot = 0;
        for (int d = 0; d < head_dim; ++d) {
          dot +=
              static_cast<double>(half_to_float(qkv[std::size_t(i) * 3 * hd + h * head_dim + d])) *
              half_to_float(qkv[std::size_t(j) * 3 * hd + hd + h * head_dim + d]);
        }
        p[std::size_t(j - first)] = dot * scale;
        max_score = std::max(max_score, dot * scale);
      }
      double total = 0;
      for (double& v : p) total += (v = std::exp(v - max_score));
      for (int d = 0; d < head_dim; ++d) {
        double acc = 0;
        for (int j = first; j <= i; ++j) {
          acc += p[std::size_t(j - first)] / total *
                 half_to_float(qkv[std::size_t(j) * 3 * hd + 2 * hd + h * head_dim + d]);
        }
        out[std::size_t(i) * hd + h * head_dim + d] = float_to_half(static_cast<float>(acc));
      }
    }
  }
  return out;
}

// log p(tokens[i] | tokens[:i]) for i >= 1 under the band-limited model (pre-LN OPT).
std::vector<float> band_forward_logprobs(const ModelConfig& c, const ModelWeights& w,
                                         const std::vector<std::int32_t>& tokens, int window) {
  const int n = static_cast<int>(tokens.size());
  const int h = c.hidden_size;
  std::vector<std::int32_t> positions(tokens.size());
  for (int i = 0; i < n; ++i) positions[std::size_t(i)] = i;
  std::vector<Half> x(std::size_t(n) * h), t(x.size()), qkv(std::size_t(n) * 3 * h);
  std::vector<Half> f(std::size_t(n) * c.ffn_dim);
  ref::gather_rows({.table = w.embed_tokens,
                    .ids = tokens.data(),
                    .out = x.data(),
                    .table_rows = c.vocab_size,
                    .rows = n,
                    .dim = h});
  ref::add_position_embeddings({.x = x.data(),
                                .table = w.embed_positions,
                                .positions = positions.data(),
                                .rows = n,
                                .dim = h,
                                .offset = c.position_offset});
  // x's n rows through a layer norm into `out`.
  const auto norm = [&](const Half* gamma, const Half* beta, Half* out) {
    ref::layer_norm({.x = x.data(),
                     .gamma = gamma,
                     .beta = beta,
                     .y = out,
                     .rows = n,
                     .dim = h,
                     .eps = c.layer_norm_eps});
  };
  for (const LayerWeights& l : w.layers) {
    norm(l.attn_ln_weight, l.attn_ln_bias, t.data());
    ref::linear({.x = t.data(),
                 .weight = l.qkv_weight,
                 .bias = l.qkv_bias,
                 .y = qkv.data(),
                 .rows = n,
                 .out_features = 3 * h,
                 .in_features = h});
    const auto attn = band_attention(qkv, n, c.num_heads, c.head_dim(), window);
    ref::linear({.x = attn.data(),
                 .weight = l.out_weight,
                 .bias = l.out_bias,
                 .y = t.data(),
                 .rows = n,
                 .out_features = h,
                 .in_features = h});
    ref::add_inplace(x.data(), t.data(), std::int64_t{n} * h);
    norm(l.ffn_ln_weight, l.ffn_ln_bias, t.data());
    ref::linear({.x = t.data(),
                 .weight = l.fc1_weight,
                 .bias = l.fc1_bias,
                 .y = f.data(),
                 .rows = n,
                 .out_features = c.ffn_dim,
                 .in_features = h,
                 .activation = kernels::Activation::relu});
    ref::linear({.x = f.data(),
                 .weight = l.fc2_weight,
                 .bias = l.fc2_bias,
                 .y = t.data(),
                 .rows = n,
                 .out_features = h,
                 .in_features = c.ffn_dim});
    ref::add_inplace(x.data(), t.data(), std::int64_t{n} * h);
  }
  norm(w.final_ln_weight, w.final_ln_bias, x.data());
  std::vector<float> logits(std::size_t(n) * c.vocab_size);
  ref::logits({.x = x.data(),
               .embed = w.embed_tokens,
               .out = logits.data(),
               .rows = n,
               .vocab = c.vocab_size,
               .dim = h});
  std::vector<float> out(tokens.size(), std::nanf(""));
  std::vector<float> lp(1);
  for (int i = 0; i + 1 < n; ++i) {
    ref::token_logprobs({.logits = logits.data() + std::size_t(i) * c.vocab_size,
                         .targets = &tokens[std::size_t(i + 1)],
                         .out = lp.data(),
                         .rows = 1,
                         .vocab = c.vocab_size});
    out[std::size_t(i + 1)] = lp[0];
  }
  return out;
}

TEST(LocalPolicy, ScoringThroughTheCacheEqualsABandMaskedForwardPass) {
  const auto dir = test::data_dir() / "golden" / "tiny-preln";
  std::ifstream in(dir / "expected.json");
  const auto expected = nlohmann::json::parse(in);
  auto checkpoint = Checkpoint::open(dir);
  CpuDevice device;
  WeightStore store(device, checkpoint->config(), *checkpoint);

  for (const int budget : {3, 6, 10}) {
    for (const int prefill : {1, budget + 1}) {  // P <= C + 1
      EngineOptions options;
      options.model = dir.string();
      options.device = DeviceChoice::cpu;
      options.cpu_kernels = CpuKernelSet::reference;
      options.policy.kind = PolicyKind::local;
      options.kv_budget = KvBudget::tokens(budget);
      Engine engine(options);
      for (const auto& item : expected["score"]) {
        const auto tokens = item["token_ids"].get<std::vector<std::int32_t>>();
        SCOPED_TRACE(testing::Message()
                     << "C " << budget << ", P " << prefill << ", length " << tokens.size());
        const auto cached = engine.score(std::vector<ScoreRequest>{{tokens}}, prefill);
        ASSERT_TRUE(cached[0].error.empty()) << cached[0].error;
        const auto band =
            band_forward_logprobs(checkpoint->config(), store.weights(), tokens, budget);
        for (std::size_t i = 1; i < tokens.size(); ++i) {
          // Same kernels, same rounding points; only the attention's summation order differs.
          EXPECT_NEAR(cached[0].token_logprobs[i], band[i], 2e-3) << "token " << i;
        }
        // The check has teeth: without the band, a long text's log-probabilities differ.
        if (tokens.size() > static_cast<std::size_t>(2 * budget + 2)) {
          const auto unbanded =
              band_forward_logprobs(checkpoint->config(), store.weights(), tokens, 1 << 20);
          double largest = 0;
          for (std::size_t i = 1; i < tokens.size(); ++i) {
            largest =
                std::max(largest, std::abs(double(unbanded[i]) - cached[0].token_logprobs[i]));
          }
          EXPECT_GT(largest, 0.05);
        }
      }
    }
  }
}

}  // namespace
}  // namespace offgen
