// Terminal table of benchmark rows.
#pragma once

#include <string>
#include <vector>

#include "bench/throughput.h"

namespace offgen::bench {

std::string format_table(const std::vector<BenchRow>& rows);

}  // namespace offgen::bench
