#include "engine/runtime/cuda_ops.h"

#include "engine/core/error.h"
#include "engine/runtime/cuda_ops_factory.h"

#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/h2o_eviction.h"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/softmax.h"

namespace offgen {

namespace cuda = kernels::cuda;

CudaOps::CudaOps(CudaDevice& device)
    : stream_(device.cuda_stream(StreamRole::compute)), gemm_(stream_) {}

void CudaOps::gather_rows(const Half* table, std::int64_t table_rows, int dim,
                          const std::int32_t* ids, std::int64_t n, Half* out) {
  cuda::gather_rows(table, table_rows, dim, ids, n, out, stream_);
}

void CudaOps::add_position_embeddings(Half* x, const Half* table, int dim,
                                      const std::int32_t* positions, std::int64_t n, int offset) {
  cuda::add_position_embeddings(x, table, dim, positions, n, offset, stream_);
}

void CudaOps::layer_norm(const Half* x, const Half* gamma, const Half* beta, Half* y,
                         std::int64_t rows, int dim, float eps) {
  cuda::layer_norm(x, gamma, beta, y, rows, dim, eps, stream_);
}

void CudaOps::linear(const Half* x, const Half* weight, const Half* bias, Half* y, std::int64_t m,
                     int n, int k, kernels::Activation activation) {
  gemm_.linear(x, weight, bias, y, m, n, k, activation);
}

void CudaOps::add_inplace(Half* y, const Half* x, std::int64_t n) {
  cuda::add_inplace(y, x, n, stream_);
}

void CudaOps::prefill_attention(const kernels::PrefillAttentionArgs& args) {
  cuda::prefill_attention(args, stream_);
}

void CudaOps::store_prefill_kv(const Half* qkv, const std::int32_t* token_slot, int batch, int seq,
                               int heads, int head_dim, Half* k_cache, Half* v_cache,
                               int capacity) {
  cuda::store_prefill_kv(qkv, token_slot, batch, seq, heads, head_dim, k_cache, v_cache, capacity,
                         stream_);
}

void CudaOps::append_kv(const Half* qkv, const std::int32_t* write_slot, int batch, int heads,
                        int head_dim, Half* k_cache, Half* v_cache, int capacity) {
  cuda::append_kv(qkv, write_slot, batch, heads, head_dim, k_cache, v_cache, capacity, stream_);
}

void CudaOps::decode_attention(const kernels::DecodeAttentionArgs& args) {
  cuda::decode_attention(args, stream_);
}

void CudaOps::logits(const Half* x, const Half* embed, float* out, std::int64_t m, int vocab,
                     int dim) {
  gemm_.logits(x, embed, out, m, vocab, dim);
}

void CudaOps::log_softmax(float* values, std::int64_t rows, int cols) {
  cuda::log_softmax(values, rows, cols, stream_);
}

void CudaOps::token_logprobs(const float* logits, const std::int32_t* targets, float* out,
                             std::int64_t rows, int vocab) {
  cuda::token_logprobs(logits, targets, out, rows, vocab, stream_);
}

void CudaOps::argmax_rows(const float* logits, std::int64_t rows, int vocab, std::int32_t* out) {
  cuda::argmax_rows(logits, rows, vocab, out, stream_);
}

void CudaOps::sample_rows(const kernels::SampleRowsArgs& args) {
  cuda::sample_rows(args, stream_);
}

void CudaOps::h2o_prefill_keep(const kernels::H2oPrefillArgs& args) {
  cuda::h2o_prefill_keep(args, stream_);
}

void CudaOps::h2o_decode_update(const kernels::H2oDecodeArgs& args) {
  cuda::h2o_decode_update(args, stream_);
}

std::unique_ptr<Ops> make_cuda_ops(Device& device) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  OFFGEN_CHECK(cuda_device != nullptr, "CUDA ops need the cuda device (got {})", device.name());
  return std::make_unique<CudaOps>(*cuda_device);
}

}  // namespace offgen
