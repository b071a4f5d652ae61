// Parity of add_position_embeddings against the reference, padding's position -1 included.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;

class AddPositionEmbeddingsParity : public ParityTest {};

TEST_P(AddPositionEmbeddingsParity, MatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  constexpr int kOffset = 2;  // OPT
  constexpr int kPositions = 40;
  for (const int dim : {8, 13, 768}) {
    for (const std::int64_t n : {1, 3, 17}) {
      SCOPED_TRACE("dim=" + std::to_string(dim) + " n=" + std::to_string(n));
      const auto table = rng.halves((kPositions + kOffset) * dim, -1, 1);
      const auto x = rng.halves(n * dim, -2, 2);
      std::vector<std::int32_t> positions(n);
      for (auto& p : positions) p = rng.integer(-1, kPositions - 1);
      positions.front() = -1;  // padding reads row offset - 1
      Guarded<Half> actual(x);
      std::vector<Half> expected = x;
      kernels::PositionEmbeddingArgs args{.x = actual.data(),
                                          .table = table.data(),
                                          .positions = positions.data(),
                                          .rows = n,
                                          .dim = dim,
                                          .offset = kOffset};
      impl().add_position_embeddings(args);
      args.x = expected.data();
      ref::add_position_embeddings(args);
      EXPECT_TRUE(actual.guards_intact());
      EXPECT_TRUE(all_close(actual.values(), expected, kSumOfTwoHalves));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, AddPositionEmbeddingsParity,
                         ::testing::ValuesIn(kernel_sets_under_test()), kernel_set_name);

}  // namespace
}  // namespace offgen::test
