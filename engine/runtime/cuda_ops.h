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
  explicit CudaOps(CudaDevice& device, StreamRole role = StreamRole::compute);

  std::unique_ptr<Ops> on_stream(StreamRole role) const override;

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
  CudaDevice& device_;
  cudaStream_t stream_;
  kernels::cuda::Gemm gemm_;
};

}  // namespace offgen
