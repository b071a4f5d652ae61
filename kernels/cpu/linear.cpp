// Linear / logits: fp32 GEMM over fp16 operands, y[m, n] = Σ_k x[m, k]·W[n, k] (+ epilogue).
//
// One path for every row count, TBB-parallel over an (n-block × m-block) task grid. x rows are
// converted to fp32 and zero-padded to a multiple of 16; each task converts NR-row groups of W
// right before use (they stay in L1) and runs an MR × NR micro-kernel of dot products vectorised
// over k, reduced horizontally once per tile and k chunk; rows come in blocks that stay in L2.
// Each output is summed in the same order whatever m is, so a row's result is bit for bit the
// same alone or among thousands: a request's tokens never depend on its batch-mates. (An
// outer-product kernel over packed x panels was ~10% faster at m >= 512 but sums in another
// order, so a request's bits changed with the number of rows beside it.) Outputs go through the
// epilogue: bias, activation, one rounding to fp16 — or plain fp32 for logits.
//
// Micro-kernels are picked at run time (AVX-512, AVX2+FMA, portable); OFFGEN_CPU_ISA=avx2 or
// =portable caps the choice so tests can cover the fallbacks on any x86 machine.
#include "kernels/cpu/linear.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <string_view>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/core/int_math.h"

namespace offgen::kernels::cpu {
namespace {

// ---- shared ----------------------------------------------------------------------------------

// 64-byte aligned fp32 buffer: vector loads that straddle cache lines halve L1 throughput.
class AlignedFloats {
 public:
  float* get(std::size_t n) {
    if (n > size_) {
      data_.reset(static_cast<float*>(::operator new[](n * sizeof(float), kAlign)));
      size_ = n;
    }
    return data_.get();
  }

 private:
  static constexpr std::align_val_t kAlign{64};
  struct Free {
    void operator()(float* p) const { ::operator delete[](p, kAlign); }
  };
  std::unique_ptr<float[], Free> data_;
  std::size_t size_ = 0;
};

// Tasks wanted for load balance: a few per worker.
std::int64_t task_target() {
  return 8 * static_cast<std::int64_t>(tbb::this_task_arena::max_concurrency());
}

// Finishes `count` fp32 sums of output row `row`, columns [n0, n0 + count); may modify c.
struct Epilogue {
  const float* bias = nullptr;  // fp32, [n]; null = none
  bool relu = false;
  Half* y = nullptr;     // linear output, or
  float* out = nullptr;  // logits output
  std::int64_t n = 0;

  void operator()(std::int64_t row, std::int64_t n0, std::int64_t count, float* c) const {
    if (out != nullptr) {
      std::copy(c, c + count, out + row * n + n0);
      return;
    }
    const float* b = bias != nullptr ? bias + n0 : nullptr;
#pragma omp simd
    for (std::int64_t j = 0; j < count; ++j) {
      const float v = c[j] + (b != nullptr ? b[j] : 0.0f);
      c[j] = relu ? std::max(v, 0.0f) : v;
    }
    float_to_half(c, y + row * n + n0, static_cast<std::size_t>(count));
  }
};

// ---- micro-kernels ----------------------------------------------------------------------------

constexpr int kDotAlign = 16;    // x / W rows padded to a multiple of one zmm of floats
constexpr int kDotChunk = 1024;  // k per pass
constexpr int kMaxMr = 4;

// c[i·ldc + j] += dot(x_i, w_j) over len (a multiple of 16) for i < MR, j < NR.
using DotTile = void (*)(const float* x, std::int64_t ldx, const float* w, std::int64_t ldw,
                         int len, float* c, std::int64_t ldc);

struct DotIsa {
  int mr = 0;
  int nr = 0;
  DotTile tile[kMaxMr + 1] = {};  // tile[r] handles r rows of x (1 <= r <= mr)
};

// ---- portable ------------------------------------------------------------------------------
template <int MR>
void dot_portable(const float* x, std::int64_t ldx, const float* w, std::int64_t ldw, int len,
                  float* c, std::int64_t ldc) {
  constexpr int kNr = 4;
  constexpr int kLanes = 8;
  float acc[MR][kNr][kLanes] = {};
  for (int kk = 0; kk < len; kk += kLanes) {
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < kNr; ++j) {
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) acc[i][j][l] += x[i * ldx + kk + l] * w[j * ldw + kk + l];
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < kNr; ++j) {
      float s = 0.0f;
      for (int l = 0; l < kLanes; ++l) s += acc[i][j][l];
      c[i * ldc + j] += s;
    }
  }
}

