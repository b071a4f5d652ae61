// Query-aware page selection (Quest: Tang et al., ICML 2024) over a KV cache that keeps every
// token: a decode step attends to a few pages of each (sequence, kv head) cache, chosen by an
// upper bound of q·k that per-page key summaries give, and forgets nothing — a page skipped at
// one step can be chosen at the next.
//
// Spec, shared by the reference (float64, kernels/reference), cpu and cuda kernels:
//   page p    slots [p·P, (p+1)·P) of a cache, P = page_size; slots hold positions in order (the
//             cache never evicts), so page 0 holds the first P tokens. A cache of T valid slots
//             has n = ceil(T / P) pages; the last may be partly filled.
//   summary   per page and channel d: min and max over the page's valid slots of k[slot, d]. The
//             min or max of fp16 values is one of them, so the summary is fp16 and exact.
//   bound     of page p for query head h: U_h(p) = Σ_d max(q_h[d]·max_p[d], q_h[d]·min_p[d]),
//             the largest q·k a key inside the page's box can reach, so no token of the page
//             scores more. The scale of attention is left out: it is positive and the same for
//             every page. Each product of two fp16 values is exact in fp32; the kernels sum over d
//             in ascending order in fp32.
//   GQA       a kv head's pages serve its group of query heads (one copy, one attention over
//             them), so the group shares one choice: U(p) = Σ over the group's query heads, in
//             ascending order, of U_h(p) — an upper bound of the group's summed logits.
//   choice    per (sequence, kv head), with S = pages_per_step[b] (the sequence's budget of
//             attended tokens C over P rounded up, at least 2): n <= S: every page. Otherwise page
//             0 (the attention sink), page n - 1 (the newest token's) and the S - 2 of pages 1 .. n
//             - 2 with the highest U (equal bounds: the newer page). Written ascending.
#pragma once

#include <cstdint>

#include "engine/core/half.h"
#include "kernels/attention_args.h"

namespace offgen::kernels {

// Channel-major summaries, so that a kernel reads one channel of many pages at once:
//   summary [batch, kv_heads, 2, head_dim, max_pages] fp16 — [.., 0, d, p] = min, [.., 1, d, p] =
//   max of channel d over page p's valid slots (pages past a cache's last are not read).
constexpr std::int64_t page_summary_elements(int batch, int kv_heads, int head_dim, int max_pages) {
  return std::int64_t{batch} * kv_heads * 2 * head_dim * max_pages;
}

// What every implementation checks on the host before it reads anything: heads a multiple of
// kv_heads, page_size and max_pages >= 1 (page_selection_check.h for C++ callers).
constexpr bool page_selection_shapes_valid(int heads, int kv_heads, int page_size, int max_pages) {
  return kv_heads > 0 && heads % kv_heads == 0 && page_size > 0 && max_pages > 0;
}

struct PageSummaryArgs {
  const Half* k_cache = nullptr;  // [batch, kv_heads, capacity, head_dim]
  Half* summary = nullptr;        // [batch, kv_heads, 2, head_dim, max_pages]
  // [batch]: the valid slots; the pages from first_page[b] (a slot index / P) to the last are
  // summarised again — 0 after a prefill, the newest token's page after a decode step's append.
  const std::int32_t* slot_count = nullptr;
  const std::int32_t* first_page = nullptr;
  int batch = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int capacity = 0;
  int page_size = 16;
  int max_pages = 0;  // ceil(capacity / page_size)
};

struct PageSelectArgs {
  const Half* qkv = nullptr;      // [batch, (heads + 2 * kv_heads) * head_dim]; only q is read
  const Half* summary = nullptr;  // [batch, kv_heads, 2, head_dim, max_pages]
  const std::int32_t* slot_count = nullptr;      // [batch]: T, the valid slots (new token in)
  const std::int32_t* pages_per_step = nullptr;  // [batch]: S >= 2
  // out [batch, kv_heads, max_selected]: the chosen pages, ascending; entries past
  // selected_count are left as they were.
  std::int32_t* selected = nullptr;
  std::int32_t* selected_count = nullptr;  // out [batch, kv_heads]
  // Optional [batch, kv_heads, max_pages]: each page's U (pages past the last: not written), for
  // the tests and traces.
  float* bounds = nullptr;
  int batch = 0;
  int heads = 0;  // query heads
  int kv_heads = 0;
  int head_dim = 0;
  int page_size = 16;
  int max_pages = 0;
  int max_selected = 0;  // >= every pages_per_step[b]
};

// One cache shape's page selection: what every summary, choice and paged attention over caches
// of this shape shares (page_size 0: none). The callers bring only the pointers of one call.
struct PageGeometry {
  int heads = 0;  // query heads
  int kv_heads = 0;
  int head_dim = 0;
  int capacity = 0;   // slots per cache
  int page_size = 0;  // P; 0 = no page selection
  int max_pages = 0;  // pages per cache (also the most a step can choose)

  PageSummaryArgs summary_args(const Half* k_cache, Half* summary, const std::int32_t* slot_count,
                               const std::int32_t* first_page, int batch) const {
    return {.k_cache = k_cache,
            .summary = summary,
            .slot_count = slot_count,
            .first_page = first_page,
            .batch = batch,
            .kv_heads = kv_heads,
            .head_dim = head_dim,
            .capacity = capacity,
            .page_size = page_size,
            .max_pages = max_pages};
  }
  PageSelectArgs select_args(const Half* qkv, const Half* summary, const std::int32_t* slot_count,
                             const std::int32_t* pages_per_step, std::int32_t* selected,
                             std::int32_t* selected_count, int batch) const {
    return {.qkv = qkv,
            .summary = summary,
            .slot_count = slot_count,
            .pages_per_step = pages_per_step,
            .selected = selected,
            .selected_count = selected_count,
            .batch = batch,
            .heads = heads,
            .kv_heads = kv_heads,
            .head_dim = head_dim,
            .page_size = page_size,
            .max_pages = max_pages,
            .max_selected = max_pages};
  }
  // Decode attention over the pages a select_args call chose.
  void attend_chosen(DecodeAttentionArgs& args, const std::int32_t* selected,
                     const std::int32_t* selected_count) const {
    args.pages = selected;
    args.page_count = selected_count;
    args.page_size = page_size;
    args.max_selected = max_pages;
  }
};

}  // namespace offgen::kernels
