// What this CPU offers the matrix kernels beyond AVX-512: the bf16 and int8 dot-product
// instructions and Intel's AMX tile unit. AMX needs more than CPUID: Linux lends a process the
// tile state (8 KiB per thread of saved registers) only when it asks, so amx_bf16() asks once
// and reports whether the kernel agreed.
#pragma once

#include <cstdint>

namespace offgen::kernels::cpu {

struct CpuFeatures {
  bool avx2_fma = false;  // the AVX2 kernels (AVX2 with FMA, the OS saving the ymm state)
  bool avx512f = false;
  bool avx512bw_vl = false;  // 16-bit element masks and 256-bit EVEX forms (every core but KNL)
  bool avx512_bf16 = false;  // vdpbf16ps, vcvtne2ps2bf16
  bool avx512_vnni = false;  // vpdpbusd
  bool amx_bf16 = false;     // tdpbf16ps, with the tile state granted to this process
  bool amx_int8 = false;     // tdpbusd, likewise

  // What bf16 prefill (PrefillMath::bf16) needs: vdpbf16ps and the masked 16-bit loads its
  // packing uses.
  bool bf16_gemm() const { return avx512_bf16 && avx512bw_vl; }
};

// Read once per process (the AMX request included).
const CpuFeatures& cpu_features();

// OFFGEN_CPU_ISA, which caps the kernels a CPU call picks so that tests (which flip it, so it is
// read per call) cover the fallbacks on any x86 machine: avx512 leaves AMX out, avx2 every
// AVX-512 kernel, portable every vector ISA. Unset or any other value: no cap.
enum class IsaCap { none, avx512, avx2, portable };
IsaCap cpu_isa_cap();

#if defined(__x86_64__)
// The tile configuration LDTILECFG reads: palette 1, per tile its rows and bytes per row.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

// All eight tiles at their largest: 16 rows of 64 bytes.
TileConfig full_tiles();
#endif

}  // namespace offgen::kernels::cpu
