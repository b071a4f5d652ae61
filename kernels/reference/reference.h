// Naive single-threaded reference kernels: the truth every implementation (CPU and CUDA) is
// checked against by tests/kernels. Same names, signatures and semantics as kernels/cpu/*.h.
// Written for obviousness, not speed: plain loops, double accumulation, each fp16 output rounded
// once from the double result (so a reference output is the correctly rounded exact value up to
// double's own error, far below fp16's).
#pragma once

#include <cstdint>

#include "engine/core/half.h"
#include "kernels/attention_args.h"
#include "kernels/embedding_args.h"
#include "kernels/gated_mlp_args.h"
#include "kernels/kv_cache_args.h"
#include "kernels/layer_norm_args.h"
#include "kernels/linear_args.h"
#include "kernels/logit_edit_args.h"
#include "kernels/page_selection_args.h"
#include "kernels/quantize_args.h"
#include "kernels/rms_norm_args.h"
#include "kernels/rotary_args.h"
#include "kernels/sampling_args.h"
#include "kernels/softmax_args.h"

namespace offgen::kernels::reference {

// embedding.h
void gather_rows(const GatherRowsArgs& args);
void add_position_embeddings(const PositionEmbeddingArgs& args);

// layer_norm.h
void layer_norm(const LayerNormArgs& args);

// rms_norm.h, rotary.h, gated_mlp.h (the LLaMA family's ops; like quantize.h below, no double
// arithmetic): their args headers fix every fp32 step, its order and each fp16 rounding, as
// PyTorch runs these ops on fp16, and the loops take exactly those steps, so the kernels can be
// checked bit for bit.
void rms_norm(const RmsNormArgs& args);
void rotary(const RotaryArgs& args);
void silu_mul(const SiluMulArgs& args);

// linear.h; with int8 weights (LinearArgs::weight_int8), kernels/int8_matrix.h's integer sums
// and fp32 epilogue step by step.
void linear(const LinearArgs& args);
// kernels/int8_matrix.h's quantization of w [rows, cols] into a blob of Int8Shape::bytes().
void pack_int8_matrix(const Half* w, std::int64_t rows, std::int64_t cols, std::byte* blob);
void logits(const LogitsArgs& args);

// elementwise.h
void add_inplace(Half* y, const Half* x, std::int64_t n);

// softmax.h
void log_softmax(const LogSoftmaxArgs& args);
void token_logprobs(const TokenLogprobsArgs& args);
void top_logprobs(const TopLogprobsArgs& args);

// attention.h
void prefill_attention(const PrefillAttentionArgs& args);
void decode_attention(const DecodeAttentionArgs& args);

// kv_cache.h
void store_prefill_kv(const StorePrefillKvArgs& args);
void append_kv(const AppendKvArgs& args);

// page_selection.h (kernels/page_selection_args.h: comparisons and the spec's fp32 sum of exact
// products, so no double arithmetic)
void page_summary(const PageSummaryArgs& args);
void page_select(const PageSelectArgs& args);
void gather_pages(const GatherPagesArgs& args);

// sampling.h
void sample_rows(const SampleRowsArgs& args);
void argmax_rows(const ArgmaxRowsArgs& args);

// logit_edit.h
void edit_logits(const EditLogitsArgs& args);
void restore_logits(const EditLogitsArgs& args);

// quantize.h (FlexGen's 4-bit groups; exact, so no double arithmetic: each step rounds as
// kernels/quantize_args.h says)
void quantize(const QuantizeArgs& args);
void dequantize(const DequantizeArgs& args);
void quantize_kv_slots(const QuantizeKvSlotsArgs& args);

}  // namespace offgen::kernels::reference
