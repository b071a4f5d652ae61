// Sampled generation as users run it: OPT's real head size (50272 rows) beside a tokenizer with
// fewer entries, mixed prompt lengths in one batch, and a request's tokens independent of its
// batch-mates — greedy and seeded sampling alike.
#include <gtest/gtest.h>

#include <vector>

#include "engine/runtime/engine.h"
#include "tests/engine/real_vocab_model.h"

namespace offgen {
namespace {

std::vector<GenerationRequest> mixed_requests() {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 12; ++i) {
    GenerationRequest r;
    r.prompt = {2};
    for (int t = 0; t < 1 + (i * 7) % 23; ++t) r.prompt.push_back(4 + (i * 31 + t * 17) % 990);
    r.max_tokens = 4 + i % 9;
    r.seed = 1000 + static_cast<std::uint64_t>(i);
    r.ignore_eos = true;
    switch (i % 4) {
      case 0:
        r.sampling = {0.0f, 0, 1.0f};  // greedy
        break;
      case 1:
        r.sampling = {1.0f, 0, 1.0f};
        break;
      case 2:
        r.sampling = {1.0f, 0, 0.9f};
        break;
      case 3:
        r.sampling = {0.7f, 40, 0.95f};
        break;
    }
    requests.push_back(r);
  }
  return requests;
}

class SampledGeneration : public ::testing::Test {
 protected:
  void SetUp() override { test::write_real_vocab_model(dir_.path()); }
  Engine engine(int batch) {
    EngineOptions options;
    options.model = dir_.path().string();
    options.device = DeviceChoice::cpu;
    options.max_batch = batch;
    return Engine(options);
  }
  test::TempDir dir_;
};

TEST_F(SampledGeneration, EverySampledIdHasATokenizerEntry) {
  // With random weights nearly all of the mass sits on the 49272 ids the tokenizer lacks: none
  // may be drawn, and every result decodes.
  Engine e = engine(8);
  ASSERT_NE(e.tokenizer(), nullptr);
  const auto requests = mixed_requests();
  const auto results = e.generate(requests);
  int sampled = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].error.empty()) << results[i].error;
    ASSERT_EQ(results[i].tokens.size(), static_cast<std::size_t>(requests[i].max_tokens));
    if (requests[i].sampling.temperature == 0.0f) continue;
    for (std::int32_t id : results[i].tokens) {
      EXPECT_TRUE(e.tokenizer()->has_id(id)) << "request " << i << " drew id " << id;
      ++sampled;
    }
    EXPECT_NO_THROW(e.tokenizer()->decode(results[i].tokens));
  }
  EXPECT_GT(sampled, 50);
}

TEST_F(SampledGeneration, ARequestsTokensDoNotDependOnItsBatchMates) {
  const auto requests = mixed_requests();
  Engine together = engine(8);
  const auto batched = together.generate(requests);
  Engine single = engine(1);
  // Alone, and in reverse order among others (other neighbours, other padding).
  std::vector<GenerationRequest> reversed(requests.rbegin(), requests.rend());
  Engine mixed = engine(5);
  const auto reversed_results = mixed.generate(reversed);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto alone = single.generate(std::span(&requests[i], 1));
    EXPECT_EQ(alone[0].tokens, batched[i].tokens) << "request " << i;
    EXPECT_EQ(reversed_results[requests.size() - 1 - i].tokens, batched[i].tokens)
        << "request " << i;
  }
}

TEST_F(SampledGeneration, DifferentSeedsDrawDifferentTokens) {
  auto requests = mixed_requests();
  Engine e = engine(8);
  const auto first = e.generate(requests);
  for (auto& r : requests) r.seed += 77;
  const auto second = e.generate(requests);
  int differ = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].sampling.temperature == 0.0f) {
      EXPECT_EQ(first[i].tokens, second[i].tokens);  // greedy takes no draw
    } else {
      differ += first[i].tokens != second[i].tokens;
    }
  }
  EXPECT_GE(differ, 6);
}

}  // namespace
}  // namespace offgen
