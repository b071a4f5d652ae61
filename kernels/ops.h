// The ops of the OPT forward pass as the model issues them: asynchronous, on a device's compute
// stream, over buffers of that device. One implementation per device kind (cpu_ops.h, and the
// CUDA one) — the model code above never knows which. Semantics of each op: the kernel headers in
// kernels/cpu/ and kernels/attention_args.h; the naive references in kernels/reference/.
//
// Every pointer is device memory of the Ops' device; calls only enqueue work (return immediately).
#pragma once

#include <cstdint>

#include "engine/core/half.h"
#include "kernels/activation.h"
#include "kernels/attention_args.h"
#include "kernels/eviction_args.h"
#include "kernels/sampling_args.h"

namespace offgen {

// Which kernels the cpu device runs: the TBB ones users run, or the naive references.
enum class CpuKernelSet { optimized, reference };

class Ops {
 public:
  virtual ~Ops() = default;

  virtual void gather_rows(const Half* table, std::int64_t table_rows, int dim,
                           const std::int32_t* ids, std::int64_t n, Half* out) = 0;
  virtual void add_position_embeddings(Half* x, const Half* table, int dim,
                                       const std::int32_t* positions, std::int64_t n,
                                       int offset) = 0;
  virtual void layer_norm(const Half* x, const Half* gamma, const Half* beta, Half* y,
                          std::int64_t rows, int dim, float eps) = 0;
  virtual void linear(const Half* x, const Half* weight, const Half* bias, Half* y, std::int64_t m,
                      int n, int k, kernels::Activation activation) = 0;
  virtual void add_inplace(Half* y, const Half* x, std::int64_t n) = 0;
  virtual void prefill_attention(const kernels::PrefillAttentionArgs& args) = 0;
  virtual void store_prefill_kv(const Half* qkv, const std::int32_t* token_slot, int batch, int seq,
                                int heads, int head_dim, Half* k_cache, Half* v_cache,
                                int capacity) = 0;
  virtual void append_kv(const Half* qkv, const std::int32_t* write_slot, int batch, int heads,
                         int head_dim, Half* k_cache, Half* v_cache, int capacity) = 0;
  virtual void decode_attention(const kernels::DecodeAttentionArgs& args) = 0;
  virtual void logits(const Half* x, const Half* embed, float* out, std::int64_t m, int vocab,
                      int dim) = 0;
  virtual void log_softmax(float* values, std::int64_t rows, int cols) = 0;
  virtual void token_logprobs(const float* logits, const std::int32_t* targets, float* out,
                              std::int64_t rows, int vocab) = 0;

  // Greedy picks: out[r] = argmax of logits row r (ties: the lowest id), so a greedy step copies
  // one id per sequence back to the host instead of the logits.
  virtual void argmax_rows(const float* logits, std::int64_t rows, int vocab,
                           std::int32_t* out) = 0;
  // Sampled picks, one per row, where the logits are (kernels/sampling_args.h): a sampling step
  // copies one id per sequence back, as a greedy one does.
  virtual void sample_rows(const kernels::SampleRowsArgs& args) = 0;

  // Score-keeping eviction (h2o) where the cache lives, right after the attention that produced
  // the probabilities. Semantics: kernels/eviction_args.h.
  virtual void h2o_prefill_keep(const kernels::H2oPrefillArgs& args) = 0;
  virtual void h2o_decode_update(const kernels::H2oDecodeArgs& args) = 0;
};

}  // namespace offgen
