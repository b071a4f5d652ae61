#include "engine/runtime/cpu_ops.h"

#include "engine/runtime/sampler.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gated_mlp.h"
#include "kernels/cpu/kv_cache.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/page_selection.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rotary.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/score_eviction.h"
#include "kernels/cpu/softmax.h"
#include "kernels/reference/reference.h"

namespace offgen {

namespace cpu = kernels::cpu;
namespace ref = kernels::reference;

void CpuOps::gather_rows(const kernels::GatherRowsArgs& args) {
  enqueue<cpu::gather_rows, ref::gather_rows>(args);
}

void CpuOps::add_position_embeddings(const kernels::PositionEmbeddingArgs& args) {
  enqueue<cpu::add_position_embeddings, ref::add_position_embeddings>(args);
}

void CpuOps::layer_norm(const kernels::LayerNormArgs& args) {
  enqueue<cpu::layer_norm, ref::layer_norm>(args);
}

void CpuOps::linear(const kernels::LinearArgs& args) {
  enqueue<cpu::linear, ref::linear>(args);
}

void CpuOps::add_inplace(Half* y, const Half* x, std::int64_t n) {
  enqueue<cpu::add_inplace, ref::add_inplace>(y, x, n);
}

void CpuOps::prefill_attention(const kernels::PrefillAttentionArgs& args) {
  enqueue<cpu::prefill_attention, ref::prefill_attention>(args);
}

void CpuOps::store_prefill_kv(const kernels::StorePrefillKvArgs& args) {
  enqueue<cpu::store_prefill_kv, ref::store_prefill_kv>(args);
}

void CpuOps::append_kv(const kernels::AppendKvArgs& args) {
  enqueue<cpu::append_kv, ref::append_kv>(args);
}

void CpuOps::decode_attention(const kernels::DecodeAttentionArgs& args) {
  enqueue<cpu::decode_attention, ref::decode_attention>(args);
}

void CpuOps::page_summary(const kernels::PageSummaryArgs& args) {
  enqueue<cpu::page_summary, ref::page_summary>(args);
}

void CpuOps::page_select(const kernels::PageSelectArgs& args) {
  enqueue<cpu::page_select, ref::page_select>(args);
}

void CpuOps::gather_pages(const kernels::GatherPagesArgs& args) {
  enqueue<cpu::gather_pages, ref::gather_pages>(args);
}

void CpuOps::logits(const kernels::LogitsArgs& args) {
  enqueue<cpu::logits, ref::logits>(args);
}

void CpuOps::log_softmax(const kernels::LogSoftmaxArgs& args) {
  enqueue<cpu::log_softmax, ref::log_softmax>(args);
}

void CpuOps::token_logprobs(const kernels::TokenLogprobsArgs& args) {
  enqueue<cpu::token_logprobs, ref::token_logprobs>(args);
}

void CpuOps::top_logprobs(const kernels::TopLogprobsArgs& args) {
  enqueue<cpu::top_logprobs, ref::top_logprobs>(args);
}

void CpuOps::argmax_rows(const kernels::ArgmaxRowsArgs& args) {
  enqueue<cpu::argmax_rows, ref::argmax_rows>(args);
}

void CpuOps::sample_rows(const kernels::SampleRowsArgs& args) {
  enqueue<cpu::sample_rows, ref::sample_rows>(args);
}

// The edits touch only the ids of a row's context, never the vocabulary: the reference's loop is
// the fast kernel too.
void CpuOps::edit_logits(const kernels::EditLogitsArgs& args) {
  enqueue<ref::edit_logits, ref::edit_logits>(args);
}

void CpuOps::restore_logits(const kernels::EditLogitsArgs& args) {
  enqueue<ref::restore_logits, ref::restore_logits>(args);
}

void CpuOps::quantize(const kernels::QuantizeArgs& args) {
  enqueue<cpu::quantize, ref::quantize>(args);
}

void CpuOps::dequantize(const kernels::DequantizeArgs& args) {
  enqueue<cpu::dequantize, ref::dequantize>(args);
}

void CpuOps::quantize_kv_slots(const kernels::QuantizeKvSlotsArgs& args) {
  enqueue<cpu::quantize_kv_slots, ref::quantize_kv_slots>(args);
}

void CpuOps::rms_norm(const kernels::RmsNormArgs& args) {
  enqueue<cpu::rms_norm, ref::rms_norm>(args);
}

void CpuOps::rotary(const kernels::RotaryArgs& args) {
  enqueue<cpu::rotary, ref::rotary>(args);
}

void CpuOps::silu_mul(const kernels::SiluMulArgs& args) {
  enqueue<cpu::silu_mul, ref::silu_mul>(args);
}

// The policy code (policies/*_policy.cpp) is the reference these kernels are tested against,
// so both kernel sets run the same eviction kernels.
void CpuOps::score_prefill_keep(const kernels::ScorePrefillArgs& args) {
  stream_.enqueue([=] { cpu::score_prefill_keep(args); });
}

void CpuOps::score_decode_update(const kernels::ScoreDecodeArgs& args) {
  stream_.enqueue([=] { cpu::score_decode_update(args); });
}

}  // namespace offgen
