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

}  // namespace offgen::kernels
