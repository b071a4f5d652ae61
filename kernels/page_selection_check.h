// The host-side check of page selection's shapes, for the C++ kernels (the CUDA ones check the
// same page_selection_shapes_valid with their own error path).
#pragma once

#include "engine/core/error.h"
#include "kernels/page_selection_args.h"

namespace offgen::kernels {

inline void check_page_selection_shapes(int heads, int kv_heads, int page_size, int max_pages) {
  if (!page_selection_shapes_valid(heads, kv_heads, page_size, max_pages)) {
    throw Error(
        "page selection: heads must be a multiple of kv_heads, page_size and max_pages >= 1");
  }
}

// The values a gather reads that could send it past its rows: T within the capacity, the newest
// page within it, and no more listed pages than a row of the list holds.
inline void check_gather_sequence(const GatherPagesArgs& a, int b) {
  const int t = a.slot_count[b];
  const int first = a.first_page[b];
  if (t < 1 || t > a.capacity || first < 0 || first != (t - 1) / a.page_size) {
    throw Error(
        "gather_pages: slot counts must be in [1, capacity] and first_page their newest page");
  }
  if (a.pages != nullptr) {
    for (int c = 0; c < a.kv_heads; ++c) {
      const int count = a.page_count[std::int64_t{b} * a.kv_heads + c];
      const int there =
          a.present != nullptr ? a.present_count[std::int64_t{b} * a.kv_heads + c] : 0;
      if (count < 0 || count > a.max_selected || there < 0 || there > a.max_selected) {
        throw Error("gather_pages: page and present counts must be in [0, max_selected]");
      }
      if (a.dst_capacity > 0 && std::int64_t{count} * a.page_size > a.dst_capacity) {
        throw Error("gather_pages: the chosen pages do not fit the compact staging");
      }
    }
  } else if (a.dst_capacity > 0) {
    const int at = a.dst_page != nullptr ? a.dst_page[b] : -1;
    if (at < 0 || std::int64_t{at} * a.page_size + (t - 1 - first * a.page_size) > a.dst_capacity) {
      throw Error("gather_pages: the newest page's place must lie inside the compact staging");
    }
  }
}

// A compact gather takes no present list (a page's place depends on the whole list).
inline void check_gather_args(const GatherPagesArgs& a) {
  if (a.dst_capacity > 0 && a.present != nullptr) {
    throw Error("gather_pages: a compact staging takes no present pages");
  }
}

// The slots a summary reads must lie in its cache (cache_page moves them).
inline void check_summary_sequence(const PageSummaryArgs& a, int b) {
  if (a.cache_page == nullptr) return;
  const int t = a.slot_count[b];
  const int first = a.first_page[b];
  const int at = a.cache_page[b];
  if (at < 0 ||
      std::int64_t{at} * a.page_size + (t - std::int64_t{first} * a.page_size) > a.capacity) {
    throw Error("page_summary: the pages summarised must lie inside the cache");
  }
}

}  // namespace offgen::kernels
