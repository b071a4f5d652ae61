#include "bench/table.h"

#include <fmt/format.h>

#include "engine/core/units.h"

namespace offgen::bench {

std::string format_table(const std::vector<BenchRow>& rows) {
  std::string out =
      fmt::format("{:>6} {:>7} {:>5} {:>10} {:>10} {:>10} {:>12} {:>12} {:>12} {:>11} {:>11}\n",
                  "batch", "prompt", "gen", "prefill s", "decode s", "total s", "prefill t/s",
                  "decode t/s", "total t/s", "kv cache", "peak gpu");
  for (const BenchRow& r : rows) {
    if (!r.error.empty()) {
      out += fmt::format("{:>6} {:>7} {:>5}  {}\n", r.config.batch, r.config.prompt_len,
                         r.config.gen_len, r.error);
      continue;
    }
    out += fmt::format(
        "{:>6} {:>7} {:>5} {:>10.3f} {:>10.3f} {:>10.3f} {:>12.1f} {:>12.1f} {:>12.1f} {:>11} "
        "{:>11}\n",
        r.config.batch, r.config.prompt_len, r.config.gen_len, r.prefill_seconds, r.decode_seconds,
        r.total_seconds(), r.prefill_tokens_per_second(), r.decode_tokens_per_second(),
        r.generated_tokens_per_second(), format_bytes(r.kv_bytes), format_bytes(r.peak_gpu_bytes));
  }
  return out;
}

}  // namespace offgen::bench
