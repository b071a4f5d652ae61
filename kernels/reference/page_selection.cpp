// Reference page summaries and page choice (kernels/page_selection_args.h), step by step as the
// spec says: the summaries compare fp16 values (no arithmetic), and the bound is the spec's fp32
// sum in ascending order of exact products, so the kernels can be checked bit for bit. The
// float64 truth the bound approximates is in the tests (tests/kernels/page_selection_test.cpp).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/core/error.h"
#include "kernels/page_selection_check.h"
#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {
void page_summary(const PageSummaryArgs& a) {
  check_page_selection_shapes(a.kv_heads, a.kv_heads, a.page_size, a.max_pages);
  const std::int64_t d_count = a.head_dim, pages = a.max_pages;
  for (int b = 0; b < a.batch; ++b) {
    check_summary_sequence(a, b);
    const int t = a.slot_count[b];
    const int last_page = (t + a.page_size - 1) / a.page_size;
    // Slot s of the sequence lies at cache slot s + shift.
    const std::int64_t shift =
        a.cache_page != nullptr ? std::int64_t{a.cache_page[b] - a.first_page[b]} * a.page_size : 0;
    for (int c = 0; c < a.kv_heads; ++c) {
      const Half* k = a.k_cache + (std::int64_t{b} * a.kv_heads + c) * a.capacity * d_count;
      Half* lo = a.summary + (std::int64_t{b} * a.kv_heads + c) * 2 * d_count * pages;
      Half* hi = lo + d_count * pages;
      for (int p = a.first_page[b]; p < last_page; ++p) {
        const int end = std::min(t, (p + 1) * a.page_size);
        for (std::int64_t d = 0; d < d_count; ++d) {
          // The first of equal values stays (slot order): -0 and +0 compare equal.
          Half mn = k[(std::int64_t{p} * a.page_size + shift) * d_count + d], mx = mn;
          for (int s = p * a.page_size + 1; s < end; ++s) {
            const Half v = k[(s + shift) * d_count + d];
            if (half_to_float(v) < half_to_float(mn)) mn = v;
            if (half_to_float(v) > half_to_float(mx)) mx = v;
          }
          lo[d * pages + p] = mn;
          hi[d * pages + p] = mx;
        }
      }
    }
  }
}

void page_select(const PageSelectArgs& a) {
  check_page_selection_shapes(a.heads, a.kv_heads, a.page_size, a.max_pages);
  const int group = a.heads / a.kv_heads;
  const std::int64_t d_count = a.head_dim, pages = a.max_pages;
  const std::int64_t qkv_dim =
      a.q_stride > 0 ? a.q_stride : std::int64_t{a.heads + 2 * a.kv_heads} * d_count;
  for (int b = 0; b < a.batch; ++b) {
    const int n = (a.slot_count[b] + a.page_size - 1) / a.page_size;
    const int s = a.pages_per_step[b];
    if (s < 2 || s > a.max_selected || n > a.max_pages) {
      throw Error("page_select: pages per step must be in [2, max_selected], pages <= max_pages");
    }
    for (int c = 0; c < a.kv_heads; ++c) {
      const Half* lo = a.summary + (std::int64_t{b} * a.kv_heads + c) * 2 * d_count * pages;
      const Half* hi = lo + d_count * pages;
      std::vector<float> bound(static_cast<std::size_t>(n), 0.0f);
      for (int p = 0; p < n; ++p) {
        for (int g = 0; g < group; ++g) {
          const Half* q = a.qkv + b * qkv_dim + std::int64_t{c * group + g} * d_count;
          float u = 0.0f;
          for (std::int64_t d = 0; d < d_count; ++d) {
            const float qd = half_to_float(q[d]);
            u += std::max(qd * half_to_float(hi[d * pages + p]),
                          qd * half_to_float(lo[d * pages + p]));
          }
          bound[static_cast<std::size_t>(p)] += u;
        }
      }
      if (a.bounds != nullptr) {
        std::copy(bound.begin(), bound.end(),
                  a.bounds + (std::int64_t{b} * a.kv_heads + c) * pages);
      }
      std::vector<std::int32_t> chosen;
      if (n <= s) {
        for (int p = 0; p < n; ++p) chosen.push_back(p);
      } else {
        std::vector<std::int32_t> middle;
        for (int p = 1; p < n - 1; ++p) middle.push_back(p);
        // Highest bound first; equal bounds: the newer page.
        std::stable_sort(middle.begin(), middle.end(), [&](std::int32_t x, std::int32_t y) {
          const float bx = bound[static_cast<std::size_t>(x)],
                      by = bound[static_cast<std::size_t>(y)];
          return bx != by ? bx > by : x > y;
        });
        chosen = {0, n - 1};
        chosen.insert(chosen.end(), middle.begin(), middle.begin() + (s - 2));
        std::sort(chosen.begin(), chosen.end());
      }
      std::int32_t* out = a.selected + (std::int64_t{b} * a.kv_heads + c) * a.max_selected;
      std::copy(chosen.begin(), chosen.end(), out);
      a.selected_count[b * a.kv_heads + c] = static_cast<std::int32_t>(chosen.size());
    }
  }
}

void gather_pages(const GatherPagesArgs& a) {
  check_page_selection_shapes(a.kv_heads, a.kv_heads, a.page_size, a.max_selected);
  check_gather_args(a);
  for (int b = 0; b < a.batch; ++b) {
    check_gather_sequence(a, b);
    const int newest = a.first_page[b];
    for (int c = 0; c < a.kv_heads; ++c) {
      const std::int64_t base = (std::int64_t{b} * a.kv_heads + c) * a.capacity;
      const std::int64_t dst_base = (std::int64_t{b} * a.kv_heads + c) * a.dst_slots();
      // Source slots [from, to) land at dst slot `at` on (compact), or where they are.
      auto copy_slots = [&](std::int64_t from, std::int64_t to, std::int64_t at) {
        if (a.dst_capacity == 0) at = from;
        for (std::int64_t s = from; s < to; ++s) {
          for (std::int64_t i = 0; i < a.row_bytes; ++i) {
            a.dst[(dst_base + at + s - from) * a.row_bytes + i] =
                a.src[(base + s) * a.row_bytes + i];
          }
          if (a.copied != nullptr) {  // a gather on another stream may count at the same time
            std::atomic_ref<unsigned long long>(*a.copied).fetch_add(
                static_cast<unsigned long long>(a.row_bytes));
          }
        }
      };
      if (a.pages == nullptr) {
        const std::int64_t at = a.dst_capacity > 0 ? std::int64_t{a.dst_page[b]} * a.page_size : 0;
        copy_slots(std::int64_t{newest} * a.page_size, a.slot_count[b] - 1, at);
        continue;
      }
      const std::int64_t bc = std::int64_t{b} * a.kv_heads + c;
      for (int i = 0; i < a.page_count[bc]; ++i) {
        const std::int64_t p = a.pages[bc * a.max_selected + i];
        bool there = false;
        for (int j = 0; a.present != nullptr && j < a.present_count[bc]; ++j) {
          there = there || a.present[bc * a.max_selected + j] == p;
        }
        if (p >= 0 && p < newest && !there) {
          copy_slots(p * a.page_size, (p + 1) * a.page_size, std::int64_t{i} * a.page_size);
        }
      }
    }
  }
}

}  // namespace offgen::kernels::reference
