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
    }
  }
}

}  // namespace offgen::kernels
