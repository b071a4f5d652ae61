#include "bench/table.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/core/units.h"

namespace offgen::bench {

std::string format_table(const std::vector<BenchRow>& rows, std::uint64_t kv_memory) {
  std::string out = fmt::format(
      "{:>6} {:>7} {:>5} {:>10} {:>10} {:>10} {:>12} {:>12} {:>12} {:>11} {:>10} {:>8} {:>11} "
      "{:>11} {:>11}",
      "batch", "prompt", "gen", "prefill s", "decode s", "total s", "prefill t/s", "decode t/s",
      "total t/s", "kv cache", "kv/seq", "of full", "kv moved", "w moved", "peak gpu");
  const bool predicted = std::any_of(rows.begin(), rows.end(), [](const BenchRow& r) {
    return r.predicted_tokens_per_second > 0;
  });
  const bool kv_offloaded = std::any_of(rows.begin(), rows.end(),
                                        [](const BenchRow& r) { return r.kv_pcie_per_step > 0; });
  if (kv_offloaded) out += fmt::format(" {:>11} {:>11}", "kv pcie", "peak pinned");
  if (predicted) out += fmt::format(" {:>11} {:>6}", "predicted", "ratio");
  const bool overlap = std::any_of(rows.begin(), rows.end(),
                                   [](const BenchRow& r) { return r.copy_overlap() >= 0; });
  if (overlap) out += fmt::format(" {:>9}", "overlap");
  if (kv_memory > 0) {
    out += fmt::format(" {:>9} {:>9}", "max batch", "full max");
  }
  out += '\n';
  for (const BenchRow& r : rows) {
    out += fmt::format("{:>6} {:>7} {:>5}", r.config.batch, r.config.prompt_len, r.config.gen_len);
    if (!r.error.empty()) {
      out += fmt::format("  {}\n", r.error);
      continue;
    }
    const double of_full = r.full_kv_per_sequence.per_sequence() > 0
                               ? static_cast<double>(r.kv_per_sequence.per_sequence()) /
                                     static_cast<double>(r.full_kv_per_sequence.per_sequence())
                               : 0.0;
    out += fmt::format(
        " {:>10.3f} {:>10.3f} {:>10.3f} {:>12.1f} {:>12.1f} {:>12.1f} {:>11} {:>10} {:>8.3f} "
        "{:>11} {:>11} {:>11}",
        r.prefill_seconds, r.decode_seconds, r.total_seconds(), r.prefill_tokens_per_second(),
        r.decode_tokens_per_second(), r.generated_tokens_per_second(), format_bytes(r.kv_bytes),
        format_bytes(r.kv_per_sequence.per_sequence()), of_full,
        format_bytes(static_cast<std::uint64_t>(r.kv_moved_per_step)),
        format_bytes(static_cast<std::uint64_t>(r.weights_moved_per_step)),
        format_bytes(r.peak_gpu_bytes));
    if (kv_offloaded) {
      out += fmt::format(" {:>11} {:>11}",
                         format_bytes(static_cast<std::uint64_t>(r.kv_pcie_per_step)),
                         format_bytes(r.peak_pinned_bytes));
    }
    if (predicted) {
      const double ratio = r.predicted_tokens_per_second > 0
                               ? r.generated_tokens_per_second() / r.predicted_tokens_per_second
                               : 0.0;
      out += fmt::format(" {:>11.1f} {:>6.2f}", r.predicted_tokens_per_second, ratio);
    }
    if (overlap) {
      const double hidden = r.copy_overlap();
      out += hidden >= 0 ? fmt::format(" {:>8.0f}%", 100.0 * hidden) : fmt::format(" {:>9}", "-");
    }
    if (kv_memory > 0) {
      out += fmt::format(" {:>9} {:>9}", r.kv_per_sequence.largest_batch(kv_memory),
                         r.full_kv_per_sequence.largest_batch(kv_memory));
    }
    out += '\n';
  }
  return out;
}

}  // namespace offgen::bench
