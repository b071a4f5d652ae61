#include "bench/table.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/core/units.h"

namespace offgen::bench {

nlohmann::ordered_json rows_json(const std::vector<BenchRow>& rows, const RunInfo& run,
                                 std::uint64_t kv_memory) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const BenchRow& r : rows) {
    nlohmann::ordered_json row = nlohmann::ordered_json::object();
    for (const auto& [key, value] : {std::pair{"model", &run.model},
                                     {"device", &run.device},
                                     {"offgen_version", &run.version},
                                     {"date", &run.date}}) {
      if (!value->empty()) row[key] = *value;
    }
    if (!r.rank.empty()) row["rank"] = r.rank;
    row.update(nlohmann::ordered_json{
        {"policy", r.policy},
        {"kv_budget", r.kv_budget},
        {"gpu_batch_size", r.gpu_batch},
        {"num_gpu_batches", r.num_gpu_batches},
        {"batch", r.config.batch},
        {"prompt_len", r.config.prompt_len},
        {"gen_len", r.config.gen_len},
        {"temperature", r.config.sampling.temperature},
        {"top_k", r.config.sampling.top_k},
        {"top_p", r.config.sampling.top_p},
        {"weight_storage", storage_name(r.compression.weights)},
        {"kv_storage", storage_name(r.compression.kv)},
        {"prefill_math", kernels::prefill_math_name(r.prefill_math)},
        {"status",
         r.measured ? "measured" : (r.predicted_tokens_per_second > 0 ? "projected" : "not run")},
        {"error",
         r.error.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.error)}});
    if (r.measured) {
      row["prefill_seconds"] = r.prefill_seconds;
      row["decode_seconds"] = r.decode_seconds;
      row["total_seconds"] = r.total_seconds();
      row["prefill_tokens_per_second"] = r.prefill_tokens_per_second();
      row["decode_tokens_per_second"] = r.decode_tokens_per_second();
      row["generated_tokens_per_second"] = r.generated_tokens_per_second();
      row["kv_cache_bytes"] = r.kv_bytes;
      row["kv_bytes_moved_per_step"] = r.kv_moved_per_step;
      row["kv_pcie_bytes_per_step"] = r.kv_pcie_per_step;
      row["weight_bytes_moved_per_step"] = r.weights_moved_per_step;
      row["peak_gpu_bytes"] = r.peak_gpu_bytes;
      row["peak_pinned_bytes"] = r.peak_pinned_bytes;
      row["useful_token_slots"] = r.slots.useful;
      row["computed_token_slots"] = r.slots.computed();
      row["token_slot_use"] = r.slots.efficiency();
      const double overlap = r.copy_overlap();
      row["weight_copy_overlap"] =
          overlap >= 0 ? nlohmann::ordered_json(overlap) : nlohmann::ordered_json(nullptr);
    } else {
      row["needed_gpu_bytes"] = r.needed_gpu_bytes;
      row["needed_pinned_bytes"] = r.needed_pinned_bytes;
    }
    row["kv_bytes_per_sequence"] = r.kv_per_sequence.per_sequence();
    if (kv_memory > 0 && r.error.empty()) {
      row["max_batch"] = r.kv_per_sequence.largest_batch(kv_memory);
      row["full_max_batch"] = r.full_kv_per_sequence.largest_batch(kv_memory);
    }
    row["predicted_tokens_per_second"] = r.predicted_tokens_per_second > 0
                                             ? nlohmann::ordered_json(r.predicted_tokens_per_second)
                                             : nlohmann::ordered_json(nullptr);
    out.push_back(row);
  }
  return out;
}

std::string rows_csv(const std::vector<BenchRow>& rows, const RunInfo& run,
                     std::uint64_t kv_memory) {
  const nlohmann::ordered_json json = rows_json(rows, run, kv_memory);
  // Columns: the union of every row's keys, in first-seen order.
  std::vector<std::string> columns;
  for (const auto& row : json) {
    for (const auto& [key, value] : row.items()) {
      if (std::find(columns.begin(), columns.end(), key) == columns.end()) columns.push_back(key);
    }
  }
  auto cell = [](const nlohmann::ordered_json& v) {
    if (v.is_null()) return std::string();
    std::string text = v.is_string() ? v.get<std::string>() : v.dump();
    if (text.find_first_of(",\"\n") == std::string::npos) return text;
    std::string quoted = "\"";
    for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    return quoted + "\"";
  };
  std::string out;
  for (std::size_t i = 0; i < columns.size(); ++i) out += (i ? "," : "") + columns[i];
  out += '\n';
  for (const auto& row : json) {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      if (i) out += ',';
      if (row.contains(columns[i])) out += cell(row[columns[i]]);
    }
    out += '\n';
  }
  return out;
}

