// CPU page summaries and page choice (semantics: kernels/page_selection_args.h), TBB over
// (sequence, kv head); the bound is vectorised across pages, each page summing its channels in
// the spec's order, so the bits are the reference's.
#pragma once

#include "kernels/page_selection_args.h"

namespace offgen::kernels::cpu {

void page_summary(const PageSummaryArgs& args);
void page_select(const PageSelectArgs& args);
// The copies of a decode step's pages, TBB over (sequence, kv head), one memcpy per page.
void gather_pages(const GatherPagesArgs& args);

}  // namespace offgen::kernels::cpu
