// GEMMs of the forward pass on cuBLASLt: fp16 inputs, fp32 accumulation, bias and ReLU fused in
// the epilogue, one rounding to fp16 (semantics: kernels/linear_args.h). One Gemm per stream: it
// owns the cuBLASLt handle and its workspace.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "kernels/linear_args.h"

namespace offgen::kernels::cuda {

class Gemm {
 public:
  explicit Gemm(cudaStream_t stream);
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  ~Gemm();

  // Both enqueue on the stream given at construction.
  void linear(const LinearArgs& args);
  void logits(const LogitsArgs& args);

 private:
  // One GEMM shape's descriptors and its algorithm, cached because the forward pass issues the
  // same few shapes every step and the heuristic query costs tens of microseconds.
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  // (m, n, k, epilogue, output type, alignment of the four pointers)
  using PlanKey = std::tuple<std::int64_t, int, int, int, int, int>;
  // The same without m: the algorithm depends on nothing else, so a row's bits do not depend on
  // how many rows share its GEMM (a request's result never depends on its batch-mates).
  using AlgoKey = std::tuple<int, int, int, int, int>;
  Plan& plan(const PlanKey& key);
  const cublasLtMatmulAlgo_t& algo(const AlgoKey& key, cublasLtMatmulDesc_t op,
                                   cublasLtMatrixLayout_t weight,
                                   cublasLtMatmulPreference_t preference);
  void run(const void* x, const void* weight, const void* bias, void* y, std::int64_t m, int n,
           int k, cublasLtEpilogue_t epilogue, cudaDataType_t out_type);

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  std::map<PlanKey, Plan> plans_;
  std::map<AlgoKey, cublasLtMatmulAlgo_t> algos_;
};

}  // namespace offgen::kernels::cuda
