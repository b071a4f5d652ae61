// Drives an implementation of the h2o eviction ops (kernels/eviction_args.h) through a prefill and
// decode steps on random inputs — quantised scores so ties are common, sequences that stop
// advancing, prompts shorter and longer than the budget — and compares its state after every call
// with the host-side truth: policies/h2o_policy.cpp's keep_after_prefill and victim. Every kernel
// set runs it (score_eviction_test.cpp): the cpu kernels in test_kernels, the cuda kernels in
// test_gpu_kernels through copying wrappers.
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
};

// Every pointer in the args is host memory; a device implementation copies in and out.
using ScorePrefillFn = std::function<void(const kernels::ScorePrefillArgs&)>;
using ScoreDecodeFn = std::function<void(const kernels::ScoreDecodeArgs&)>;

inline ::testing::AssertionResult matches_policy(const ScoreCase& c, const ScorePrefillFn& prefill,
                                                 const ScoreDecodeFn& decode) {
  // Each sequence its own budget (and so its own window); the caches have the largest + 1 slots.
  std::vector<std::unique_ptr<KvPolicy>> policies;
  std::vector<std::int32_t> budgets, recents;
  for (int b = 0; b < c.batch; ++b) {
    policies.push_back(
        make_policy({PolicyKind::h2o, c.recent_fraction, 0}, std::max(1, c.budget - b % 3)));
    budgets.push_back(policies.back()->budget());
    recents.push_back(policies.back()->recent_window());
  }
  const int cap = c.budget + 1;
  const int cells = c.batch * c.heads;
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
  prefill(pa);

  // The truth, from the policy.
  std::vector<std::int32_t> want_position(cells * cap, -1), want_write(cells);
  std::vector<float> want_score(cells * cap, 0.0f);
  for (int bh = 0; bh < cells; ++bh) {
    const int b = bh / c.heads;
    const int pad = c.seq - len[b];
    const std::vector<int> keep = policies[b]->keep_after_prefill(
        len[b], std::span<const float>(sums.data() + bh * c.seq + pad, len[b]));
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

  std::vector<int> cached(c.batch);
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
    decode(da);
    for (int bh = 0; bh < cells; ++bh) {
      const int b = bh / c.heads;
      if (!advancing[b]) continue;
      std::int32_t* p = want_position.data() + bh * cap;
      float* sc = want_score.data() + bh * cap;
      const int slot = want_write[bh];
      p[slot] = new_position[b];
      sc[slot] = 0.0f;
      for (int s = 0; s < count[b]; ++s) sc[s] += probs[bh * cap + s];
      const int used = budgets[b] + 1;  // the sequence's own slots
      if (count[b] < used) {
        want_write[bh] = count[b];
        continue;
      }
      const int victim = policies[b]->victim(std::span<const std::int32_t>(p, used),
                                             std::span<const float>(sc, used));
      p[victim] = -1;
      sc[victim] = 0.0f;
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

// A spread of shapes: prompts shorter and longer than the budget, R = 1, R = C, long prompts
// (more than one chunk per thread in a 256-thread block), many heads.
inline std::vector<ScoreCase> score_cases() {
  return {{3, 2, 20, 8, 0.5, 30, 1}, {2, 3, 5, 8, 0.5, 20, 2},     {4, 1, 40, 10, 0.0, 40, 3},
          {2, 2, 16, 6, 1.0, 25, 4}, {1, 4, 600, 100, 0.5, 60, 5}, {8, 12, 64, 17, 0.3, 50, 6},
          {2, 2, 1, 1, 0.5, 10, 7},  {3, 5, 300, 299, 0.5, 10, 8}};
}

}  // namespace offgen::test