TableColumns table_columns(const std::vector<BenchRow>& rows, std::uint64_t kv_memory) {
  TableColumns columns;
  columns.kv_offloaded = std::any_of(rows.begin(), rows.end(),
                                     [](const BenchRow& r) { return r.kv_pcie_per_step > 0; });
  columns.predicted = std::any_of(rows.begin(), rows.end(), [](const BenchRow& r) {
    return r.predicted_tokens_per_second > 0;
  });
  columns.overlap = std::any_of(rows.begin(), rows.end(),
                                [](const BenchRow& r) { return r.copy_overlap() >= 0; });
  columns.kv_memory = kv_memory;
  columns.ranks =
      std::any_of(rows.begin(), rows.end(), [](const BenchRow& r) { return !r.rank.empty(); });
  return columns;
}

std::string format_header(const TableColumns& columns) {
  std::string out = columns.ranks ? fmt::format("{:>5} ", "rank") : std::string();
  out += fmt::format(
      "{:>9} {:>6} {:>9} {:>6} {:>7} {:>5} {:>10} {:>10} {:>10} {:>12} {:>12} {:>12} {:>11} "
      "{:>10} {:>8} {:>13} {:>12} {:>11}",
      "policy", "budget", "block", "batch", "prompt", "gen", "prefill s", "decode s", "total s",
      "prefill t/s", "decode t/s", "total t/s", "kv cache", "kv/seq", "of full", "kv moved/step",
      "w moved/step", "peak gpu");
  if (columns.kv_offloaded) out += fmt::format(" {:>13} {:>11}", "kv pcie/step", "peak pinned");
  if (columns.predicted) out += fmt::format(" {:>11} {:>6}", "predicted", "ratio");
  if (columns.overlap) out += fmt::format(" {:>9}", "overlap");
  if (columns.kv_memory > 0) out += fmt::format(" {:>9} {:>9}", "max batch", "full max");
  return out + '\n';
}

std::string format_row(const BenchRow& r, const TableColumns& columns) {
  std::string out = columns.ranks ? fmt::format("{:>5} ", r.rank) : std::string();
  out += fmt::format("{:>9} {:>6} {:>9} {:>6} {:>7} {:>5}", r.policy,
                     r.kv_budget.empty() ? std::string("-") : r.kv_budget,
                     fmt::format("{}x{}", r.gpu_batch, r.num_gpu_batches), r.config.batch,
                     r.config.prompt_len, r.config.gen_len);
  if (!r.error.empty()) {
    out += fmt::format("  {}", r.error);
    if (r.predicted_tokens_per_second > 0) {
      out += fmt::format(" — projected {:.1f} tokens/s", r.predicted_tokens_per_second);
    }
    return out + '\n';
  }
  const double of_full = r.full_kv_per_sequence.per_sequence() > 0
                             ? static_cast<double>(r.kv_per_sequence.per_sequence()) /
                                   static_cast<double>(r.full_kv_per_sequence.per_sequence())
                             : 0.0;
  out += fmt::format(
      " {:>10.3f} {:>10.3f} {:>10.3f} {:>12.1f} {:>12.1f} {:>12.1f} {:>11} {:>10} {:>8.3f} "
      "{:>13} {:>12} {:>11}",
      r.prefill_seconds, r.decode_seconds, r.total_seconds(), r.prefill_tokens_per_second(),
      r.decode_tokens_per_second(), r.generated_tokens_per_second(), format_bytes(r.kv_bytes),
      format_bytes(r.kv_per_sequence.per_sequence()), of_full,
      format_bytes(static_cast<std::uint64_t>(r.kv_moved_per_step)),
      format_bytes(static_cast<std::uint64_t>(r.weights_moved_per_step)),
      format_bytes(r.peak_gpu_bytes));
  if (columns.kv_offloaded) {
    out +=
        fmt::format(" {:>13} {:>11}", format_bytes(static_cast<std::uint64_t>(r.kv_pcie_per_step)),
                    format_bytes(r.peak_pinned_bytes));
  }
  if (columns.predicted) {
    const double ratio = r.predicted_tokens_per_second > 0
                             ? r.generated_tokens_per_second() / r.predicted_tokens_per_second
                             : 0.0;
    out += fmt::format(" {:>11.1f} {:>6.2f}", r.predicted_tokens_per_second, ratio);
  }
  if (columns.overlap) {
    const double hidden = r.copy_overlap();
    out += hidden >= 0 ? fmt::format(" {:>8.0f}%", 100.0 * hidden) : fmt::format(" {:>9}", "-");
  }
  if (columns.kv_memory > 0) {
    out += fmt::format(" {:>9} {:>9}", r.kv_per_sequence.largest_batch(columns.kv_memory),
                       r.full_kv_per_sequence.largest_batch(columns.kv_memory));
  }
  return out + '\n';
}

std::string format_table(const std::vector<BenchRow>& rows, std::uint64_t kv_memory) {
  const TableColumns columns = table_columns(rows, kv_memory);
  std::string out = format_header(columns);
  for (const BenchRow& r : rows) out += format_row(r, columns);
  return out;
}

}  // namespace offgen::bench
