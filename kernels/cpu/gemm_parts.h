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

// How a GEMM splits into tasks of (column group × a run of row units: row pairs of the AMX
// tiles, row blocks of the outer-product path): each task packs or reads its group's weight
// panels once and passes its row units over them, so a task takes every row unit of its group
// unless the tasks would be fewer than the workers want (target).
struct GroupTasks {
  std::int64_t units = 0, per_task = 0, row_tasks = 0;

  GroupTasks(std::int64_t groups, std::int64_t row_units, std::int64_t target)
      : units(row_units), per_task(row_units) {
    while (per_task > 1 && groups * ((units + per_task - 1) / per_task) < target) {
      per_task = (per_task + 1) / 2;
    }
    row_tasks = (units + per_task - 1) / per_task;
  }
  std::int64_t count(std::int64_t groups) const { return groups * row_tasks; }

  struct Task {
    std::int64_t group, first_unit, end_unit;
  };
  Task task(std::int64_t t) const {
    const std::int64_t u0 = (t % row_tasks) * per_task;
    return {t / row_tasks, u0, std::min(units, u0 + per_task)};
  }
};

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
