// Drives an implementation of the attention-score eviction ops (kernels/eviction_args.h) through a
// prefill and decode steps on random inputs — quantised scores so ties are common, sequences that
// stop advancing, prompts shorter and longer than the budget — and compares its state after every
// call with the host-side truth: the policy's keep_after_prefill and victim (h2o, tova, snapkv),
// fed as the KvPolicy interface says (head means for HeadScores::layer_mean, rows that replace
// the scores for DecodeScores::replace). Every kernel set runs it (score_eviction_test.cpp): the
// cpu kernels in test_kernels, the cuda kernels in test_gpu_kernels through copying wrappers.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/eviction_args.h"
#include "policies/kv_policy.h"

namespace offgen::test {

struct ScoreCase {
  int batch = 3;
  int heads = 2;
  int seq = 20;
  int budget = 8;  // sequence b's C is budget - b % 3 (at least 1): budgets differ in a batch
  double recent_fraction = 0.5;
  int steps = 30;
  std::uint64_t seed = 1;
  PolicyKind kind = PolicyKind::h2o;
  int observation_window = 32;  // snapkv, pyramidkv
  int pool_kernel = 5;          // snapkv, pyramidkv
  int layer = 0;                // pyramidkv: the layer (of `layers`) whose budgets run
  int layers = 1;
};

// The args' modes for a policy (what AttentionScoreState passes).
inline kernels::ScoreHeads heads_mode(const KvPolicy& policy) {
  return policy.head_scores() == HeadScores::layer_mean ? kernels::ScoreHeads::layer_mean
                                                        : kernels::ScoreHeads::per_head;
}

// Every pointer in the args is host memory; a device implementation copies in and out.
using ScorePrefillFn = std::function<void(const kernels::ScorePrefillArgs&)>;
using ScoreDecodeFn = std::function<void(const kernels::ScoreDecodeArgs&)>;

inline ::testing::AssertionResult matches_policy(const ScoreCase& c, const ScorePrefillFn& prefill,
                                                 const ScoreDecodeFn& decode) {
  // Each sequence its own budget (and so its own window); the caches have the largest + 1 slots.
  std::vector<std::unique_ptr<KvPolicy>> policies;
  std::vector<std::int32_t> budgets, recents;
  PolicyOptions options;
  options.kind = c.kind;
  options.recent_fraction = c.recent_fraction;
  options.observation_window = c.observation_window;
  options.pool_kernel = c.pool_kernel;
  for (int b = 0; b < c.batch; ++b) {
    policies.push_back(make_policy(options, std::max(1, c.budget - b % 3)));
    // A layer of pyramidkv runs snapkv at its own budget: that is what the kernels see.
    if (auto layer = policies.back()->layer_policy(c.layer, c.layers)) {
      policies.back() = std::move(layer);
    }
    budgets.push_back(policies.back()->budget());
    recents.push_back(policies.back()->recent_window());
  }
  const KvPolicy& first = *policies.front();
  const bool layer_mean = first.head_scores() == HeadScores::layer_mean;
  const bool replace = first.decode_scores() == DecodeScores::replace;
  int cap = 2;
  for (const auto& policy : policies) cap = std::max(cap, policy->budget() + 1);
  const int cells = c.batch * c.heads;
  // What a layer_mean policy ranks by: the mean over the heads of b, in head order, of v[g].
  auto head_mean = [&](int b, auto value_of_head) {
    float total = 0.0f;
    for (int g = 0; g < c.heads; ++g) total += value_of_head(b * c.heads + g);
    return total / static_cast<float>(c.heads);
  };
  std::mt19937 rng(static_cast<unsigned>(c.seed));
  // Multiples of 1/8: equal scores happen often, and sums of them stay exact in fp32.
  auto quantised = [&] { return static_cast<float>(rng() % 9) / 8.0f; };

  // Prompts: lengths from 0 to seq, left-padded.
  std::vector<int> len(c.batch);
  std::vector<std::uint8_t> valid(static_cast<std::size_t>(c.batch) * c.seq);
  for (int b = 0; b < c.batch; ++b) {
    len[b] = b == 0 ? c.seq : static_cast<int>(rng() % (c.seq + 1));
    for (int i = 0; i < c.seq; ++i) valid[b * c.seq + i] = i >= c.seq - len[b] ? 1 : 0;
  }
  std::vector<float> sums(static_cast<std::size_t>(cells) * c.seq, 0.0f);
  for (int bh = 0; bh < cells; ++bh) {
    const int b = bh / c.heads;
    for (int i = c.seq - len[b]; i < c.seq; ++i) sums[bh * c.seq + i] = quantised();
  }

  // The implementation's state (garbage first: the prefill must overwrite all of it).
  std::vector<std::int32_t> token_slot(sums.size(), 77), position(cells * cap, 77),
      write_slot(cells, 77);
  std::vector<float> score(cells * cap, 77.0f);
  kernels::ScorePrefillArgs pa;
  pa.key_prob_sums = sums.data();
  pa.valid = valid.data();
  pa.token_slot = token_slot.data();
  pa.position = position.data();
  pa.score = score.data();
  pa.write_slot = write_slot.data();
  pa.batch = c.batch;
  pa.seq = c.seq;
  pa.heads = c.heads;
  pa.capacity = cap;
  pa.budget = budgets.data();
  pa.recent = recents.data();
  pa.heads_mode = heads_mode(first);
  pa.pool_kernel = first.pool_kernel();
  prefill(pa);

  // The truth, from the policy.
  std::vector<std::int32_t> want_position(cells * cap, -1), want_write(cells);
  std::vector<float> want_score(cells * cap, 0.0f);
  for (int bh = 0; bh < cells; ++bh) {
    const int b = bh / c.heads;
    const int pad = c.seq - len[b];
    std::vector<float> ranking(sums.begin() + bh * c.seq + pad, sums.begin() + (bh + 1) * c.seq);
    if (layer_mean) {
      for (int i = 0; i < len[b]; ++i) {
        ranking[i] = head_mean(b, [&](int g) { return sums[g * c.seq + pad + i]; });
      }
    }
    const std::vector<int> keep = policies[b]->keep_after_prefill(len[b], ranking);
    std::vector<std::int32_t> want_token_slot(c.seq, -1);
    for (std::size_t k = 0; k < keep.size(); ++k) {
      want_position[bh * cap + k] = keep[k];
      want_score[bh * cap + k] = sums[bh * c.seq + pad + keep[k]];
      want_token_slot[pad + keep[k]] = static_cast<std::int32_t>(k);
    }
    want_write[bh] = static_cast<std::int32_t>(keep.size());
    for (int i = 0; i < c.seq; ++i) {
      if (token_slot[bh * c.seq + i] != want_token_slot[i]) {
        return ::testing::AssertionFailure()
               << "prefill: token_slot of (cell " << bh << ", token " << i << ") is "
               << token_slot[bh * c.seq + i] << ", policy says " << want_token_slot[i];
      }
    }
  }
  auto compare = [&](const std::string& when) -> ::testing::AssertionResult {
    for (int bh = 0; bh < cells; ++bh) {
      if (write_slot[bh] != want_write[bh]) {
        return ::testing::AssertionFailure()
               << when << ": write slot of cell " << bh << " is " << write_slot[bh]
               << ", policy says " << want_write[bh];
      }
      for (int s = 0; s < cap; ++s) {
        const int i = bh * cap + s;
        if (position[i] != want_position[i] || score[i] != want_score[i]) {
          return ::testing::AssertionFailure()
                 << when << ": cell " << bh << " slot " << s << " holds position " << position[i]
                 << " score " << score[i] << ", policy says " << want_position[i] << " score "
                 << want_score[i];
        }
      }
    }
    return ::testing::AssertionSuccess();
  };
  if (auto r = compare("prefill"); !r) return r;

  std::vector<int> cached(c.batch), lead_victim(c.batch, -1);
  std::vector<std::int32_t> seen(c.batch);
  for (int b = 0; b < c.batch; ++b) {
    cached[b] = std::min(len[b], budgets[b]);
    seen[b] = len[b];
  }
  for (int step = 0; step < c.steps; ++step) {
    std::vector<std::uint8_t> advancing(c.batch);
    std::vector<std::int32_t> count(c.batch), new_position(c.batch);
    for (int b = 0; b < c.batch; ++b) {
      advancing[b] = (rng() % 10) != 0 ? 1 : 0;
      count[b] = cached[b] + 1;
      new_position[b] = seen[b];
    }
    std::vector<float> probs(cells * cap, 0.0f);
    for (int bh = 0; bh < cells; ++bh) {
      for (int s = 0; s < count[bh / c.heads]; ++s) probs[bh * cap + s] = quantised();
    }
    kernels::ScoreDecodeArgs da;
    da.probs = probs.data();
    da.advancing = advancing.data();
    da.new_position = new_position.data();
    da.count = count.data();
    da.position = position.data();
    da.score = score.data();
    da.write_slot = write_slot.data();
    da.batch = c.batch;
    da.heads = c.heads;
    da.capacity = cap;
    da.budget = budgets.data();
    da.recent = recents.data();
    da.heads_mode = heads_mode(first);
    da.update = replace ? kernels::ScoreUpdate::replace : kernels::ScoreUpdate::accumulate;
    decode(da);
    for (int bh = 0; bh < cells; ++bh) {
      const int b = bh / c.heads;
      if (!advancing[b]) continue;
      std::int32_t* p = want_position.data() + bh * cap;
      float* sc = want_score.data() + bh * cap;
      const int slot = want_write[bh];
      p[slot] = new_position[b];
      sc[slot] = 0.0f;
      for (int s = 0; s < count[b]; ++s) {
        sc[s] = replace ? probs[bh * cap + s] : sc[s] + probs[bh * cap + s];
      }
    }
    for (int bh = 0; bh < cells; ++bh) {
      const int b = bh / c.heads;
      if (!advancing[b]) continue;
      const int used = budgets[b] + 1;  // the sequence's own slots
      if (count[b] < used) {
        want_write[bh] = count[b];
        continue;
      }
      // layer_mean: every head of b holds the same positions and takes the victim of head 0's
      // turn, ranked by the mean; the later heads of b repeat it.
      const int lead = layer_mean ? b * c.heads : bh;
      std::int32_t* p = want_position.data() + bh * cap;
      std::vector<float> ranking(want_score.begin() + lead * cap,
                                 want_score.begin() + lead * cap + used);
      if (layer_mean && bh == lead) {
        for (int s = 0; s < used; ++s) {
          ranking[s] = head_mean(b, [&](int g) { return want_score[g * cap + s]; });
        }
        lead_victim[b] = policies[b]->victim(std::span<const std::int32_t>(p, used), ranking);
      }
      const int victim = layer_mean
                             ? lead_victim[b]
                             : policies[b]->victim(std::span<const std::int32_t>(p, used), ranking);
      p[victim] = -1;
      want_score[bh * cap + victim] = 0.0f;
      want_write[bh] = victim;
    }
    for (int b = 0; b < c.batch; ++b) {
      if (!advancing[b]) continue;
      ++seen[b];
      cached[b] = std::min(cached[b] + 1, budgets[b]);
    }
    if (auto r = compare("decode step " + std::to_string(step)); !r) return r;
  }
  return ::testing::AssertionSuccess();
}

// h2o: a spread of shapes: prompts shorter and longer than the budget, R = 1, R = C, long prompts
// (more than one chunk per thread in a 256-thread block), many heads.
inline std::vector<ScoreCase> score_cases() {
  return {{3, 2, 20, 8, 0.5, 30, 1}, {2, 3, 5, 8, 0.5, 20, 2},     {4, 1, 40, 10, 0.0, 40, 3},
          {2, 2, 16, 6, 1.0, 25, 4}, {1, 4, 600, 100, 0.5, 60, 5}, {8, 12, 64, 17, 0.3, 50, 6},
          {2, 2, 1, 1, 0.5, 10, 7},  {3, 5, 300, 299, 0.5, 10, 8}};
}

// tova: no window (the new token can go), heads ranking by their mean — one head, odd head
// counts (means that do not divide evenly), long prompts, C = 1.
inline std::vector<ScoreCase> tova_cases() {
  const auto tova = [](ScoreCase c) {
    c.kind = PolicyKind::tova;
    return c;
  };
  return {tova({3, 3, 20, 8, 0.5, 30, 11}),   tova({2, 1, 12, 5, 0.5, 30, 12}),
          tova({4, 5, 40, 10, 0.5, 40, 13}),  tova({1, 4, 600, 100, 0.5, 40, 14}),
          tova({8, 12, 64, 17, 0.5, 30, 15}), tova({2, 2, 3, 1, 0.5, 10, 16}),
          tova({3, 7, 300, 299, 0.5, 10, 17})};
}

// pyramidkv: the top, middle and bottom layers of a 4-layer model (budgets below and above C).
inline std::vector<ScoreCase> pyramidkv_cases() {
  const auto layer = [](ScoreCase c, int l) {
    c.kind = PolicyKind::pyramidkv;
    c.observation_window = 3;
    c.pool_kernel = 3;
    c.layer = l;
    c.layers = 4;
    return c;
  };
  return {layer({3, 2, 40, 12, 0.5, 30, 31}, 0), layer({3, 2, 40, 12, 0.5, 30, 32}, 2),
          layer({3, 2, 40, 12, 0.5, 30, 33}, 3), layer({2, 5, 300, 60, 0.5, 30, 34}, 0),
          layer({2, 5, 300, 60, 0.5, 30, 35}, 3)};
}

// snapkv: observation windows below, at and above C (then R = C - 1), pooling widths 1, 3, 5, 7
// (wider than the prefix at times), long prompts.
inline std::vector<ScoreCase> snapkv_cases() {
  const auto snapkv = [](ScoreCase c, int window, int kernel) {
    c.kind = PolicyKind::snapkv;
    c.observation_window = window;
    c.pool_kernel = kernel;
    return c;
  };
  return {
      snapkv({3, 2, 20, 8, 0.5, 30, 21}, 3, 5),     snapkv({2, 3, 16, 6, 0.5, 20, 22}, 2, 3),
      snapkv({4, 1, 40, 10, 0.5, 40, 23}, 4, 1),    snapkv({1, 4, 600, 100, 0.5, 60, 24}, 32, 5),
      snapkv({8, 12, 64, 17, 0.5, 50, 25}, 5, 7),   snapkv({2, 2, 12, 4, 0.5, 20, 26}, 8, 5),
      snapkv({3, 5, 300, 299, 0.5, 10, 27}, 32, 7), snapkv({2, 2, 9, 6, 0.5, 15, 28}, 4, 9)};
}

}  // namespace offgen::test
