// Page selection kernels (contract: kernels/cuda/page_selection.h).
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "engine/core/cuda_check.h"
#include "kernels/cuda/page_selection.h"

namespace offgen::kernels::cuda {
namespace {

constexpr int kThreads = 256;
// Shared memory a block of page_select may stage: bounds and choice flags per page.
constexpr int kMaxSharedBytes = 48 * 1024;

__device__ float to_float(Half h) {
  return __half2float(__ushort_as_half(h.bits));
}

__global__ void __launch_bounds__(kThreads) page_summary_kernel(PageSummaryArgs a) {
  const int bc = static_cast<int>(blockIdx.x);
  const int b = bc / a.kv_heads;
  const int t = a.slot_count[b];
  const int first = a.first_page[b];
  const int last_page = (t + a.page_size - 1) / a.page_size;
  if (first >= last_page) return;
  const std::int64_t dims = a.head_dim, pages = a.max_pages;
  // Slot s of the sequence lies at cache slot s + shift; clamped to the cache (the host cannot
  // check device values).
  const std::int64_t shift =
      a.cache_page != nullptr ? std::int64_t{a.cache_page[b] - first} * a.page_size : 0;
  if (std::int64_t{first} * a.page_size + shift < 0 || std::int64_t{t} + shift > a.capacity) return;
  const Half* k = a.k_cache + std::int64_t{bc} * a.capacity * dims;
  Half* lo = a.summary + std::int64_t{bc} * 2 * dims * pages;
  Half* hi = lo + dims * pages;
  const std::int64_t work = std::int64_t{last_page - first} * dims;
  for (std::int64_t i = threadIdx.x; i < work; i += kThreads) {
    const int p = first + static_cast<int>(i / dims);
    const std::int64_t d = i % dims;
    // The first of equal values stays (slot order), as in the reference.
    Half mn = k[(std::int64_t{p} * a.page_size + shift) * dims + d];
    Half mx = mn;
    float fmn = to_float(mn), fmx = fmn;
    const int end = min(t, (p + 1) * a.page_size);
    for (int s = p * a.page_size + 1; s < end; ++s) {
      const Half v = k[(s + shift) * dims + d];
      const float f = to_float(v);
      if (f < fmn) fmn = f, mn = v;
      if (f > fmx) fmx = f, mx = v;
    }
    lo[d * pages + p] = mn;
    hi[d * pages + p] = mx;
  }
}

// Whether page x outranks page y: the higher bound, equal bounds the newer page.
__device__ bool outranks(const float* bound, int x, int y) {
  return bound[x] != bound[y] ? bound[x] > bound[y] : x > y;
}

__global__ void __launch_bounds__(kThreads) page_select_kernel(PageSelectArgs a) {
  extern __shared__ float bound[];  // [max_pages], then int chosen[max_pages]
  int* chosen = reinterpret_cast<int*>(bound + a.max_pages);
  const int bc = static_cast<int>(blockIdx.x);
  const int b = bc / a.kv_heads, c = bc % a.kv_heads;
  const int group = a.heads / a.kv_heads;
  // The host checks both (a cache of at most max_pages pages, 2 <= s <= max_selected); clamped so
  // that a wrong argument cannot write past the block's shared memory or the caller's rows.
  const int n = min((a.slot_count[b] + a.page_size - 1) / a.page_size, a.max_pages);
  const int s = min(max(a.pages_per_step[b], 2), a.max_selected);
  const std::int64_t dims = a.head_dim, pages = a.max_pages;
  const std::int64_t qkv_dim =
      a.q_stride > 0 ? a.q_stride : std::int64_t{a.heads + 2 * a.kv_heads} * dims;
  const Half* lo = a.summary + std::int64_t{bc} * 2 * dims * pages;
  const Half* hi = lo + dims * pages;
  const Half* q0 = a.qkv + b * qkv_dim + std::int64_t{c * group} * dims;
  for (int p = threadIdx.x; p < n; p += kThreads) {
    float total = 0.0f;
    for (int g = 0; g < group; ++g) {  // the group's bounds, added in head order
      float u = 0.0f;
      for (std::int64_t d = 0; d < dims; ++d) {
        const float qd = to_float(q0[g * dims + d]);
        // Exact products (two fp16 values), summed in ascending d without contraction.
        u = __fadd_rn(u, fmaxf(__fmul_rn(qd, to_float(hi[d * pages + p])),
                               __fmul_rn(qd, to_float(lo[d * pages + p]))));
      }
      total = __fadd_rn(total, u);
    }
    bound[p] = total;
    if (a.bounds != nullptr) a.bounds[std::int64_t{bc} * pages + p] = total;
  }
  __syncthreads();
  // Page p is chosen when every page is, when it is the sink or the newest, or when fewer than
  // s - 2 of the middle pages outrank it.
  for (int p = threadIdx.x; p < n; p += kThreads) {
    int take = n <= s || p == 0 || p == n - 1;
    if (!take) {
      int above = 0;
      for (int q = 1; q < n - 1; ++q) above += q != p && outranks(bound, q, p);
      take = above < s - 2;
    }
    chosen[p] = take;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    std::int32_t* out = a.selected + std::int64_t{bc} * a.max_selected;
    int count = 0;
    for (int p = 0; p < n; ++p) {
      if (chosen[p]) out[count++] = p;
    }
    a.selected_count[bc] = count;
  }
}

// Copies bytes [0, n) of src to dst, 16 or 4 bytes a thread where both ends are aligned so.
__device__ void copy_run(const std::uint8_t* src, std::uint8_t* dst, std::int64_t n) {
  const auto aligned = [&](std::uintptr_t to) {
    return (reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst) |
            static_cast<std::uintptr_t>(n)) %
               to ==
           0;
  };
  if (aligned(16)) {
    const auto* s = reinterpret_cast<const uint4*>(src);
    auto* d = reinterpret_cast<uint4*>(dst);
    for (std::int64_t i = threadIdx.x; i < n / 16; i += kThreads) d[i] = s[i];
  } else if (aligned(4)) {
    const auto* s = reinterpret_cast<const std::uint32_t*>(src);
    auto* d = reinterpret_cast<std::uint32_t*>(dst);
    for (std::int64_t i = threadIdx.x; i < n / 4; i += kThreads) d[i] = s[i];
  } else {
    for (std::int64_t i = threadIdx.x; i < n; i += kThreads) dst[i] = src[i];
  }
}

// Blocks per (sequence, kv head) of a listed gather: each walks the list from its own entry in
// strides of this many, so a long list (max_pages) costs no empty blocks.
constexpr int kGatherBlocksPerRow = 32;

// Whether page p is in the ascending list `there` of `count` entries (a binary search).
__device__ bool listed(const std::int32_t* there, int count, std::int64_t p) {
  int lo = 0, hi = count;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (there[mid] < p) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < count && there[lo] == p;
}

__global__ void __launch_bounds__(kThreads) gather_pages_kernel(GatherPagesArgs a) {
  const int bc = static_cast<int>(blockIdx.x);
  const int b = bc / a.kv_heads;
  const int t = min(a.slot_count[b], a.capacity);  // clamped: the host cannot check device values
  const int newest = a.first_page[b];
  const std::int64_t base = std::int64_t{bc} * a.capacity;
  const int dst_slots = a.dst_capacity > 0 ? a.dst_capacity : a.capacity;
  const std::int64_t dst_base = std::int64_t{bc} * dst_slots;
  // Source slots [from, to) land at dst slot `at` (compact), or where they are; a run that
  // would end past the compact staging is not copied (the host cannot check device values).
  const auto copy_slots = [&](std::int64_t from, std::int64_t to, std::int64_t at) {
    if (a.dst_capacity == 0) at = from;
    if (to <= from || at < 0 || at + (to - from) > dst_slots) return;
    copy_run(a.src + (base + from) * a.row_bytes, a.dst + (dst_base + at) * a.row_bytes,
             (to - from) * a.row_bytes);
    if (a.copied != nullptr && threadIdx.x == 0) {
      atomicAdd(a.copied, static_cast<unsigned long long>((to - from) * a.row_bytes));
    }
  };
  if (a.pages == nullptr) {
    const std::int64_t at = a.dst_capacity > 0 ? std::int64_t{a.dst_page[b]} * a.page_size : 0;
    copy_slots(std::int64_t{newest} * a.page_size, t - 1, at);
    return;
  }
  const int count = min(a.page_count[bc], a.max_selected);
  const std::int32_t* there =
      a.present != nullptr ? a.present + std::int64_t{bc} * a.max_selected : nullptr;
  const int there_count = there != nullptr ? min(a.present_count[bc], a.max_selected) : 0;
  for (int i = static_cast<int>(blockIdx.y); i < count; i += static_cast<int>(gridDim.y)) {
    const std::int64_t p = a.pages[std::int64_t{bc} * a.max_selected + i];
    if (p < 0 || p >= newest) continue;
    if (there != nullptr && listed(there, there_count, p)) continue;
    copy_slots(p * a.page_size, min((p + 1) * a.page_size, std::int64_t{t} - 1),
               std::int64_t{i} * a.page_size);
  }
}

}  // namespace