#if defined(__x86_64__)
// ---- AVX2 + FMA: 3 x-rows × 4 W-rows = 12 ymm accumulators + 3 x + 1 w = 16 registers -------
template <int MR>
__attribute__((target("avx2,fma"))) void dot_avx2(const float* x, std::int64_t ldx, const float* w,
                                                  std::int64_t ldw, int len, float* c,
                                                  std::int64_t ldc) {
  constexpr int kNr = 4;
  __m256 acc[MR][kNr];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  for (int kk = 0; kk < len; kk += 8) {
    __m256 xv[MR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) xv[i] = _mm256_loadu_ps(x + i * ldx + kk);
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) {
      const __m256 wv = _mm256_loadu_ps(w + j * ldw + kk);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    // [a0 a1 a2 a3] -> four sums: hadd pairs, then fold the two 128-bit halves.
    const __m256 h01 = _mm256_hadd_ps(acc[i][0], acc[i][1]);
    const __m256 h23 = _mm256_hadd_ps(acc[i][2], acc[i][3]);
    const __m256 h = _mm256_hadd_ps(h01, h23);
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    _mm_storeu_ps(c + i * ldc, _mm_add_ps(_mm_loadu_ps(c + i * ldc), s));
  }
}

// ---- AVX-512: 4 x-rows × 6 W-rows = 24 zmm accumulators + 4 x + 1 w = 29 of 32 registers ----
__attribute__((target("avx512f"))) inline __m256 fold512(__m512 v) {
  // The maskz forms: GCC 12's plain extract / cast intrinsics trip -Wuninitialized on their
  // internal _mm256_undefined_pd(); an all-ones mask compiles to the same instruction.
  const __m512d d = _mm512_castps_pd(v);
  return _mm256_add_ps(_mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, d, 0)),
                       _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, d, 1)));
}

