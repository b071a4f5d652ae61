// Ops on the cuda device: every call launches on the device's compute stream and returns; the
// kernels are kernels/cuda (GEMMs through cuBLASLt). Built only with the CUDA toolkit; the engine
// reaches it through make_cuda_ops() (cuda_ops_factory.h), so no other file needs CUDA headers.
#pragma once

#include <cuda_runtime_api.h>

#include "engine/device/cuda_device.h"
#include "kernels/cuda/gemm.h"
#include "kernels/ops.h"

namespace offgen {

class CudaOps final : public Ops {
 public:
  explicit CudaOps(CudaDevice& device);

  void gather_rows(const Half* table, std::int64_t table_rows, int dim, const std::int32_t* ids,
                   std::int64_t n, Half* out) override;
  void add_position_embeddings(Half* x, const Half* table, int dim, const std::int32_t* positions,
                               std::int64_t n, int offset) override;
  void layer_norm(const Half* x, const Half* gamma, const Half* beta, Half* y, std::int64_t rows,
                  int dim, float eps) override;
  void linear(const Half* x, const Half* weight, const Half* bias, Half* y, std::int64_t m, int n,
              int k, kernels::Activation activation) override;
  void add_inplace(Half* y, const Half* x, std::int64_t n) override;
  void prefill_attention(const kernels::PrefillAttentionArgs& args) override;
  void store_prefill_kv(const Half* qkv, const std::int32_t* token_slot, int batch, int seq,
                        int heads, int head_dim, Half* k_cache, Half* v_cache,
                        int capacity) override;
  void append_kv(const Half* qkv, const std::int32_t* write_slot, int batch, int heads,
                 int head_dim, Half* k_cache, Half* v_cache, int capacity) override;
  void decode_attention(const kernels::DecodeAttentionArgs& args) override;
  void logits(const Half* x, const Half* embed, float* out, std::int64_t m, int vocab,
              int dim) override;
  void log_softmax(float* values, std::int64_t rows, int cols) override;
  void token_logprobs(const float* logits, const std::int32_t* targets, float* out,
                      std::int64_t rows, int vocab) override;
  void argmax_rows(const float* logits, std::int64_t rows, int vocab, std::int32_t* out) override;
  void sample_rows(const kernels::SampleRowsArgs& args) override;
  void h2o_prefill_keep(const kernels::H2oPrefillArgs& args) override;
  void h2o_decode_update(const kernels::H2oDecodeArgs& args) override;

 private:
  cudaStream_t stream_;
  kernels::cuda::Gemm gemm_;
};

}  // namespace offgen
