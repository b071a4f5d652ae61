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

}  // namespace offgen
