// Property tests of the policies on random attention: a fresh seed each run (printed on failure;
// set OFFGEN_TEST_SEED to replay one), hundreds of random prompt lengths, budgets, decode lengths
// and recent fractions, each checked against an independent brute-force model of the semantics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cache_simulator.h"
#include "engine/core/error.h"
#include "policies/kv_policy.h"

namespace offgen {
namespace {

using test::make;

using Rows = std::vector<std::vector<float>>;
using test::CacheSimulator;

std::uint64_t fresh_seed() {
  if (const char* text = std::getenv("OFFGEN_TEST_SEED")) return std::strtoull(text, nullptr, 10);
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

struct Random {
  explicit Random(std::uint64_t seed) : engine(seed) {}
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(engine); }
  double real(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(engine);
  }

  // A probability row over n keys. Usually a softmax of random logits; with `dyadic`, 16 units of
  // 1/16 dealt out at random, so every score sum is exact in fp32 and ties are frequent.
  std::vector<float> row(std::size_t n, bool dyadic) {
    std::vector<float> probs(n, 0.0f);
    if (dyadic) {
      std::uniform_int_distribution<std::size_t> pick(0, n - 1);
      for (int unit = 0; unit < 16; ++unit) probs[pick(engine)] += 0.0625f;
      return probs;
    }
    std::normal_distribution<double> logit(0.0, real(0.5, 4.0));
    std::vector<double> e(n);
    double max_logit = -1e300;
    for (double& x : e) {
      x = logit(engine);
      max_logit = std::max(max_logit, x);
    }
    double sum = 0.0;
    for (double& x : e) {
      x = std::exp(x - max_logit);
      sum += x;
    }
    for (std::size_t i = 0; i < n; ++i) probs[i] = static_cast<float>(e[i] / sum);
    return probs;
  }

  Rows prefill(int prompt_len, bool dyadic) {
    Rows rows;
    for (int q = 0; q < prompt_len; ++q)
      rows.push_back(row(static_cast<std::size_t>(q) + 1, dyadic));
    return rows;
  }

  double recent_fraction() {
    switch (uniform(0, 7)) {
      case 0:
        return 0.0;
      case 1:
        return 1.0;
      case 2:
      case 3:
        return 0.5;
      default:
        return real(0.0, 1.0);
    }
  }

  std::mt19937_64 engine;
};

std::vector<int> range(int begin, int end) {
  std::vector<int> out;
  for (int i = begin; i < end; ++i) out.push_back(i);
  return out;
}

// Every probability row attention produced, with the positions it covered.
struct AttentionLog {
  struct Entry {
    std::vector<int> positions;  // ascending
    std::vector<float> probs;
  };
  std::vector<Entry> entries;

