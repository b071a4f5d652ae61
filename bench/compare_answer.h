// The first paragraph of a compare report: which policy keeps quality at which budget on this
// model and workload, and what that buys in batch size and throughput against full. The rule a
// cell must meet to "keep quality" is stated in the paragraph itself (kQualityRule).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bench/compare.h"

namespace offgen::bench {

// Each task of the cell pooled over its lengths and depths, in the order the tasks ran.
std::vector<PooledTask> pool_tasks(const CompareCell& cell);

// How a cell's quality compares with full's: whether every measure stays within the rule, and a
// phrase naming its worst measure ("passkey 35% vs full's 98%").
struct QualityVsFull {
  bool measured = false;  // any quality measure exists
  bool keeps = false;
  double worst_margin =
      0.0;  // how far inside (>= 0) or outside (< 0) the rule the worst measure is
  std::string worst;
};
QualityVsFull quality_vs_full(const CompareCell& cell, const CompareCell& full);

// The rule, in words, for the report.
extern const char* const kQualityRule;

// The paragraph (markdown, no heading).
std::string compare_answer(const CompareResult& result);

}  // namespace offgen::bench
