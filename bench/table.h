// Terminal table of benchmark rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/throughput.h"

namespace offgen::bench {

// kv/seq: KV cache plus policy state per sequence; "of full": its ratio to `full` at the same
// lengths; "kv moved/step": KV bytes read and written per decode step; "w moved/step": weight
// bytes copied host-to-device per step (offloaded weights); with a profile, the cost model's
// predicted total tokens/s and measured / predicted; with streamed weights on a device that
// measures stream busy time, "overlap": the share of the weight-copy time hidden behind compute.
// With kv_memory > 0, two more columns give the largest batch whose KV fits in kv_memory bytes,
// under this policy and `full`.
std::string format_table(const std::vector<BenchRow>& rows, std::uint64_t kv_memory = 0);

// The same table a row at a time (bench prints each row as it finishes), with its optional
// columns chosen before the rows exist.
struct TableColumns {
  bool kv_offloaded = false;    // "kv pcie", "peak pinned"
  bool predicted = false;       // "predicted", "ratio"
  bool overlap = false;         // "overlap"
  std::uint64_t kv_memory = 0;  // > 0: "max batch", "full max"
  bool ranks = false;           // "rank" first (bench under MPI)
};
// The columns format_table gives `rows`.
TableColumns table_columns(const std::vector<BenchRow>& rows, std::uint64_t kv_memory = 0);
std::string format_header(const TableColumns& columns);                    // one line
std::string format_row(const BenchRow& row, const TableColumns& columns);  // one line

// What every row of one bench run shares, so a row read on its own (a CSV line pasted elsewhere)
// still says what it measured: the model, the device, offgen's version and the run's date.
struct RunInfo {
  std::string model;
  std::string device;
  std::string version;
  std::string date;  // ISO 8601, UTC
};

// Every row with every field (bench --json), and the same as CSV (bench --csv): the run's info,
// then the row's; rows that did not run carry their error and the memory they would need; status
// is measured, projected (the cost model's number only) or not run. With kv_memory > 0, the
// table's "max batch" and "full max" too.
nlohmann::ordered_json rows_json(const std::vector<BenchRow>& rows, const RunInfo& run = {},
                                 std::uint64_t kv_memory = 0);
std::string rows_csv(const std::vector<BenchRow>& rows, const RunInfo& run = {},
                     std::uint64_t kv_memory = 0);

}  // namespace offgen::bench
