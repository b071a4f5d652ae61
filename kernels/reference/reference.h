// Naive single-threaded reference kernels: the truth every implementation (CPU now, CUDA later) is
// checked against by tests/kernels. Same names, signatures and semantics as kernels/cpu/*.h.
// Written for obviousness, not speed: plain loops, double accumulation, each fp16 output rounded
// once from the double result (so a reference output is the correctly rounded exact value up to
// double's own error, far below fp16's).
#pragma once

#include <cstdint>

#include "engine/core/half.h"
#include "kernels/activation.h"
#include "kernels/attention_args.h"
#include "kernels/sampling_args.h"

namespace offgen::kernels::reference {

// embedding.h
void gather_rows(const Half* table, std::int64_t table_rows, int dim, const std::int32_t* ids,
                 std::int64_t n, Half* out);
void add_position_embeddings(Half* x, const Half* table, int dim, const std::int32_t* positions,
                             std::int64_t n, int offset);

// layer_norm.h
void layer_norm(const Half* x, const Half* gamma, const Half* beta, Half* y, std::int64_t rows,
                int dim, float eps);

// linear.h
void linear(const Half* x, const Half* weight, const Half* bias, Half* y, std::int64_t m, int n,
            int k, Activation activation);
void logits(const Half* x, const Half* embed, float* out, std::int64_t m, int vocab, int dim);

// elementwise.h
void add_inplace(Half* y, const Half* x, std::int64_t n);

// softmax.h
void log_softmax(float* values, std::int64_t rows, int cols);
void token_logprobs(const float* logits, const std::int32_t* targets, float* out, std::int64_t rows,
                    int vocab);

// attention.h
void prefill_attention(const PrefillAttentionArgs& args);
void store_prefill_kv(const Half* qkv, const std::int32_t* token_slot, int batch, int seq,
                      int heads, int head_dim, Half* k_cache, Half* v_cache, int capacity);
void append_kv(const Half* qkv, const std::int32_t* write_slot, int batch, int heads, int head_dim,
               Half* k_cache, Half* v_cache, int capacity);
void decode_attention(const DecodeAttentionArgs& args);

// sampling.h
void sample_rows(const SampleRowsArgs& args);
void argmax_rows(const float* logits, std::int64_t rows, int vocab, std::int32_t* out);

}  // namespace offgen::kernels::reference
