#include "engine/runtime/cpu_ops.h"

#include "engine/runtime/sampler.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/h2o_eviction.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/softmax.h"
#include "kernels/reference/reference.h"

namespace offgen {

namespace cpu = kernels::cpu;
namespace ref = kernels::reference;

void CpuOps::gather_rows(const Half* table, std::int64_t table_rows, int dim,
                         const std::int32_t* ids, std::int64_t n, Half* out) {
  enqueue<cpu::gather_rows, ref::gather_rows>(table, table_rows, dim, ids, n, out);
}

void CpuOps::add_position_embeddings(Half* x, const Half* table, int dim,
                                     const std::int32_t* positions, std::int64_t n, int offset) {
  enqueue<cpu::add_position_embeddings, ref::add_position_embeddings>(x, table, dim, positions, n,
                                                                      offset);
}

void CpuOps::layer_norm(const Half* x, const Half* gamma, const Half* beta, Half* y,
                        std::int64_t rows, int dim, float eps) {
  enqueue<cpu::layer_norm, ref::layer_norm>(x, gamma, beta, y, rows, dim, eps);
}

void CpuOps::linear(const Half* x, const Half* weight, const Half* bias, Half* y, std::int64_t m,
                    int n, int k, kernels::Activation activation) {
  enqueue<cpu::linear, ref::linear>(x, weight, bias, y, m, n, k, activation);
}

void CpuOps::add_inplace(Half* y, const Half* x, std::int64_t n) {
  enqueue<cpu::add_inplace, ref::add_inplace>(y, x, n);
}

void CpuOps::prefill_attention(const kernels::PrefillAttentionArgs& args) {
  enqueue<cpu::prefill_attention, ref::prefill_attention>(args);
}

void CpuOps::store_prefill_kv(const Half* qkv, const std::int32_t* token_slot, int batch, int seq,
                              int heads, int head_dim, Half* k_cache, Half* v_cache, int capacity) {
  enqueue<cpu::store_prefill_kv, ref::store_prefill_kv>(qkv, token_slot, batch, seq, heads,
                                                        head_dim, k_cache, v_cache, capacity);
}

void CpuOps::append_kv(const Half* qkv, const std::int32_t* write_slot, int batch, int heads,
                       int head_dim, Half* k_cache, Half* v_cache, int capacity) {
  enqueue<cpu::append_kv, ref::append_kv>(qkv, write_slot, batch, heads, head_dim, k_cache, v_cache,
                                          capacity);
}

void CpuOps::decode_attention(const kernels::DecodeAttentionArgs& args) {
  enqueue<cpu::decode_attention, ref::decode_attention>(args);
}

void CpuOps::logits(const Half* x, const Half* embed, float* out, std::int64_t m, int vocab,
                    int dim) {
  enqueue<cpu::logits, ref::logits>(x, embed, out, m, vocab, dim);
}

void CpuOps::log_softmax(float* values, std::int64_t rows, int cols) {
  enqueue<cpu::log_softmax, ref::log_softmax>(values, rows, cols);
}

void CpuOps::token_logprobs(const float* logits, const std::int32_t* targets, float* out,
                            std::int64_t rows, int vocab) {
  enqueue<cpu::token_logprobs, ref::token_logprobs>(logits, targets, out, rows, vocab);
}

void CpuOps::argmax_rows(const float* logits, std::int64_t rows, int vocab, std::int32_t* out) {
  enqueue<cpu::argmax_rows, ref::argmax_rows>(logits, rows, vocab, out);
}

void CpuOps::sample_rows(const kernels::SampleRowsArgs& args) {
  enqueue<cpu::sample_rows, ref::sample_rows>(args);
}

// The policy code (policies/h2o_policy.cpp) is the reference these kernels are tested against,
// so both kernel sets run the same eviction kernels.
void CpuOps::h2o_prefill_keep(const kernels::H2oPrefillArgs& args) {
  stream_.enqueue([=] { cpu::h2o_prefill_keep(args); });
}

void CpuOps::h2o_decode_update(const kernels::H2oDecodeArgs& args) {
  stream_.enqueue([=] { cpu::h2o_decode_update(args); });
}

}  // namespace offgen
