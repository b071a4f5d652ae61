// Parity of gather_rows (the token embedding lookup, and the head's row pick) against the
// reference: rows copied bit for bit.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;

class GatherRowsParity : public ParityTest {};

TEST_P(GatherRowsParity, CopiesRows) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  constexpr std::int64_t kTableRows = 50;
  for (const int dim : {8, 13, 768}) {
    for (const std::int64_t n : {1, 3, 17}) {
      SCOPED_TRACE("dim=" + std::to_string(dim) + " n=" + std::to_string(n));
      const auto table = rng.halves(kTableRows * dim, -1, 1);
      std::vector<std::int32_t> ids(n);
      for (auto& id : ids) id = rng.integer(0, kTableRows - 1);
      ids.front() = kTableRows - 1;  // the last row, and the first
      ids.back() = 0;
      Guarded<Half> out(n * dim, half_nan());
      std::vector<Half> expected(n * dim);
      kernels::GatherRowsArgs args{.table = table.data(),
                                   .ids = ids.data(),
                                   .out = out.data(),
                                   .table_rows = kTableRows,
                                   .rows = n,
                                   .dim = dim};
      impl().gather_rows(args);
      args.out = expected.data();
      ref::gather_rows(args);
      EXPECT_TRUE(out.guards_intact());
      EXPECT_TRUE(bitwise_equal(out.values(), expected));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, GatherRowsParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
