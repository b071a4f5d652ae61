// Ops on the cpu device: each call enqueues a kernel on the device's compute stream, so kernels
// run in issue order on the stream's worker and overlap other streams' copies. Two kernel sets:
// the TBB kernels of kernels/cpu (what users run) and the naive kernels of kernels/reference
// (the truth the parity suite checks against), so the whole model can also run on the reference.
#pragma once

#include <memory>
#include <utility>

#include "engine/device/cpu_device.h"
#include "kernels/ops.h"

namespace offgen {

class CpuOps final : public Ops {
 public:
  explicit CpuOps(CpuDevice& device, CpuKernelSet kernels = CpuKernelSet::optimized,
                  StreamRole role = StreamRole::compute)
      : device_(device), stream_(device.cpu_stream(role)), kernels_(kernels) {}

  std::unique_ptr<Ops> on_stream(StreamRole role) const override {
    return std::make_unique<CpuOps>(device_, kernels_, role);
  }

  void gather_rows(const kernels::GatherRowsArgs& args) override;
  void add_position_embeddings(const kernels::PositionEmbeddingArgs& args) override;
  void layer_norm(const kernels::LayerNormArgs& args) override;
  void linear(const kernels::LinearArgs& args) override;
  void add_inplace(Half* y, const Half* x, std::int64_t n) override;
  void prefill_attention(const kernels::PrefillAttentionArgs& args) override;
  void store_prefill_kv(const kernels::StorePrefillKvArgs& args) override;
  void append_kv(const kernels::AppendKvArgs& args) override;
  void decode_attention(const kernels::DecodeAttentionArgs& args) override;
  void logits(const kernels::LogitsArgs& args) override;
  void log_softmax(const kernels::LogSoftmaxArgs& args) override;
  void token_logprobs(const kernels::TokenLogprobsArgs& args) override;
  void top_logprobs(const kernels::TopLogprobsArgs& args) override;
  void argmax_rows(const kernels::ArgmaxRowsArgs& args) override;
  void sample_rows(const kernels::SampleRowsArgs& args) override;
  void edit_logits(const kernels::EditLogitsArgs& args) override;
  void restore_logits(const kernels::EditLogitsArgs& args) override;
  void score_prefill_keep(const kernels::ScorePrefillArgs& args) override;
  void score_decode_update(const kernels::ScoreDecodeArgs& args) override;
  void page_summary(const kernels::PageSummaryArgs& args) override;
  void page_select(const kernels::PageSelectArgs& args) override;
  void gather_pages(const kernels::GatherPagesArgs& args) override;
  void quantize(const kernels::QuantizeArgs& args) override;
  void dequantize(const kernels::DequantizeArgs& args) override;
  void quantize_kv_slots(const kernels::QuantizeKvSlotsArgs& args) override;
  void rms_norm(const kernels::RmsNormArgs& args) override;
  void rotary(const kernels::RotaryArgs& args) override;
  void silu_mul(const kernels::SiluMulArgs& args) override;

 private:
  // Enqueues Optimized(args...) or Reference(args...); arguments are copied into the task.
  template <auto Optimized, auto Reference, typename... Args>
  void enqueue(Args... args) {
    if (kernels_ == CpuKernelSet::reference) {
      stream_.enqueue([=] { Reference(args...); });
    } else {
      stream_.enqueue([=] { Optimized(args...); });
    }
  }

  CpuDevice& device_;
  CpuStream& stream_;
  CpuKernelSet kernels_;
};

}  // namespace offgen
