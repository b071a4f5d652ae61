// Pieces the CPU GEMM drivers share (kernels/cpu/linear.cpp, kernels/cpu/linear_int8.cpp):
// aligned scratch, the task count wanted, and the epilogue every output goes through.
#pragma once

#include <tbb/task_arena.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "engine/core/half.h"

namespace offgen::kernels::cpu {

// 64-byte aligned buffer: vector loads that straddle cache lines halve L1 throughput.
template <typename T>
class AlignedBuffer {
 public:
  T* get(std::size_t n) {
    if (n > size_) {
      data_.reset(static_cast<T*>(::operator new[](n * sizeof(T), kAlign)));
      size_ = n;
    }
    return data_.get();
  }

 private:
  static constexpr std::align_val_t kAlign{64};
  struct Free {
    void operator()(T* p) const { ::operator delete[](p, kAlign); }
  };
  std::unique_ptr<T[], Free> data_;
  std::size_t size_ = 0;
};
using AlignedFloats = AlignedBuffer<float>;

// Tasks wanted for load balance: a few per worker.
inline std::int64_t task_target() {
  return 8 * static_cast<std::int64_t>(tbb::this_task_arena::max_concurrency());
}

// Finishes `count` fp32 sums of output row `row`, columns [n0, n0 + count) (gemm_epilogue.cpp).
struct Epilogue {
  const float* bias = nullptr;  // fp32, [n]; null = none
  bool relu = false;
  Half* y = nullptr;     // linear output, or
  float* out = nullptr;  // logits output
  std::int64_t n = 0;

  void operator()(std::int64_t row, std::int64_t n0, std::int64_t count, const float* c) const;
  // The same of c[j] · column_scale[j] (fp32, rounded before the bias is added): int8 weights'
  // per-channel scales.
  void operator()(std::int64_t row, std::int64_t n0, std::int64_t count, const float* c,
                  const float* column_scale) const;
};

}  // namespace offgen::kernels::cpu
