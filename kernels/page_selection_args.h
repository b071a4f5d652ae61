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
  // Optional [batch]: the page of k_cache that holds page first_page[b] (the pages after it
  // follow it); null: every page lies where the spec puts it. A compact staging
  // (GatherPagesArgs::dst_capacity) keeps the newest token's page at its place in the choice.
  const std::int32_t* cache_page = nullptr;
  int batch = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int capacity = 0;  // slots per (b, c) of k_cache
  int page_size = 16;
  int max_pages = 0;  // pages of the summaries: ceil(slots of the full cache / page_size)
};

struct PageSelectArgs {
  const Half* qkv = nullptr;  // [batch, (heads + 2 * kv_heads) * head_dim]; only q is read
  // Elements from one sequence's q to the next: 0 for qkv's rows; heads * head_dim for rows of q
  // alone (a speculative guess projects only q).
  std::int64_t q_stride = 0;
  const Half* summary = nullptr;                 // [batch, kv_heads, 2, head_dim, max_pages]
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

// A decode step's pages of an offloaded cache copied from the host (read where it lies, through
// the device's mapping of pinned memory) into its staging copy of the same layout, of which the
// step then reads only these rows: so only the pages a step attends cross PCIe. One plane of rows
// per call — the fp16 rows of K or of V, or one part of a packed (int4) buffer, its codes or its
// parameters (kernels/packed_kv.h).
//   rows     slot s of (b, c) is bytes [((b·kv_heads + c)·capacity + s)·row_bytes, + row_bytes)
//            of src and of dst.
//   source   holds every slot before the newest token's, slot T - 1 (T = slot_count[b]): that row
//            is the step's own, appended in dst, and never read from src.
//   which    pages == nullptr: slots [first_page[b]·P, T - 1), the part of the newest token's
//            page the source holds (wanted before the choice: that page's summary is taken
//            again). With pages (ascending, as page_select writes them): each listed page
//            p < first_page[b] of (b, c), whole — the chosen pages but the newest, which the first
//            call brought.
// An entry outside [0, first_page[b]) is not copied; entries past page_count are not read.
//   present  optional, with pages: [batch, kv_heads, max_selected] ascending, present_count
//            entries per (b, c) — pages already in dst (a speculative gather brought them); a
//            listed page found there is not copied again.
//   copied   optional: the bytes copied are added to *copied (atomically: gathers on two
//            streams may share one counter).
//   compact  dst_capacity > 0: dst is a staging of dst_capacity slots per (b, c), not of the
//            source's layout. Listed entry i lands at dst slots [i·P, (i+1)·P) — its place in the
//            choice — and the newest token's page (pages null) at dst page dst_page[b], so that
//            after the choice dst holds the attended slots alone, in slot order, as a cache of
//            selected_slots(T, P, S) slots (the choice lists the newest page last). present must
//            be null: a page's place depends on the whole list.
struct GatherPagesArgs {
  const std::uint8_t* src = nullptr;  // [batch, kv_heads, capacity, row_bytes]: the host cache
  std::uint8_t* dst = nullptr;        // the staging copy: the same layout, or compact
  const std::int32_t* slot_count = nullptr;  // [batch]: T, the new token in
  const std::int32_t* first_page = nullptr;  // [batch]: the newest token's page, (T - 1) / P
  const std::int32_t* pages = nullptr;       // optional [batch, kv_heads, max_selected]
  const std::int32_t* page_count = nullptr;  // [batch, kv_heads] with pages
  const std::int32_t* present = nullptr;
  const std::int32_t* present_count = nullptr;
  unsigned long long* copied = nullptr;
  const std::int32_t* dst_page = nullptr;  // compact, pages null: [batch]
  int batch = 0;
  int kv_heads = 0;
  int capacity = 0;  // slots per (b, c) of src (and of dst unless compact)
  int page_size = 16;
  int max_selected = 0;
  std::int64_t row_bytes = 0;
  int dst_capacity = 0;  // > 0: compact

  constexpr int dst_slots() const { return dst_capacity > 0 ? dst_capacity : capacity; }
};

// The page a compact staging (GatherPagesArgs::dst_capacity) keeps the newest token's page at: its
// place in the choice of a cache of `slots` slots (the new token in), the last of
// min(S, pages) pages.
constexpr int staged_newest_page(std::int64_t slots, int page_size, int pages_per_step) {
  const std::int64_t pages = (slots + page_size - 1) / page_size;
  return static_cast<int>((pages < pages_per_step ? pages : pages_per_step) - 1);
}

// Slots a decode step attends of a cache holding `slots` (the new token in) when it chooses
// pages_per_step pages of page_size: all of them when the pages fit, else S - 1 whole pages and
// the newest page's slots.
constexpr std::int64_t selected_slots(std::int64_t slots, int page_size, int pages_per_step) {
  const std::int64_t pages = (slots + page_size - 1) / page_size;
  if (pages <= pages_per_step) return slots;
  return std::int64_t{pages_per_step - 1} * page_size + (slots - (pages - 1) * page_size);
}

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
  // One plane of a decode step's gather from a host cache into its staging copy: the newest
  // token's page (pages null) or the chosen pages before it.
  GatherPagesArgs gather_args(const void* src, void* dst, std::int64_t row_bytes,
                              const std::int32_t* slot_count, const std::int32_t* first_page,
                              const std::int32_t* pages, const std::int32_t* page_count,
                              int batch) const {
    return {.src = static_cast<const std::uint8_t*>(src),
            .dst = static_cast<std::uint8_t*>(dst),
            .slot_count = slot_count,
            .first_page = first_page,
            .pages = pages,
            .page_count = page_count,
            .batch = batch,
            .kv_heads = kv_heads,
            .capacity = capacity,
            .page_size = page_size,
            .max_selected = max_pages,
            .row_bytes = row_bytes};
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
