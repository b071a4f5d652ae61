// bf16 prefill attention (PrefillAttentionArgs::prefill_math bf16 on a CPU with AVX512-BF16):
// scores q·k over bf16 q and k, and p·v over bf16 probabilities and v, both summed in fp32 — by
// Intel's AMX tile unit (tdpbf16ps) where the process has it (use_amx_bf16()), else by the
// AVX-512 dot product (vdpbf16ps); the softmax in fp32.
//
// Per (sequence, query head, block of queries), with keys and queries counted from the sequence's
// first real token: K as bf16 panels (keys as columns), V as pair-interleaved bf16 rows, and the
// queries 32 at a time: their score rows, an fp32 softmax with the row max subtracted whose
// exponentials are rounded to bf16 and summed in fp32 in one order fixed by the row's length, then
// p·v, scaled by the sum's reciprocal and rounded once to fp16. Key sums (H2O and its kin) add
// each probability — a rounded exponential times that reciprocal — in fp32, query by query.
//
// AMX multiplies the 32 queries in 2 × 2 tile passes over 16-key (16-dim) blocks. The dot product
// takes register tiles of queries × 16-key (16-dim) blocks, each group of queries only over the
// keys it can see: vdpbf16ps adds a pair's two products into one lane (kernels/prefill_math.h),
// the pairs in order of the dims (of the keys).
//
// A row's bits depend on its own query and keys alone: every tile element is its own row's and
// column's, the key steps start at the first real key, whatever left padding the batch-mates
// impose, and keys past a query's own position enter as exact zeros (or not at all, which is the
// same sum). Not bit-equal to a written order (tdpbf16ps sums 32 products in the hardware's own
// way: kernels/cpu/linear_amx.h), nor AMX to the dot product, so the tests hold both to the exact
// attention of the same bf16 operands within the error bf16 probabilities allow.
#pragma once

#include "kernels/attention_args.h"

namespace offgen::kernels::cpu {

// Whether prefill_attention takes the bf16 path for these args: bf16 math, AVX512-BF16, and no
// OFFGEN_CPU_ISA cap below avx512 (which leaves AMX out, so that the dot product runs instead).
bool use_bf16_prefill_attention(const PrefillAttentionArgs& args);

#if defined(__x86_64__)
// Queries [q0, q1) of sequence b, query head h (zero rows for padding). key_sums: the (b, h) row
// of key probability sums, zeroed by the caller, or null.
void prefill_block_bf16(const PrefillAttentionArgs& a, int b, int h, int q0, int q1,
                        float* key_sums);
#endif

}  // namespace offgen::kernels::cpu
