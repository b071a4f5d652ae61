#include "bench/rank_rows.h"

#include <algorithm>

namespace offgen::bench {

nlohmann::json row_measurement(const BenchRow& r) {
  return {{"gpu_batch", r.gpu_batch},
          {"num_gpu_batches", r.num_gpu_batches},
          {"measured", r.measured},
          {"needed_gpu_bytes", r.needed_gpu_bytes},
          {"needed_pinned_bytes", r.needed_pinned_bytes},
          {"prefill_seconds", r.prefill_seconds},
          {"decode_seconds", r.decode_seconds},
          {"kv_bytes", r.kv_bytes},
          {"kv_moved_per_step", r.kv_moved_per_step},
          {"weights_moved_per_step", r.weights_moved_per_step},
          {"kv_pcie_per_step", r.kv_pcie_per_step},
          {"predicted_tokens_per_second", r.predicted_tokens_per_second},
          {"compute_busy_seconds", r.compute_busy_seconds},
          {"weight_copy_busy_seconds", r.weight_copy_busy_seconds},
          {"peak_gpu_bytes", r.peak_gpu_bytes},
          {"peak_pinned_bytes", r.peak_pinned_bytes},
          {"error", r.error}};
}

BenchRow with_measurement(BenchRow r, const nlohmann::json& m) {
  r.gpu_batch = m.at("gpu_batch").get<int>();
  r.num_gpu_batches = m.at("num_gpu_batches").get<int>();
  r.measured = m.at("measured").get<bool>();
  r.needed_gpu_bytes = m.at("needed_gpu_bytes").get<std::uint64_t>();
  r.needed_pinned_bytes = m.at("needed_pinned_bytes").get<std::uint64_t>();
  r.prefill_seconds = m.at("prefill_seconds").get<double>();
  r.decode_seconds = m.at("decode_seconds").get<double>();
  r.kv_bytes = m.at("kv_bytes").get<std::uint64_t>();
  r.kv_moved_per_step = m.at("kv_moved_per_step").get<double>();
  r.weights_moved_per_step = m.at("weights_moved_per_step").get<double>();
  r.kv_pcie_per_step = m.at("kv_pcie_per_step").get<double>();
  r.predicted_tokens_per_second = m.at("predicted_tokens_per_second").get<double>();
  r.compute_busy_seconds = m.at("compute_busy_seconds").get<double>();
  r.weight_copy_busy_seconds = m.at("weight_copy_busy_seconds").get<double>();
  r.peak_gpu_bytes = m.at("peak_gpu_bytes").get<std::uint64_t>();
  r.peak_pinned_bytes = m.at("peak_pinned_bytes").get<std::uint64_t>();
  r.error = m.at("error").get<std::string>();
  return r;
}

BenchRow sum_of_ranks(const std::vector<BenchRow>& rows) {
  BenchRow sum = rows.front();
  sum.rank = "sum";
  sum.config.batch = 0;
  sum.measured = true;
  sum.error.clear();
  sum.prefill_seconds = sum.decode_seconds = 0;
  sum.kv_bytes = sum.peak_gpu_bytes = sum.peak_pinned_bytes = 0;
  sum.needed_gpu_bytes = sum.needed_pinned_bytes = 0;
  sum.kv_moved_per_step = sum.weights_moved_per_step = sum.kv_pcie_per_step = 0;
  sum.predicted_tokens_per_second = 0;
  // Busy seconds of different devices do not add up to one overlap.
  sum.compute_busy_seconds = sum.weight_copy_busy_seconds = -1;
  for (const BenchRow& r : rows) {
    sum.config.batch += r.config.batch;
    sum.measured = sum.measured && r.measured;
    if (sum.error.empty() && !r.error.empty()) sum.error = r.error;
    sum.prefill_seconds = std::max(sum.prefill_seconds, r.prefill_seconds);
    sum.decode_seconds = std::max(sum.decode_seconds, r.decode_seconds);
    sum.kv_bytes += r.kv_bytes;
    sum.peak_gpu_bytes += r.peak_gpu_bytes;
    sum.peak_pinned_bytes += r.peak_pinned_bytes;
    sum.needed_gpu_bytes += r.needed_gpu_bytes;
    sum.needed_pinned_bytes += r.needed_pinned_bytes;
    sum.kv_moved_per_step += r.kv_moved_per_step;
    sum.weights_moved_per_step += r.weights_moved_per_step;
    sum.kv_pcie_per_step += r.kv_pcie_per_step;
    sum.predicted_tokens_per_second += r.predicted_tokens_per_second;
  }
  return sum;
}

}  // namespace offgen::bench