void page_summary(const PageSummaryArgs& args, cudaStream_t stream) {
  if (args.batch <= 0) return;
  OFFGEN_CUDA_REQUIRE(
      page_selection_shapes_valid(args.kv_heads, args.kv_heads, args.page_size, args.max_pages),
      "page_summary: kv_heads, page_size and max_pages must be >= 1");
  page_summary_kernel<<<static_cast<unsigned>(args.batch * args.kv_heads), kThreads, 0, stream>>>(
      args);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

void page_select(const PageSelectArgs& args, cudaStream_t stream) {
  if (args.batch <= 0) return;
  OFFGEN_CUDA_REQUIRE(
      page_selection_shapes_valid(args.heads, args.kv_heads, args.page_size, args.max_pages),
      "page_select: heads must be a multiple of kv_heads, page_size and max_pages >= 1");
  const std::size_t shared =
      static_cast<std::size_t>(args.max_pages) * (sizeof(float) + sizeof(int));
  OFFGEN_CUDA_REQUIRE(shared <= kMaxSharedBytes,
                      "page_select: more pages than one block stages (raise the page size)");
  page_select_kernel<<<static_cast<unsigned>(args.batch * args.kv_heads), kThreads, shared,
                       stream>>>(args);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

void gather_pages(const GatherPagesArgs& args, cudaStream_t stream) {
  if (args.batch <= 0) return;
  OFFGEN_CUDA_REQUIRE(page_selection_shapes_valid(args.kv_heads, args.kv_heads, args.page_size,
                                                  args.pages == nullptr ? 1 : args.max_selected) &&
                          args.row_bytes > 0,
                      "gather_pages: kv_heads, page_size, max_selected and row_bytes must be >= 1");
  OFFGEN_CUDA_REQUIRE(args.dst_capacity == 0 ||
                          (args.present == nullptr && (args.pages != nullptr || args.dst_page)),
                      "gather_pages: a compact staging takes no present pages, and a place for "
                      "the newest page");
  const dim3 grid(static_cast<unsigned>(args.batch * args.kv_heads),
                  args.pages == nullptr
                      ? 1U
                      : static_cast<unsigned>(std::min(args.max_selected, kGatherBlocksPerRow)));
  gather_pages_kernel<<<grid, kThreads, 0, stream>>>(args);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace offgen::kernels::cuda
