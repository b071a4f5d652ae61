// cuBLASLt GEMMs (host code only: the kernels are cuBLAS's) for the linear layers and the LM head.
// cuBLASLt is column-major, so the row-major product y[m, n] = x[m, k] · W[n, k]ᵀ is computed as
// its transpose: yᵀ (n × m, ld n) = Wᵀ-as-stored (op T on a k × n, ld k matrix) · xᵀ-as-stored (k ×
// m, ld k). The bias then runs along D's rows (n), which is what the BIAS epilogues broadcast.
// Compute and scale type fp32, so bias and ReLU are applied to the fp32 accumulator and the result
// is rounded to fp16 once.
#include <bit>
#include <cstdint>
#include <string>

#include "engine/core/cuda_check.h"
#include "engine/core/error.h"
#include "kernels/cuda/gemm.h"

namespace offgen::kernels::cuda {
namespace {

// 32 MiB: what NVIDIA recommends for Hopper's largest cuBLASLt kernels.
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

// The row count the algorithm of an (n, k) shape is chosen at, whatever the rows of a call: a
// decode step's batch (1 to a few hundred rows) and a prefill's batch x prompt (thousands) then
// run one kernel configuration, which sums every output in the same order.
constexpr std::uint64_t kAlgoRows = 128;
// Heuristic candidates looked at for one without split-K.
constexpr int kAlgoCandidates = 16;

std::int32_t split_k_of(const cublasLtMatmulAlgo_t& algo) {
  std::int32_t splits = 1;
  std::size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                           sizeof(splits), &written) != CUBLAS_STATUS_SUCCESS) {
    return 1;
  }
  return splits;
}

int alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  for (int a = 256; a > 1; a /= 2) {
    if (address % static_cast<std::uintptr_t>(a) == 0) return a;
  }
  return 1;
}

int key_alignment(const void* x, const void* weight, const void* bias, const void* y) {
  // log2 of four alignments of at most 256 (0..8, 4 bits each) packed into one key field.
  auto bits = [](const void* p) {
    return p == nullptr ? 0 : std::countr_zero(static_cast<unsigned>(alignment_of(p)));
  };
  return bits(x) | bits(weight) << 4 | bits(bias) << 8 | bits(y) << 12;
}

}  // namespace

Gemm::Gemm(cudaStream_t stream) : stream_(stream) {
  OFFGEN_CUBLAS_CHECK(cublasLtCreate(&handle_));
  try {
    OFFGEN_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  } catch (...) {
    cublasLtDestroy(handle_);
    throw;
  }
  workspace_bytes_ = kWorkspaceBytes;
}

Gemm::~Gemm() {
  // Destructors never throw: a failure here only leaks, and the process is usually ending.
  for (auto& [key, plan] : plans_) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.d);
    cublasLtMatmulDescDestroy(plan.op);
  }
  // Queued GEMMs may still read the workspace.
  cudaStreamSynchronize(stream_);
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

Gemm::Plan& Gemm::plan(const PlanKey& key) {
  auto found = plans_.find(key);
  if (found != plans_.end()) return found->second;
  const auto [m, n, k, epilogue_value, out_type_value, alignments] = key;
  const auto epilogue = static_cast<cublasLtEpilogue_t>(epilogue_value);
  const auto out_type = static_cast<cudaDataType_t>(out_type_value);

  Plan p;
  OFFGEN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  Plan* owned = &p;
  struct Release {
    Plan*& plan;
    ~Release() {
      if (plan == nullptr) return;
      if (plan->a) cublasLtMatrixLayoutDestroy(plan->a);
      if (plan->b) cublasLtMatrixLayoutDestroy(plan->b);
      if (plan->d) cublasLtMatrixLayoutDestroy(plan->d);
      cublasLtMatmulDescDestroy(plan->op);
    }
  } release{owned};

  const cublasOperation_t transpose = CUBLAS_OP_T;
  const cublasOperation_t none = CUBLAS_OP_N;
  OFFGEN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                                     sizeof(transpose)));
  OFFGEN_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof(none)));
  OFFGEN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                     sizeof(epilogue)));
  const auto rows_n = static_cast<std::uint64_t>(n);
  const auto rows_k = static_cast<std::uint64_t>(k);
  const auto cols_m = static_cast<std::uint64_t>(m);
  OFFGEN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16F, rows_k, rows_n, k));
  OFFGEN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16F, rows_k, cols_m, k));
  OFFGEN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, out_type, rows_n, cols_m, n));

  cublasLtMatmulPreference_t preference = nullptr;
  OFFGEN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  struct ReleasePreference {
    cublasLtMatmulPreference_t p;
    ~ReleasePreference() { cublasLtMatmulPreferenceDestroy(p); }
  } release_preference{preference};
  OFFGEN_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace_bytes_, sizeof(workspace_bytes_)));
  // Split-K partial sums only in fp32 (the compute type): the INPLACE and OUTPUT_TYPE reduction
  // schemes accumulate the partials in D's type, which for fp16 outputs would round more than
  // once (the contract is one rounding of the fp32 sum; kernels/linear_args.h).
  const std::uint32_t reduction_mask = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  OFFGEN_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                           &reduction_mask, sizeof(reduction_mask)));
  // Tell the heuristic how the actual pointers are aligned, so it never picks a kernel that
  // assumes more (pointers of a later call with the same key have the same alignments).
  const cublasLtMatmulPreferenceAttributes_t align_attr[] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  // Key fields: x (our B), weight (our A), bias, y (C and D).
  const int shifts[] = {0, 4, 12, 12};
  for (int i = 0; i < 4; ++i) {
    const std::uint32_t bytes = 1u << ((alignments >> shifts[i]) & 0xF);
    OFFGEN_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(preference, align_attr[i], &bytes, sizeof(bytes)));
  }

  p.algo = algo({n, k, epilogue_value, out_type_value, alignments}, p.op, p.a, preference);
  // The algorithm was chosen at kAlgoRows rows; it must also run at this call's m.
  cublasLtMatmulHeuristicResult_t check{};
  const cublasStatus_t status =
      cublasLtMatmulAlgoCheck(handle_, p.op, p.a, p.b, p.d, p.d, &p.algo, &check);
  OFFGEN_CHECK(status == CUBLAS_STATUS_SUCCESS && check.workspaceSize <= workspace_bytes_,
               "cuBLASLt's algorithm for {} x {} GEMMs (chosen at {} rows) cannot run at {} rows "
               "(status {}, workspace {} bytes)",
               n, k, kAlgoRows, m, static_cast<int>(status), check.workspaceSize);
  owned = nullptr;  // the map owns the descriptors from here
  return plans_.emplace(key, p).first->second;
}

