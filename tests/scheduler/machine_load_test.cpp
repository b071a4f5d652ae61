// The machine-load reading calibrate warns with: /proc/stat's busy time parsed as the kernel
// writes it, and other processes' load as all busy time less this process's own per second.
#include <gtest/gtest.h>

#include "scheduler/machine_load.h"

namespace offgen {
namespace {

TEST(MachineLoad, BusySecondsAreUserNiceSystemIrqSoftirqAndSteal) {
  // user nice system idle iowait irq softirq steal guest guest_nice, in ticks of 1/100 s.
  const char* stat =
      "cpu  1000 20 300 90000 400 5 6 7 0 0\n"
      "cpu0 500 10 150 45000 200 2 3 3 0 0\n";
  EXPECT_DOUBLE_EQ(busy_seconds(stat, 100).value(), (1000 + 20 + 300 + 5 + 6 + 7) / 100.0);
  EXPECT_DOUBLE_EQ(busy_seconds("cpu  10 0 10 500\n", 100).value(), 0.2);  // old kernels: 4 fields
  EXPECT_FALSE(busy_seconds("cpu0 1 2 3 4\n", 100));                       // not the all-CPU line
  EXPECT_FALSE(busy_seconds("intr 5\n", 100));
  EXPECT_FALSE(busy_seconds("cpu  1 2\n", 100));
  EXPECT_FALSE(busy_seconds("", 100));
}

TEST(MachineLoad, OtherProcessesLoadIsAllBusyTimeLessOurOwnPerSecond) {
  const CpuTimes before{.all_busy = 100, .own = 10, .wall = 1000, .known = true};
  const CpuTimes after{.all_busy = 103, .own = 11, .wall = 1002, .known = true};
  EXPECT_DOUBLE_EQ(other_busy_cores(before, after), 1.0);  // (3 - 1) s over 2 s
  CpuTimes unknown = after;
  unknown.known = false;
  EXPECT_EQ(other_busy_cores(before, unknown), 0.0);
  const CpuTimes only_us{.all_busy = 102, .own = 12, .wall = 1002, .known = true};
  EXPECT_EQ(other_busy_cores(before, only_us), 0.0);  // never negative
}

TEST(MachineLoad, ThisMachinesReadingsHoldTogether) {
  const CpuTimes now = read_cpu_times();
  if (!now.known) GTEST_SKIP() << "no /proc/stat";
  EXPECT_GT(now.all_busy, 0.0);
  EXPECT_GE(now.all_busy + 0.1, now.own) << "every process's time includes ours";
  EXPECT_GE(other_busy_cores(now, read_cpu_times()), 0.0);
}

}  // namespace
}  // namespace offgen
