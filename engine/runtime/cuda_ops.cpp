#include "engine/runtime/cuda_ops.h"

#include "engine/core/error.h"
#include "engine/runtime/cuda_ops_factory.h"

#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gated_mlp.h"
#include "kernels/cuda/kv_cache.h"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/logit_edit.h"
#include "kernels/cuda/page_selection.h"
#include "kernels/cuda/quantize.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/rotary.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/score_eviction.h"
#include "kernels/cuda/softmax.h"

namespace offgen {

namespace cuda = kernels::cuda;

CudaOps::CudaOps(CudaDevice& device, StreamRole role)
    : device_(device), stream_(device.cuda_stream(role)), gemm_(stream_) {}

std::unique_ptr<Ops> CudaOps::on_stream(StreamRole role) const {
  return std::make_unique<CudaOps>(device_, role);
}

void CudaOps::gather_rows(const kernels::GatherRowsArgs& args) {
  cuda::gather_rows(args, stream_);
}

void CudaOps::add_position_embeddings(const kernels::PositionEmbeddingArgs& args) {
  cuda::add_position_embeddings(args, stream_);
}

void CudaOps::layer_norm(const kernels::LayerNormArgs& args) {
  cuda::layer_norm(args, stream_);
}

void CudaOps::linear(const kernels::LinearArgs& args) {
  gemm_.linear(args);
}

void CudaOps::add_inplace(Half* y, const Half* x, std::int64_t n) {
  cuda::add_inplace(y, x, n, stream_);
}

void CudaOps::prefill_attention(const kernels::PrefillAttentionArgs& args) {
  cuda::prefill_attention(args, stream_);
}

void CudaOps::store_prefill_kv(const kernels::StorePrefillKvArgs& args) {
  cuda::store_prefill_kv(args, stream_);
}

void CudaOps::append_kv(const kernels::AppendKvArgs& args) {
  cuda::append_kv(args, stream_);
}

void CudaOps::decode_attention(const kernels::DecodeAttentionArgs& args) {
  cuda::decode_attention(args, stream_);
}

void CudaOps::logits(const kernels::LogitsArgs& args) {
  gemm_.logits(args);
}

void CudaOps::log_softmax(const kernels::LogSoftmaxArgs& args) {
  cuda::log_softmax(args, stream_);
}

void CudaOps::token_logprobs(const kernels::TokenLogprobsArgs& args) {
  cuda::token_logprobs(args, stream_);
}

void CudaOps::top_logprobs(const kernels::TopLogprobsArgs& args) {
  cuda::top_logprobs(args, stream_);
}

void CudaOps::argmax_rows(const kernels::ArgmaxRowsArgs& args) {
  cuda::argmax_rows(args, stream_);
}

void CudaOps::sample_rows(const kernels::SampleRowsArgs& args) {
  cuda::sample_rows(args, stream_);
}

void CudaOps::edit_logits(const kernels::EditLogitsArgs& args) {
  cuda::edit_logits(args, stream_);
}

void CudaOps::restore_logits(const kernels::EditLogitsArgs& args) {
  cuda::restore_logits(args, stream_);
}

void CudaOps::score_prefill_keep(const kernels::ScorePrefillArgs& args) {
  cuda::score_prefill_keep(args, stream_);
}

void CudaOps::score_decode_update(const kernels::ScoreDecodeArgs& args) {
  cuda::score_decode_update(args, stream_);
}

void CudaOps::page_summary(const kernels::PageSummaryArgs& args) {
  cuda::page_summary(args, stream_);
}

void CudaOps::page_select(const kernels::PageSelectArgs& args) {
  cuda::page_select(args, stream_);
}

void CudaOps::gather_pages(const kernels::GatherPagesArgs& args) {
  cuda::gather_pages(args, stream_);
}

void CudaOps::quantize(const kernels::QuantizeArgs& args) {
  cuda::quantize(args, stream_);
}

void CudaOps::dequantize(const kernels::DequantizeArgs& args) {
  cuda::dequantize(args, stream_);
}

void CudaOps::quantize_kv_slots(const kernels::QuantizeKvSlotsArgs& args) {
  cuda::quantize_kv_slots(args, stream_);
}

void CudaOps::rms_norm(const kernels::RmsNormArgs& args) {
  cuda::rms_norm(args, stream_);
}

void CudaOps::rotary(const kernels::RotaryArgs& args) {
  cuda::rotary(args, stream_);
}

void CudaOps::silu_mul(const kernels::SiluMulArgs& args) {
  cuda::silu_mul(args, stream_);
}

std::unique_ptr<Ops> make_cuda_ops(Device& device) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  OFFGEN_CHECK(cuda_device != nullptr, "CUDA ops need the cuda device (got {})", device.name());
  return std::make_unique<CudaOps>(*cuda_device);
}

}  // namespace offgen