template <int MR>
__attribute__((target("avx512f"))) void dot_avx512(const float* x, std::int64_t ldx, const float* w,
                                                   std::int64_t ldw, int len, float* c,
                                                   std::int64_t ldc) {
  constexpr int kNr = 6;
  __m512 acc[MR][kNr];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 6
    for (int j = 0; j < kNr; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int kk = 0; kk < len; kk += 16) {
    __m512 xv[MR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) xv[i] = _mm512_loadu_ps(x + i * ldx + kk);
#pragma GCC unroll 6
    for (int j = 0; j < kNr; ++j) {
      const __m512 wv = _mm512_loadu_ps(w + j * ldw + kk);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    // Six zmm -> six sums: fold each to 256 bits, then an 8-wide hadd tree (two zero slots).
    const __m256 zero = _mm256_setzero_ps();
    const __m256 h01 = _mm256_hadd_ps(fold512(acc[i][0]), fold512(acc[i][1]));
    const __m256 h23 = _mm256_hadd_ps(fold512(acc[i][2]), fold512(acc[i][3]));
    const __m256 h45 = _mm256_hadd_ps(fold512(acc[i][4]), fold512(acc[i][5]));
    const __m256 h0123 = _mm256_hadd_ps(h01, h23);
    const __m256 h45zz = _mm256_hadd_ps(h45, zero);
    const __m256 s = _mm256_add_ps(_mm256_permute2f128_ps(h0123, h45zz, 0x20),
                                   _mm256_permute2f128_ps(h0123, h45zz, 0x31));
    alignas(32) float sums[8];
    _mm256_store_ps(sums, s);
    for (int j = 0; j < kNr; ++j) c[i * ldc + j] += sums[j];
  }
}
#endif

// ---- selection -------------------------------------------------------------------------------

// Best kernels this CPU runs, capped by OFFGEN_CPU_ISA (read per call: tests flip it).
DotIsa select_kernels() {
  const char* env = std::getenv("OFFGEN_CPU_ISA");
  const std::string_view cap = env != nullptr ? env : "";
  const DotIsa portable = {2, 4, {nullptr, dot_portable<1>, dot_portable<2>}};
  if (cap == "portable") return portable;
#if defined(__x86_64__)
  static const bool has_avx512 = __builtin_cpu_supports("avx512f");
  static const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (has_avx512 && cap != "avx2") {
    return {4, 6, {nullptr, dot_avx512<1>, dot_avx512<2>, dot_avx512<3>, dot_avx512<4>}};
  }
  if (has_avx2) return {3, 4, {nullptr, dot_avx2<1>, dot_avx2<2>, dot_avx2<3>}};
#endif
  return portable;
}

// ---- driver ----------------------------------------------------------------------------------

void gemm(const Half* x, const Half* weight, std::int64_t m, std::int64_t n, std::int64_t k,
          const Epilogue& store) {
  if (m <= 0 || n <= 0) return;
  const DotIsa isa = select_kernels();
  const std::int64_t kp = round_up(std::max<std::int64_t>(k, 1), kDotAlign);
  // x in fp32, rows zero-padded to kp. Kept per calling thread (the stream's worker) so the
  // hot path does not allocate and fault in fresh pages on every call.
  thread_local AlignedFloats x_buffer;
  float* const xf = x_buffer.get(static_cast<std::size_t>(m * kp));
  // k chunks: the order of a sum depends only on k, never on m.
  const std::int64_t chunk = round_up(ceil_div(kp, ceil_div(kp, kDotChunk)), kDotAlign);
  // Row blocks of <= ~512 KiB of x, so a block stays in L2 while a task's W groups pass over it
  // (one block for decode and short prompts); each block re-converts its W rows, 1/mb extra work.
  const std::int64_t mb =
      std::min(m, std::max<std::int64_t>(isa.mr, (512 << 10) / (kp * 4) / isa.mr * isa.mr));
  const std::int64_t m_blocks = ceil_div(m, mb);
  // Blocks of W rows per task; fewer when the tasks must outnumber the workers.
  std::int64_t nb = 16 * isa.nr;
  while (nb > isa.nr && ceil_div(n, nb) * m_blocks < task_target()) nb -= isa.nr;
  const std::int64_t n_blocks = ceil_div(n, nb);

  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, m, 64), [&](const auto& r) {
      for (std::int64_t i = r.begin(); i != r.end(); ++i) {
        half_to_float(x + i * k, xf + i * kp, static_cast<std::size_t>(k));
        std::fill(xf + i * kp + k, xf + (i + 1) * kp, 0.0f);
      }
    });
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n_blocks * m_blocks), [&](const auto& r) {
      thread_local AlignedFloats w_buffer;
      thread_local AlignedFloats c_buffer;
      float* const wf = w_buffer.get(static_cast<std::size_t>(isa.nr * kp));
      for (std::int64_t t = r.begin(); t != r.end(); ++t) {
        const std::int64_t n0 = (t / m_blocks) * nb;
        const std::int64_t ncount = std::min(nb, n - n0);
        const std::int64_t nbp = round_up(ncount, isa.nr);
        const std::int64_t m0 = (t % m_blocks) * mb;
        const std::int64_t mcount = std::min(mb, m - m0);
        float* const c = c_buffer.get(static_cast<std::size_t>(mcount * nbp));
        std::fill(c, c + mcount * nbp, 0.0f);
        for (std::int64_t j0 = 0; j0 < nbp; j0 += isa.nr) {
          // Convert this group (zero rows past n) into L1-sized scratch right before use.
          const std::int64_t rows = std::min<std::int64_t>(isa.nr, ncount - j0);
          for (std::int64_t j = 0; j < rows; ++j) {
            half_to_float(weight + (n0 + j0 + j) * k, wf + j * kp, static_cast<std::size_t>(k));
            std::fill(wf + j * kp + k, wf + (j + 1) * kp, 0.0f);
          }
          std::fill(wf + rows * kp, wf + isa.nr * kp, 0.0f);
          for (std::int64_t k0 = 0; k0 < kp; k0 += chunk) {
            const int len = static_cast<int>(std::min(chunk, kp - k0));
            for (std::int64_t i0 = 0; i0 < mcount; i0 += isa.mr) {
              const auto mr = std::min<std::int64_t>(isa.mr, mcount - i0);
              isa.tile[mr](xf + (m0 + i0) * kp + k0, kp, wf + k0, kp, len, c + i0 * nbp + j0, nbp);
            }
          }
        }
        for (std::int64_t i = 0; i < mcount; ++i) store(m0 + i, n0, ncount, c + i * nbp);
      }
    });
  });
}

}  // namespace

void linear(const LinearArgs& args) {
  std::vector<float> bias_f;
  if (args.bias != nullptr) {
    bias_f.resize(static_cast<std::size_t>(std::max(args.out_features, 0)));
    half_to_float(args.bias, bias_f.data(), bias_f.size());
  }
  Epilogue e;
  e.bias = args.bias != nullptr ? bias_f.data() : nullptr;
  e.relu = args.activation == Activation::relu;
  e.y = args.y;
  e.n = args.out_features;
  gemm(args.x, args.weight, args.rows, args.out_features, args.in_features, e);
}

void logits(const LogitsArgs& args) {
  Epilogue e;
  e.out = args.out;
  e.n = args.vocab;
  gemm(args.x, args.embed, args.rows, args.vocab, args.dim, e);
}

}  // namespace offgen::kernels::cpu