// The heuristic's best algorithm for the shape at kAlgoRows rows among those without split-K,
// else its best with split-K turned off; cached per key. A fixed split count would also sum in
// one order at every m, but its fp32 partials need workspace that grows with m and would fail
// the check at a prefill's thousands of rows.
const cublasLtMatmulAlgo_t& Gemm::algo(const AlgoKey& key, cublasLtMatmulDesc_t op,
                                       cublasLtMatrixLayout_t a,
                                       cublasLtMatmulPreference_t preference) {
  auto found = algos_.find(key);
  if (found != algos_.end()) return found->second;
  const auto [n, k, epilogue_value, out_type_value, alignments] = key;
  const auto out_type = static_cast<cudaDataType_t>(out_type_value);
  // The weight's layout does not depend on m; the activations' and the output's at kAlgoRows.
  cublasLtMatrixLayout_t b = nullptr, d = nullptr;
  struct ReleaseLayouts {
    cublasLtMatrixLayout_t& b;
    cublasLtMatrixLayout_t& d;
    ~ReleaseLayouts() {
      if (b) cublasLtMatrixLayoutDestroy(b);
      if (d) cublasLtMatrixLayoutDestroy(d);
    }
  } release{b, d};
  const auto rows_n = static_cast<std::uint64_t>(n);
  const auto rows_k = static_cast<std::uint64_t>(k);
  OFFGEN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b, CUDA_R_16F, rows_k, kAlgoRows, k));
  OFFGEN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d, out_type, rows_n, kAlgoRows, n));

  cublasLtMatmulHeuristicResult_t results[kAlgoCandidates]{};
  int count = 0;
  OFFGEN_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, op, a, b, d, d, preference,
                                                     kAlgoCandidates, results, &count));
  OFFGEN_CHECK(count > 0,
               "cuBLASLt has no algorithm for a {} x {} x {} GEMM (epilogue {}, output type {})",
               kAlgoRows, n, k, epilogue_value, out_type_value);
  for (int i = 0; i < count; ++i) {
    if (split_k_of(results[i].algo) <= 1) return algos_.emplace(key, results[i].algo).first->second;
  }
  cublasLtMatmulAlgo_t chosen = results[0].algo;
  const std::int32_t one = 1;
  const std::uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  OFFGEN_CUBLAS_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&chosen, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                           &one, sizeof(one)));
  OFFGEN_CUBLAS_CHECK(cublasLtMatmulAlgoConfigSetAttribute(
      &chosen, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &no_reduction, sizeof(no_reduction)));
  return algos_.emplace(key, chosen).first->second;
}

void Gemm::run(const void* x, const void* weight, const void* bias, void* y, std::int64_t m, int n,
               int k, cublasLtEpilogue_t epilogue, cudaDataType_t out_type) {
  if (m == 0 || n == 0) return;
  Plan& p = plan({m, n, k, static_cast<int>(epilogue), static_cast<int>(out_type),
                  key_alignment(x, weight, bias, y)});
  if (bias != nullptr) {
    OFFGEN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &bias, sizeof(bias)));
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;
  OFFGEN_CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, weight, p.a, x, p.b, &beta, y, p.d, y,
                                     p.d, &p.algo, workspace_, workspace_bytes_, stream_));
}

void Gemm::linear(const LinearArgs& args) {
  const bool bias = args.bias != nullptr;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (args.activation == Activation::relu) {
    epilogue = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  } else if (bias) {
    epilogue = CUBLASLT_EPILOGUE_BIAS;
  }
  run(args.x, args.weight, args.bias, args.y, args.rows, args.out_features, args.in_features,
      epilogue, CUDA_R_16F);
}

void Gemm::logits(const LogitsArgs& args) {
  run(args.x, args.embed, nullptr, args.out, args.rows, args.vocab, args.dim,
      CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_32F);
}

}  // namespace offgen::kernels::cuda
