// Vectorised fp16 access shared by the element-wise CUDA kernels: a vector of kVec halves moved
// as one load or store (16 bytes at kVec = 8), and the widest width a launch can use.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>

namespace offgen::kernels::cuda {

// Read and write whole vectors through HalfVec pointers and copy them by value: a reference to a
// __half inside global memory lets nvcc split the access into per-__half loads.
template <int kVec>
struct alignas(2 * kVec) HalfVec {
  __half h[kVec];
};

// Widest vector (8, 4, 2 or 1 halves) that divides n and to which every pointer is aligned; with
// a row length that is a multiple of it, every row start is aligned too.
inline int pick_vec(std::int64_t n, std::initializer_list<const void*> pointers) {
  for (int vec = 8; vec > 1; vec /= 2) {
    bool ok = n % vec == 0;
    for (const void* p : pointers) {
      ok = ok && reinterpret_cast<std::uintptr_t>(p) % (sizeof(__half) * vec) == 0;
    }
    if (ok) return vec;
  }
  return 1;
}

}  // namespace offgen::kernels::cuda
