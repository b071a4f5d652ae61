// How busy the rest of the machine was while offgen measured it: the CPU time every process used
// (/proc/stat) less this process's own (getrusage), per second of wall time. A calibration taken
// while other processes ran measures their share of the cores, not the machine, and every plan
// and prediction made from it inherits the error; calibrate says so when it happens.
#pragma once

#include <optional>
#include <string_view>

namespace offgen {

// CPU time in seconds: of every process (all CPUs' busy time), of this process, and the wall
// clock, at one moment.
struct CpuTimes {
  double all_busy = 0;
  double own = 0;
  double wall = 0;
  bool known = false;  // false where /proc/stat cannot be read (not Linux)
};

CpuTimes read_cpu_times();

// The busy seconds in /proc/stat's text (its first, all-CPU line: user, nice, system, irq,
// softirq and steal; idle and iowait are not busy), given clock ticks per second; nullopt when the
// text has no such line.
std::optional<double> busy_seconds(std::string_view proc_stat, double ticks_per_second);

// Cores' worth of CPU time that other processes used per second between the two readings (0 when
// either is unknown or no time passed).
double other_busy_cores(const CpuTimes& before, const CpuTimes& after);

// Above this many cores of other processes' load, a measurement is called busy.
constexpr double kBusyCores = 0.25;

}  // namespace offgen
