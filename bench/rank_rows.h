// bench under MPI (`mpirun -n N offgen bench`): every rank runs each row at the same time on its
// own engine; rank 0 gathers what each measured and reports a row per rank and their sum. The
// sum is the job's: every rank's batch, and the slowest rank's seconds (it decides when the job
// ends), so its tokens/s is what N ranks deliver together.
#pragma once

#include <nlohmann/json.hpp>

#include <vector>

#include "bench/throughput.h"

namespace offgen::bench {

// What a rank measured for a row (every field that differs between ranks running the same case).
nlohmann::json row_measurement(const BenchRow& row);
// `row` (the case, as every rank ran it) with the measurement of another rank.
BenchRow with_measurement(BenchRow row, const nlohmann::json& measurement);

// The job's row from the rows of every rank (same case; rank set to "sum"): batches, memory and
// bytes moved summed, seconds the slowest rank's; an error if any rank had one.
BenchRow sum_of_ranks(const std::vector<BenchRow>& rows);

}  // namespace offgen::bench
