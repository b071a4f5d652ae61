// The ops of the OPT forward pass as the model issues them: asynchronous, on a device's compute
// stream, over buffers of that device. One implementation per device kind (cpu_ops.h, and the
// CUDA one) — the model code above never knows which. Each op takes the argument struct its
// kernels take; the struct's header (kernels/*_args.h) states the op's layouts and semantics, and
// the naive references in kernels/reference/ spell them out.
//
// Every pointer is device memory of the Ops' device; calls only enqueue work (return immediately).
#pragma once

#include <cstdint>
#include <memory>

#include "engine/core/half.h"
#include "engine/device/device.h"
#include "kernels/attention_args.h"
#include "kernels/embedding_args.h"
#include "kernels/eviction_args.h"
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

namespace offgen {

// Which kernels the cpu device runs: the TBB ones users run, or the naive references.
enum class CpuKernelSet { optimized, reference };

class Ops {
 public:
  virtual ~Ops() = default;

  // The same kernels, enqueued on another of the device's streams instead (quest's speculative
  // gather runs on the KV copy stream, beside the compute).
  virtual std::unique_ptr<Ops> on_stream(StreamRole role) const = 0;

  virtual void gather_rows(const kernels::GatherRowsArgs& args) = 0;
  virtual void add_position_embeddings(const kernels::PositionEmbeddingArgs& args) = 0;
  virtual void layer_norm(const kernels::LayerNormArgs& args) = 0;
  virtual void linear(const kernels::LinearArgs& args) = 0;
  // y[i] += x[i] over n fp16 values (fp32 add, one rounding): the residual add.
  virtual void add_inplace(Half* y, const Half* x, std::int64_t n) = 0;
  virtual void prefill_attention(const kernels::PrefillAttentionArgs& args) = 0;
  virtual void store_prefill_kv(const kernels::StorePrefillKvArgs& args) = 0;
  virtual void append_kv(const kernels::AppendKvArgs& args) = 0;
  virtual void decode_attention(const kernels::DecodeAttentionArgs& args) = 0;
  virtual void logits(const kernels::LogitsArgs& args) = 0;
  virtual void log_softmax(const kernels::LogSoftmaxArgs& args) = 0;
  virtual void token_logprobs(const kernels::TokenLogprobsArgs& args) = 0;
  virtual void top_logprobs(const kernels::TopLogprobsArgs& args) = 0;

  // Token picks where the logits are, one id per row (kernels/sampling_args.h): a step copies
  // one id per sequence back to the host instead of the logits.
  virtual void argmax_rows(const kernels::ArgmaxRowsArgs& args) = 0;
  virtual void sample_rows(const kernels::SampleRowsArgs& args) = 0;
  // A request's logit edits before its pick (kernels/logit_edit_args.h): bias, penalties and
  // min_tokens' ban, on the ids it names only; restore_logits undoes them for raw log-probs.
  virtual void edit_logits(const kernels::EditLogitsArgs& args) = 0;
  virtual void restore_logits(const kernels::EditLogitsArgs& args) = 0;

  // Attention-score eviction (h2o) where the cache lives, right after the attention that produced
  // the probabilities. Semantics: kernels/eviction_args.h.
  virtual void score_prefill_keep(const kernels::ScorePrefillArgs& args) = 0;
  virtual void score_decode_update(const kernels::ScoreDecodeArgs& args) = 0;

  // Query-aware page selection (quest) where the cache lives: the per-page key summaries after a
  // store, and the pages a decode step attends. Semantics: kernels/page_selection_args.h.
  virtual void page_summary(const kernels::PageSummaryArgs& args) = 0;
  virtual void page_select(const kernels::PageSelectArgs& args) = 0;
  // A decode step's pages of an offloaded cache from pinned host memory into its staging copy.
  virtual void gather_pages(const kernels::GatherPagesArgs& args) = 0;

  // FlexGen's 4-bit group-wise compression (kernels/quantize_args.h): weights and KV are kept and
  // moved packed, and expanded to fp16 where the kernels read them.
  virtual void quantize(const kernels::QuantizeArgs& args) = 0;
  virtual void dequantize(const kernels::DequantizeArgs& args) = 0;
  // A decode step's new token of every (sequence, head) into a packed KV cache.
  virtual void quantize_kv_slots(const kernels::QuantizeKvSlotsArgs& args) = 0;

  // The LLaMA family's ops: RMS norm in place of layer norm, rotary position embedding on the
  // fused QKV (before its keys enter the KV cache), and SwiGLU's silu(gate) · up between the fused
  // gate / up GEMM and the down projection.
  virtual void rms_norm(const kernels::RmsNormArgs& args) = 0;
  virtual void rotary(const kernels::RotaryArgs& args) = 0;
  virtual void silu_mul(const kernels::SiluMulArgs& args) = 0;
};

// A decode step's page selection where its caches (of `geometry`) are, after the new rows are
// in: the newest page summarised again from k_cache (first_page), the pages chosen from the
// step's q (attend.qkv, attend.slot_count, attend.batch) into selected / selected_count, and
// `attend` pointed at them.
inline void select_pages(Ops& ops, const kernels::PageGeometry& geometry, const Half* k_cache,
                         Half* summary, const std::int32_t* first_page,
                         const std::int32_t* pages_per_step, std::int32_t* selected,
                         std::int32_t* selected_count, kernels::DecodeAttentionArgs& attend) {
  ops.page_summary(
      geometry.summary_args(k_cache, summary, attend.slot_count, first_page, attend.batch));
  ops.page_select(geometry.select_args(attend.qkv, summary, attend.slot_count, pages_per_step,
                                       selected, selected_count, attend.batch));
  geometry.attend_chosen(attend, selected, selected_count);
}

}  // namespace offgen
