#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <string_view>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace offgen::kernels::cpu {
namespace {

#if defined(__x86_64__)
// Linux's arch_prctl request for the AMX tile data state (XFEATURE 18).
bool tile_state_granted() {
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
#endif

CpuFeatures read_features() {
  CpuFeatures f;
#if defined(__x86_64__)
  // libgcc's check includes the OS's XSAVE of the ymm state.
  f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  // CPUID leaf 7 directly: clang before 16 does not know the AMX names in
  // __builtin_cpu_supports, and avx512bf16 is in sub-leaf 1.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return f;
  f.avx512f = (ebx >> 16 & 1u) != 0;
  f.avx512bw_vl = f.avx512f && (ebx >> 30 & 1u) != 0 && (ebx >> 31 & 1u) != 0;
  f.avx512_vnni = f.avx512f && (ecx >> 11 & 1u) != 0;
  const bool amx_tile = (edx >> 24 & 1u) != 0;
  const bool amx_bf16 = (edx >> 22 & 1u) != 0;
  const bool amx_int8 = (edx >> 25 & 1u) != 0;
  unsigned eax1 = 0, ebx1 = 0, ecx1 = 0, edx1 = 0;
  if (__get_cpuid_count(7, 1, &eax1, &ebx1, &ecx1, &edx1) != 0) {
    f.avx512_bf16 = f.avx512f && (eax1 >> 5 & 1u) != 0;
  }
  // The OS must also save the AVX-512 state (XCR0 bits 5-7 with 1-2): CPUID alone does not say.
  // OSXSAVE is CPUID leaf 1's ECX bit 27 (leaf 7's bit 27 is MOVDIRI, which a CPU with AVX-512
  // may lack: reading it there turned AVX-512 off on such machines).
  unsigned eax_1 = 0, ebx_1 = 0, ecx_1 = 0, edx_1 = 0;
  if (__get_cpuid(1, &eax_1, &ebx_1, &ecx_1, &edx_1) == 0 || (ecx_1 >> 27 & 1u) == 0) {
    return CpuFeatures{};  // no OSXSAVE: no xgetbv
  }
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if ((xcr0_low & 0xe6u) != 0xe6u) {
    f.avx512f = f.avx512bw_vl = f.avx512_bf16 = f.avx512_vnni = false;
    return f;
  }
  if (amx_tile && f.avx512_bf16 && tile_state_granted()) {
    f.amx_bf16 = amx_bf16;
    f.amx_int8 = amx_int8;
  }
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = read_features();
  return features;
}

IsaCap cpu_isa_cap() {
  const char* env = std::getenv("OFFGEN_CPU_ISA");
  const std::string_view cap = env != nullptr ? env : "";
  if (cap == "avx512") return IsaCap::avx512;
  if (cap == "avx2") return IsaCap::avx2;
  if (cap == "portable") return IsaCap::portable;
  return IsaCap::none;
}

#if defined(__x86_64__)
TileConfig full_tiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  return config;
}
#endif

}  // namespace offgen::kernels::cpu
