// Logit edits on the cuda device: a flat grid-stride loop over the edits, each step rounded on its
// own (the _rn intrinsics are never contracted into FMAs), so every edit equals the reference's.
#include "kernels/cuda/logit_edit.h"

#include <algorithm>
#include <cstdint>

#include "engine/core/cuda_check.h"

namespace offgen::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 1024;

__device__ float& logit_of(const EditLogitsArgs& args, const LogitEdit& e) {
  return args.logits[std::int64_t{e.row - args.first_row} * args.vocab + e.token];
}

__global__ void __launch_bounds__(kThreads) edit_logits_kernel(EditLogitsArgs args) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < args.count;
       i += stride) {
    const LogitEdit e = args.edits[i];
    float& logit = logit_of(args, e);
    float x = logit;
    args.saved[i] = x;
    if (e.flags & kEditBanned) {
      logit = -INFINITY;
      continue;
    }
    const RowPenalties p = args.penalties[e.row];
    x = __fadd_rn(x, e.bias);
    if ((e.flags & kEditInContext) && p.repetition != 1.0f) {
      x = x > 0.0f ? __fdiv_rn(x, p.repetition) : __fmul_rn(x, p.repetition);
    }
    x = __fsub_rn(x, __fmul_rn(p.frequency, e.count));
    x = __fsub_rn(x, e.count > 0.0f ? p.presence : 0.0f);
    logit = x;
  }
}

__global__ void __launch_bounds__(kThreads) restore_logits_kernel(EditLogitsArgs args) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < args.count;
       i += stride) {
    logit_of(args, args.edits[i]) = args.saved[i];
  }
}

unsigned blocks_for(std::int64_t count) {
  return static_cast<unsigned>(std::min((count + kThreads - 1) / kThreads, kMaxBlocks));
}

}  // namespace

void edit_logits(const EditLogitsArgs& args, cudaStream_t stream) {
  if (args.count <= 0) return;
  edit_logits_kernel<<<blocks_for(args.count), kThreads, 0, stream>>>(args);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

void restore_logits(const EditLogitsArgs& args, cudaStream_t stream) {
  if (args.count <= 0) return;
  restore_logits_kernel<<<blocks_for(args.count), kThreads, 0, stream>>>(args);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace offgen::kernels::cuda
