#include "engine/runtime/score_trace.h"

#include <fmt/format.h>

#include <cstdlib>
#include <vector>

#include "engine/core/error.h"

namespace offgen {
namespace {

template <typename T>
std::vector<T> read_back(Device& device, const T* data, std::size_t count) {
  std::vector<T> out(count);
  if (data != nullptr && count > 0) {
    device.copy_async(out.data(), data, count * sizeof(T), device.stream(StreamRole::compute));
  }
  return out;
}

}  // namespace

ScoreTrace::ScoreTrace(Device& device) : device_(device) {
  const char* path = std::getenv("OFFGEN_TRACE_SCORES");
  if (path == nullptr || *path == '\0') return;
  file_.reset(std::fopen(path, "a"));
  OFFGEN_CHECK(file_ != nullptr, "OFFGEN_TRACE_SCORES: cannot open {} for appending", path);
}

void ScoreTrace::dump(std::string_view what, int layer, int batch, int heads, int capacity,
                      const std::int32_t* position, const float* score,
                      const std::int32_t* write_slot, const float* probs, int probs_width) {
  if (!enabled()) return;
  const auto rows = static_cast<std::size_t>(batch) * static_cast<std::size_t>(heads);
  const auto slots = static_cast<std::size_t>(capacity);
  const auto width = probs != nullptr ? static_cast<std::size_t>(probs_width) : 0;
  const auto positions = read_back(device_, position, rows * slots);
  const auto scores = read_back(device_, score, rows * slots);
  const auto writes = read_back(device_, write_slot, rows);
  const auto probabilities = read_back(device_, probs, rows * width);
  device_.stream(StreamRole::compute).synchronize();
  ++calls_;
  const auto h = static_cast<std::size_t>(heads);
  for (std::size_t r = 0; r < rows; ++r) {
    std::string line = fmt::format("{} {} layer {} seq {} head {} write {} |", calls_, what, layer,
                                   r / h, r % h, writes[r]);
    for (std::size_t s = r * slots; s < (r + 1) * slots; ++s) {
      line += fmt::format(" {}:{:.6g}", positions[s], scores[s]);
    }
    if (width > 0) line += " | probs";
    for (std::size_t s = r * width; s < (r + 1) * width; ++s) {
      line += fmt::format(" {:.6g}", probabilities[s]);
    }
    line += '\n';
    std::fputs(line.c_str(), file_.get());
  }
  std::fflush(file_.get());
}

void ScoreTrace::dump_cache(std::string_view what, int layer, int batch, int heads, int capacity,
                            int head_dim, const Half* k, const Half* v, const Half* out,
                            int q_heads) {
  if (!enabled()) return;
  const auto rows = static_cast<std::size_t>(batch) * static_cast<std::size_t>(heads);
  const auto slots = static_cast<std::size_t>(capacity);
  const auto d = static_cast<std::size_t>(head_dim);
  const auto q_rows = static_cast<std::size_t>(batch) * static_cast<std::size_t>(q_heads);
  const auto keys = read_back(device_, k, rows * slots * d);
  const auto values = read_back(device_, v, rows * slots * d);
  const auto outputs = read_back(device_, out, out != nullptr ? q_rows * d : 0);
  device_.stream(StreamRole::compute).synchronize();
  ++calls_;
  const auto sum = [&](const std::vector<Half>& x, std::size_t first) {
    float total = 0.0f;
    for (std::size_t i = first; i < first + d; ++i) total += half_to_float(x[i]);
    return total;
  };
  const auto h = static_cast<std::size_t>(heads);
  for (std::size_t r = 0; r < rows; ++r) {
    std::string line =
        fmt::format("{} {} layer {} seq {} head {} k:v |", calls_, what, layer, r / h, r % h);
    for (std::size_t s = r * slots; s < (r + 1) * slots; ++s) {
      line += fmt::format(" {:.5g}:{:.5g}", sum(keys, s * d), sum(values, s * d));
    }
    line += '\n';
    std::fputs(line.c_str(), file_.get());
  }
  const auto qh = static_cast<std::size_t>(q_heads);
  for (std::size_t b = 0; out != nullptr && b < static_cast<std::size_t>(batch); ++b) {
    std::string line = fmt::format("{} {} layer {} seq {} out |", calls_, what, layer, b);
    for (std::size_t q = b * qh; q < (b + 1) * qh; ++q) {
      line += fmt::format(" {:.5g}", sum(outputs, q * d));
    }
    line += '\n';
    std::fputs(line.c_str(), file_.get());
  }
  std::fflush(file_.get());
}

}  // namespace offgen
