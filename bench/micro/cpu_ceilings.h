// What this CPU can do at most, measured on it: the peak rate of each dot-product instruction a
// kernel could use (fp32 FMA, bf16 pairs into fp32, int8 quads into int32) from loops that touch
// no memory, on every core at once, and the rate all cores read memory at. The micro benchmarks
// print each kernel's rate as a fraction of the ceiling that bounds it, so a number says how far
// from the hardware a kernel is, not only how fast it is on this machine today.
#pragma once

namespace offgen::bench {

struct CpuCeilings {
  double fp32_fma_flops = 0;  // vfmadd231ps on 512 bits: 32 FLOP per instruction
  double bf16_dot_flops = 0;  // vdpbf16ps: 64 FLOP per instruction; 0 without AVX512-BF16
  double int8_dot_ops = 0;    // vpdpbusd: 128 ops per instruction; 0 without AVX512-VNNI
  double amx_bf16_flops = 0;  // AMX tdpbf16ps tile products; 0 without AMX-BF16 (or the OS's leave)
  double amx_int8_ops = 0;    // AMX tdpbusd tile products; 0 without AMX-INT8
  double read_bytes = 0;      // memory read bandwidth, bytes/s, from a buffer far past the caches
  int threads = 0;            // cores used (one thread each)
};

// Measured once per process (about a second), on std::thread::hardware_concurrency() threads.
// Without AVX-512 every dot-product ceiling is 0 (unknown) and only the bandwidth is measured.
const CpuCeilings& cpu_ceilings();

}  // namespace offgen::bench
