#include "scheduler/machine_load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

namespace offgen {

std::optional<double> busy_seconds(std::string_view proc_stat, double ticks_per_second) {
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice"
  const std::size_t end = proc_stat.find('\n');
  std::string_view line = proc_stat.substr(0, end);
  if (line.substr(0, 4) != "cpu " || ticks_per_second <= 0) return std::nullopt;
  line.remove_prefix(4);
  double fields[8] = {};
  int read = 0;
  while (read < 8) {
    const std::size_t start = line.find_first_not_of(' ');
    if (start == std::string_view::npos) break;
    line.remove_prefix(start);
    unsigned long long value = 0;
    const auto [next, error] = std::from_chars(line.data(), line.data() + line.size(), value);
    if (error != std::errc{}) break;
    fields[read++] = static_cast<double>(value);
    line.remove_prefix(static_cast<std::size_t>(next - line.data()));
  }
  if (read < 4) return std::nullopt;
  // user, nice, system, (idle, iowait skipped), irq, softirq, steal
  const double busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7];
  return busy / ticks_per_second;
}

CpuTimes read_cpu_times() {
  CpuTimes t;
  t.wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::ifstream in("/proc/stat");
  std::stringstream text;
  text << in.rdbuf();
  const long ticks = ::sysconf(_SC_CLK_TCK);
  const std::optional<double> busy = busy_seconds(text.str(), static_cast<double>(ticks));
  rusage usage{};
  if (!busy || ::getrusage(RUSAGE_SELF, &usage) != 0) return t;
  const auto seconds = [](const timeval& v) {
    return static_cast<double>(v.tv_sec) + static_cast<double>(v.tv_usec) * 1e-6;
  };
  t.all_busy = *busy;
  t.own = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  t.known = true;
  return t;
}

double other_busy_cores(const CpuTimes& before, const CpuTimes& after) {
  const double wall = after.wall - before.wall;
  if (!before.known || !after.known || wall <= 0) return 0;
  const double others = (after.all_busy - before.all_busy) - (after.own - before.own);
  return std::max(0.0, others / wall);
}

}  // namespace offgen
