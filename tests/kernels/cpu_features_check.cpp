// The CPU features the kernels choose their instructions by agree with what Linux says this CPU
// and its saved state support (/proc/cpuinfo lists a flag only when the OS enables it): a wrong
// CPUID bit once turned AVX-512 off on a machine that has it, and every GEMM silently ran at
// half speed.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "kernels/cpu/cpu_features.h"

namespace offgen::kernels::cpu {
namespace {

// The first processor's flags, or none when /proc/cpuinfo cannot be read.
std::set<std::string> cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    std::string flag;
    while (words >> flag) flags.insert(flag);
    return flags;
  }
  return {};
}

TEST(CpuFeatures, AgreeWithTheFlagsLinuxReports) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "x86-64 only";
#else
  const std::set<std::string> flags = cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags";
  const auto has = [&flags](const char* name) { return flags.contains(name); };
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(f.avx512f, has("avx512f"));
  EXPECT_EQ(f.avx512bw_vl, has("avx512f") && has("avx512bw") && has("avx512vl"));
  EXPECT_EQ(f.avx512_vnni, has("avx512f") && has("avx512_vnni"));
  EXPECT_EQ(f.avx512_bf16, has("avx512f") && has("avx512_bf16"));
  // AMX also needs the tile state granted to the process, which Linux gives where it lists it.
  EXPECT_EQ(f.amx_bf16, has("amx_tile") && has("amx_bf16") && has("avx512_bf16"));
  EXPECT_EQ(f.amx_int8, has("amx_tile") && has("amx_int8") && has("avx512_bf16"));
  // And with the compiler's own reading of CPUID and XCR0.
  EXPECT_EQ(f.avx512f, __builtin_cpu_supports("avx512f") != 0);
#endif
}

}  // namespace
}  // namespace offgen::kernels::cpu