  // Token p's score from first principles: the sum of what it received from every row that
  // covered it.
  double score(int position) const {
    double sum = 0.0;
    for (const Entry& entry : entries) {
      const auto it = std::lower_bound(entry.positions.begin(), entry.positions.end(), position);
      if (it != entry.positions.end() && *it == position) {
        sum += entry.probs[static_cast<std::size_t>(it - entry.positions.begin())];
      }
    }
    return sum;
  }
};

std::string describe(int prompt_len, int budget, int decode_len, double recent_fraction,
                     bool dyadic) {
  return "P=" + std::to_string(prompt_len) + " C=" + std::to_string(budget) +
         " D=" + std::to_string(decode_len) +
         " recent_fraction=" + std::to_string(recent_fraction) +
         (dyadic ? " dyadic rows" : " softmax rows");
}

class PolicyProperty : public ::testing::Test {
 protected:
  PolicyProperty()
      : seed_(fresh_seed()), trace_(__FILE__, __LINE__, "seed " + std::to_string(seed_)) {}
  std::uint64_t seed_;
  ::testing::ScopedTrace trace_;
};

void expect_scores_match(const std::vector<int>& positions, const std::vector<float>& scores,
                         const AttentionLog& log, bool exact, int terms) {
  ASSERT_EQ(positions.size(), scores.size());
  for (std::size_t i = 0; i < positions.size(); ++i) {
    const double brute = log.score(positions[i]);
    if (exact) {
      EXPECT_EQ(scores[i], static_cast<float>(brute)) << "token " << positions[i];
    } else {
      EXPECT_NEAR(scores[i], brute, 1e-6 * terms * (1.0 + brute)) << "token " << positions[i];
    }
  }
}

// One random h2o run, checked step by step.
void check_h2o_case(Random& rng) {
  const int prompt_len = rng.uniform(1, 24);
  const int decode_len = rng.uniform(0, 24);
  const int budget = rng.uniform(1, prompt_len + decode_len);
  const double recent_fraction = rng.recent_fraction();
  const bool dyadic = rng.uniform(0, 2) == 0;
  SCOPED_TRACE(describe(prompt_len, budget, decode_len, recent_fraction, dyadic));
  const int recent =
      std::min(budget, std::max(1, static_cast<int>(std::llround(budget * recent_fraction))));
  const int heavy = budget - recent;

  const auto policy = make(PolicyKind::h2o, budget, recent_fraction);
  CacheSimulator sim(*policy);
  AttentionLog log;
  const Rows prefill = rng.prefill(prompt_len, dyadic);
  for (std::size_t q = 0; q < prefill.size(); ++q) {
    log.entries.push_back({range(0, static_cast<int>(q) + 1), prefill[q]});
  }
  const std::vector<int> kept_after_prefill = sim.prefill(prefill);
  const int terms = prompt_len + decode_len;

  // Prefill scores: column sums over the prompt's queries.
  expect_scores_match(range(0, prompt_len), sim.prefill_scores(), log, dyadic, terms);

  // Prefill keep: the R most recent plus the H highest-scoring of the rest (ties: newer stays).
  std::vector<int> expected_keep;
  if (prompt_len <= budget) {
    expected_keep = range(0, prompt_len);
  } else {
    std::vector<int> older = range(0, prompt_len - recent);
    const auto& s = sim.prefill_scores();
    std::stable_sort(older.begin(), older.end(), [&](int a, int b) {
      const float sa = s[static_cast<std::size_t>(a)];
      const float sb = s[static_cast<std::size_t>(b)];
      return sa > sb || (sa == sb && a > b);
    });
    expected_keep.assign(older.begin(), older.begin() + heavy);
    for (int p = prompt_len - recent; p < prompt_len; ++p) expected_keep.push_back(p);
    std::sort(expected_keep.begin(), expected_keep.end());
  }
  ASSERT_EQ(kept_after_prefill, expected_keep) << "after the prefill";
  expect_scores_match(sim.kept(), sim.kept_scores(), log, dyadic, terms);

  std::set<int> evicted;
  for (int p = 0; p < prompt_len; ++p) {
    if (!std::binary_search(expected_keep.begin(), expected_keep.end(), p)) evicted.insert(p);
  }

  for (int step = 0; step < decode_len; ++step) {
    SCOPED_TRACE("decode step " + std::to_string(step + 1));
    std::vector<int> covered = sim.kept();
    const int new_position = sim.next_position();
    covered.push_back(new_position);
    const std::vector<float> row = rng.row(covered.size(), dyadic);
    log.entries.push_back({covered, row});
    const auto result = sim.decode(row);

    const bool full = static_cast<int>(covered.size()) == budget + 1;
    ASSERT_EQ(result.evicted, full);
    if (result.evicted) {
      // The scores the policy saw include this step's row.
      std::vector<int> slot_positions(result.slot_positions.begin(), result.slot_positions.end());
      expect_scores_match(slot_positions, result.slot_scores, log, dyadic, terms);

      // The window: the R largest positions of the C + 1 cached.
      std::vector<int> by_age = slot_positions;
      std::sort(by_age.begin(), by_age.end(), std::greater<int>());
      const int oldest_recent = by_age[static_cast<std::size_t>(recent - 1)];
      EXPECT_LT(result.evicted_position, oldest_recent) << "evicted a token of the recent window";

      // The lowest-scoring outside the window; ties: the older token.
      int expected = -1;
      float expected_score = 0.0f;
      for (std::size_t s = 0; s < slot_positions.size(); ++s) {
        const int p = slot_positions[s];
        const float score = result.slot_scores[s];
        if (p >= oldest_recent) continue;
        if (expected < 0 || score < expected_score || (score == expected_score && p < expected)) {
          expected = p;
          expected_score = score;
        }
      }
      EXPECT_EQ(result.evicted_position, expected)
          << "score " << result.slot_scores[static_cast<std::size_t>(result.victim_slot)]
          << " vs lowest " << expected_score;
      evicted.insert(result.evicted_position);
    }

    const std::vector<int> kept = sim.kept();
    EXPECT_LE(static_cast<int>(kept.size()), budget);
    EXPECT_EQ(static_cast<int>(kept.size()), std::min(budget, new_position + 1));
    EXPECT_TRUE(std::adjacent_find(kept.begin(), kept.end(), std::greater_equal<int>()) ==
                kept.end())
        << "positions must be unique and increasing";
    for (int p : kept) EXPECT_EQ(evicted.count(p), 0u) << "evicted token " << p << " came back";
    // The R most recent tokens are all cached.
    for (int p = std::max(0, new_position + 1 - recent); p <= new_position; ++p) {
      EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), p)) << "recent token " << p;
    }
    expect_scores_match(kept, sim.kept_scores(), log, dyadic, terms);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST_F(PolicyProperty, H2oMatchesBruteForceOnRandomAttention) {
  Random rng(seed_);
  for (int i = 0; i < 600 && !HasFailure(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    check_h2o_case(rng);
  }
}

// Runs `policy` with random rows; the kept positions after the prefill and after every step.
std::vector<std::vector<int>> run(const KvPolicy& policy, Random& rng, int prompt_len,
                                  int decode_len, bool dyadic, int* evictions) {
  CacheSimulator sim(policy);
  std::vector<std::vector<int>> kept = {sim.prefill(rng.prefill(prompt_len, dyadic))};
  *evictions = 0;
  for (int step = 0; step < decode_len; ++step) {
    const auto result = sim.decode(rng.row(static_cast<std::size_t>(sim.cached()) + 1, dyadic));
    if (result.evicted) ++*evictions;
    kept.push_back(sim.kept());
  }
  return kept;
}

TEST_F(PolicyProperty, LocalKeepsExactlyTheLastCPositions) {
  Random rng(seed_);
  for (int i = 0; i < 300 && !HasFailure(); ++i) {
    const int prompt_len = rng.uniform(1, 24);
    const int decode_len = rng.uniform(0, 24);
    const int budget = rng.uniform(1, prompt_len + decode_len);
    SCOPED_TRACE("case " + std::to_string(i) + ": " +
                 describe(prompt_len, budget, decode_len, 0.0, false));
    int evictions = 0;
    const auto kept = run(*make(PolicyKind::local, budget), rng, prompt_len, decode_len,
                          rng.uniform(0, 1) == 0, &evictions);
    for (std::size_t step = 0; step < kept.size(); ++step) {
      const int seen = prompt_len + static_cast<int>(step);
      EXPECT_EQ(kept[step], range(std::max(0, seen - budget), seen)) << "after step " << step;
    }
  }
}

TEST_F(PolicyProperty, StreamingKeepsTheSinksPlusTheLastCMinusS) {
  Random rng(seed_);
  for (int i = 0; i < 300 && !HasFailure(); ++i) {
    const int prompt_len = rng.uniform(1, 24);
    const int decode_len = rng.uniform(0, 24);
    const int budget = rng.uniform(1, prompt_len + decode_len);
    const int sinks = rng.uniform(0, std::min(budget - 1, 6));
    SCOPED_TRACE("case " + std::to_string(i) + ": " +
                 describe(prompt_len, budget, decode_len, 0.0, false) +
                 " S=" + std::to_string(sinks));
    int evictions = 0;
    const auto kept = run(*make(PolicyKind::streaming, budget, 0.5, sinks), rng, prompt_len,
                          decode_len, rng.uniform(0, 1) == 0, &evictions);
    for (std::size_t step = 0; step < kept.size(); ++step) {
      const int seen = prompt_len + static_cast<int>(step);
      std::vector<int> expected = range(0, seen);
      if (seen > budget) {
        expected = range(0, sinks);
        for (int p : range(seen - (budget - sinks), seen)) expected.push_back(p);
      }
      EXPECT_EQ(kept[step], expected) << "after step " << step;
    }
  }
}

TEST_F(PolicyProperty, NoPolicyEvictsWhenTheBudgetCoversTheSequence) {
  Random rng(seed_);
  for (int i = 0; i < 200 && !HasFailure(); ++i) {
    const int prompt_len = rng.uniform(1, 24);
    const int decode_len = rng.uniform(0, 24);
    const int budget = prompt_len + decode_len + rng.uniform(0, 3);
    const double recent_fraction = rng.recent_fraction();
    const int sinks = rng.uniform(0, std::min(budget - 1, 6));
    for (PolicyKind kind :
         {PolicyKind::full, PolicyKind::local, PolicyKind::h2o, PolicyKind::streaming}) {
      SCOPED_TRACE("case " + std::to_string(i) + ": " + std::string(policy_name(kind)) + " " +
                   describe(prompt_len, budget, decode_len, recent_fraction, false));
      int evictions = 0;
      const auto kept = run(*make(kind, budget, recent_fraction, sinks), rng, prompt_len,
                            decode_len, rng.uniform(0, 1) == 0, &evictions);
      EXPECT_EQ(evictions, 0);
      for (std::size_t step = 0; step < kept.size(); ++step) {
        EXPECT_EQ(kept[step], range(0, prompt_len + static_cast<int>(step)))
            << "after step " << step;
      }
    }
  }
}

TEST_F(PolicyProperty, FullThrowsOnceTheSequenceOutgrowsItsBudget) {
  Random rng(seed_);
  for (int i = 0; i < 100 && !HasFailure(); ++i) {
    const int prompt_len = rng.uniform(1, 24);
    const int decode_len = rng.uniform(1, 24);
    const int budget = rng.uniform(1, prompt_len + decode_len - 1);
    SCOPED_TRACE("case " + std::to_string(i) + ": " +
                 describe(prompt_len, budget, decode_len, 0.0, false));
    const auto policy = make(PolicyKind::full, budget);
    CacheSimulator sim(*policy);
    const Rows prefill = rng.prefill(prompt_len, false);
    if (prompt_len > budget) {
      EXPECT_THROW(sim.prefill(prefill), Error);
      continue;
    }
    EXPECT_EQ(sim.prefill(prefill), range(0, prompt_len));
    // Steps that keep the cache within C succeed; the one that fills it to C + 1 throws.
    for (int step = 0; step < budget - prompt_len; ++step) {
      EXPECT_FALSE(sim.decode(rng.row(static_cast<std::size_t>(sim.cached()) + 1, false)).evicted);
    }
    EXPECT_THROW(sim.decode(rng.row(static_cast<std::size_t>(sim.cached()) + 1, false)), Error);
  }
}

}  // namespace
}  // namespace offgen
