// CUDA page summaries and page choice (semantics: kernels/page_selection_args.h), bit for bit the
// reference's: the summaries only compare fp16 values, and each bound is the spec's fp32 sum in
// ascending channel order of exact products.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/page_selection_args.h"

namespace offgen::kernels::cuda {

// One block per (sequence, kv head); a thread per (page, channel) pair walks the page's slots.
void page_summary(const PageSummaryArgs& args, cudaStream_t stream);
// One block per (sequence, kv head): a thread per page sums its bound, ranks it against the
// others (O(pages^2) comparisons in shared memory: a few thousand pages at most) and one thread
// writes the choice in ascending order. Stages max_pages floats and ints in shared memory.
void page_select(const PageSelectArgs& args, cudaStream_t stream);
// Up to 32 blocks per (sequence, kv head), each taking every 32nd listed page: its threads copy
// the page's run of rows, 16 bytes at a time where both ends allow. The source is pinned host
// memory read over PCIe, so the copy costs the bytes it moves and a few blocks' time, not a copy
// engine's queue.
void gather_pages(const GatherPagesArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
