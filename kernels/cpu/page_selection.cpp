#include "kernels/cpu/page_selection.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/core/error.h"
#include "kernels/page_selection_check.h"

namespace offgen::kernels::cpu {
void page_summary(const PageSummaryArgs& a) {
  check_page_selection_shapes(a.kv_heads, a.kv_heads, a.page_size, a.max_pages);
  for (int b = 0; b < a.batch; ++b) check_summary_sequence(a, b);
  const std::int64_t dims = a.head_dim, pages = a.max_pages;
  tbb::parallel_for(tbb::blocked_range<int>(0, a.batch * a.kv_heads), [&](const auto& r) {
    std::vector<float> mn(static_cast<std::size_t>(dims)), mx(mn.size());
    std::vector<Half> hmn(mn.size()), hmx(mn.size());
    for (int bc = r.begin(); bc != r.end(); ++bc) {
      const int b = bc / a.kv_heads;
      const int t = a.slot_count[b];
      const int last_page = (t + a.page_size - 1) / a.page_size;
      // Slot s of the sequence lies at cache slot s + shift (checked inside the cache above).
      const std::int64_t shift = a.cache_page != nullptr
                                     ? std::int64_t{a.cache_page[b] - a.first_page[b]} * a.page_size
                                     : 0;
      const Half* k = a.k_cache + std::int64_t{bc} * a.capacity * dims;
      Half* lo = a.summary + std::int64_t{bc} * 2 * dims * pages;
      Half* hi = lo + dims * pages;
      for (int p = a.first_page[b]; p < last_page; ++p) {
        // Slot by slot along the rows (contiguous), each channel keeping its first extreme.
        const Half* row = k + (std::int64_t{p} * a.page_size + shift) * dims;
        for (std::int64_t d = 0; d < dims; ++d) {
          hmn[static_cast<std::size_t>(d)] = hmx[static_cast<std::size_t>(d)] = row[d];
          mn[static_cast<std::size_t>(d)] = mx[static_cast<std::size_t>(d)] = half_to_float(row[d]);
        }
        const int end = std::min(t, (p + 1) * a.page_size);
        for (int s = p * a.page_size + 1; s < end; ++s) {
          const Half* v = k + (std::int64_t{s} + shift) * dims;
          for (std::int64_t d = 0; d < dims; ++d) {
            const auto i = static_cast<std::size_t>(d);
            const float f = half_to_float(v[d]);
            if (f < mn[i]) mn[i] = f, hmn[i] = v[d];
            if (f > mx[i]) mx[i] = f, hmx[i] = v[d];
          }
        }
        for (std::int64_t d = 0; d < dims; ++d) {
          lo[d * pages + p] = hmn[static_cast<std::size_t>(d)];
          hi[d * pages + p] = hmx[static_cast<std::size_t>(d)];
        }
      }
    }
  });
}

void page_select(const PageSelectArgs& a) {
  check_page_selection_shapes(a.heads, a.kv_heads, a.page_size, a.max_pages);
  for (int b = 0; b < a.batch; ++b) {
    const int n = (a.slot_count[b] + a.page_size - 1) / a.page_size;
    if (a.pages_per_step[b] < 2 || a.pages_per_step[b] > a.max_selected || n > a.max_pages) {
      throw Error("page_select: pages per step must be in [2, max_selected], pages <= max_pages");
    }
  }
  const int group = a.heads / a.kv_heads;
  const std::int64_t dims = a.head_dim, pages = a.max_pages;
  const std::int64_t qkv_dim =
      a.q_stride > 0 ? a.q_stride : std::int64_t{a.heads + 2 * a.kv_heads} * dims;
  tbb::parallel_for(tbb::blocked_range<int>(0, a.batch * a.kv_heads), [&](const auto& r) {
    // head[g·pages + p]: query head g's bound of page p; each channel's min and max are
    // converted once for the whole group.
    std::vector<float> bound(static_cast<std::size_t>(pages));
    std::vector<float> head(static_cast<std::size_t>(group * pages));
    std::vector<float> lo_f(bound.size()), hi_f(bound.size());
    std::vector<std::int32_t> middle;
    for (int bc = r.begin(); bc != r.end(); ++bc) {
      const int b = bc / a.kv_heads, c = bc % a.kv_heads;
      const int n = (a.slot_count[b] + a.page_size - 1) / a.page_size;
      const int s = a.pages_per_step[b];
      const Half* lo = a.summary + std::int64_t{bc} * 2 * dims * pages;
      const Half* hi = lo + dims * pages;
      const Half* q0 = a.qkv + b * qkv_dim + std::int64_t{c * group} * dims;
      std::fill(head.begin(), head.end(), 0.0f);
      for (std::int64_t d = 0; d < dims; ++d) {
        half_to_float(lo + d * pages, lo_f.data(), static_cast<std::size_t>(n));
        half_to_float(hi + d * pages, hi_f.data(), static_cast<std::size_t>(n));
        for (int g = 0; g < group; ++g) {
          const float qd = half_to_float(q0[g * dims + d]);
          float* const hg = head.data() + std::int64_t{g} * pages;
          // Across pages (vectorised); along d each page sums in ascending order, and every
          // product of two fp16 values is exact in fp32, so contraction cannot change a bit.
          for (int p = 0; p < n; ++p) {
            hg[p] += std::max(qd * hi_f[static_cast<std::size_t>(p)],
                              qd * lo_f[static_cast<std::size_t>(p)]);
          }
        }
      }
      std::fill(bound.begin(), bound.begin() + n, 0.0f);
      for (int g = 0; g < group; ++g) {  // the group's bounds, added in head order
        const float* hg = head.data() + std::int64_t{g} * pages;
        for (int p = 0; p < n; ++p) bound[static_cast<std::size_t>(p)] += hg[p];
      }
      if (a.bounds != nullptr) {
        std::copy(bound.begin(), bound.begin() + n, a.bounds + std::int64_t{bc} * pages);
      }
      std::int32_t* out = a.selected + std::int64_t{bc} * a.max_selected;
      if (n <= s) {
        for (int p = 0; p < n; ++p) out[p] = p;
        a.selected_count[bc] = n;
        continue;
      }
      middle.resize(static_cast<std::size_t>(n - 2));
      for (int p = 1; p < n - 1; ++p) middle[static_cast<std::size_t>(p - 1)] = p;
      // The s - 2 highest bounds (equal: the newer page), then ascending with the sink and the
      // newest page.
      std::nth_element(middle.begin(), middle.begin() + (s - 2), middle.end(),
                       [&](std::int32_t x, std::int32_t y) {
                         const float bx = bound[static_cast<std::size_t>(x)];
                         const float by = bound[static_cast<std::size_t>(y)];
                         return bx != by ? bx > by : x > y;
                       });
      middle.resize(static_cast<std::size_t>(s - 2));
      std::sort(middle.begin(), middle.end());
      out[0] = 0;
      std::copy(middle.begin(), middle.end(), out + 1);
      out[s - 1] = n - 1;
      a.selected_count[bc] = s;
    }
  });
}

void gather_pages(const GatherPagesArgs& a) {
  check_page_selection_shapes(a.kv_heads, a.kv_heads, a.page_size, a.max_selected);
  check_gather_args(a);
  for (int b = 0; b < a.batch; ++b) check_gather_sequence(a, b);
  const auto row = static_cast<std::size_t>(a.row_bytes);
  tbb::parallel_for(tbb::blocked_range<int>(0, a.batch * a.kv_heads), [&](const auto& r) {
    for (int bc = r.begin(); bc != r.end(); ++bc) {
      const int b = bc / a.kv_heads;
      const int newest = a.first_page[b];
      const std::int64_t base = std::int64_t{bc} * a.capacity;
      const std::int64_t dst_base = std::int64_t{bc} * a.dst_slots();
      unsigned long long copied = 0;
      // Source slots [from, to) land at dst slot `at` (compact), or where they are.
      auto copy_slots = [&](std::int64_t from, std::int64_t to, std::int64_t at) {
        if (a.dst_capacity == 0) at = from;
        if (to > from) {
          std::memcpy(a.dst + (dst_base + at) * a.row_bytes, a.src + (base + from) * a.row_bytes,
                      static_cast<std::size_t>(to - from) * row);
          copied += static_cast<unsigned long long>((to - from) * a.row_bytes);
        }
      };
      if (a.pages == nullptr) {
        const std::int64_t at = a.dst_capacity > 0 ? std::int64_t{a.dst_page[b]} * a.page_size : 0;
        copy_slots(std::int64_t{newest} * a.page_size, a.slot_count[b] - 1, at);
      } else {
        const std::int32_t* list = a.pages + std::int64_t{bc} * a.max_selected;
        // Both lists ascend: one walk through the present pages.
        const std::int32_t* there =
            a.present ? a.present + std::int64_t{bc} * a.max_selected : nullptr;
        const int there_count = a.present ? a.present_count[bc] : 0;
        int j = 0;
        for (int i = 0; i < a.page_count[bc]; ++i) {
          const std::int64_t p = list[i];
          while (j < there_count && there[j] < p) ++j;
          if (j < there_count && there[j] == p) continue;
          if (p >= 0 && p < newest) {
            copy_slots(p * a.page_size, (p + 1) * a.page_size, std::int64_t{i} * a.page_size);
          }
        }
      }
      if (a.copied != nullptr && copied > 0) {
        std::atomic_ref<unsigned long long>(*a.copied).fetch_add(copied);
      }
    }
  });
}

}  // namespace offgen::kernels::cpu
