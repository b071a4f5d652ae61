// The report folder `offgen compare` writes: results.json (every number, for scripts),
// report.md (tables that stand alone), and report.html (the same tables and the charts:
// throughput, largest batch, KV bytes moved and quality, each against the budget), drawn by
// tools/plot_report.py with matplotlib. Without python3 + matplotlib the HTML report carries the
// tables and says how to get the charts.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/compare.h"

namespace offgen::bench {

nlohmann::ordered_json compare_json(const CompareResult& result, const CompareOptions& options);
std::string compare_markdown(const CompareResult& result, const CompareOptions& options);

struct ReportFiles {
  std::filesystem::path results_json, markdown, html;
  bool charts = false;      // report.html has the charts
  std::string charts_note;  // why not, when it has none
};

// Writes results.json and report.md into `folder` (created if missing), each replaced at once
// (bench/rewritten_file.h): compare writes them after every cell, so they always hold the cells
// that finished, marked incomplete until the grid is done. Throws offgen::Error naming a file
// that cannot be written.
ReportFiles write_compare_tables(const CompareResult& result, const CompareOptions& options,
                                 const std::filesystem::path& folder);
// The same, and report.html. plot_script: tools/plot_report.py (empty or missing: no charts).
ReportFiles write_compare_report(const CompareResult& result, const CompareOptions& options,
                                 const std::filesystem::path& folder,
                                 const std::filesystem::path& plot_script);

}  // namespace offgen::bench
