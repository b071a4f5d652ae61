// The implementation the gpu parity binary runs the parity suites (tests/kernels/*_test.cpp) on:
// the CUDA kernels, through host wrappers with the CPU signatures. Each wrapper copies its inputs
// to device buffers that have guard bytes on both sides, launches, copies the outputs back into
// the caller's host buffers (so the suites' own guards and NaN poison still apply), and fails the
// test if the kernel wrote into a device guard. Without a GPU every parity case is skipped.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/core/cuda_check.h"
#include "engine/device/cuda_probe.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gated_mlp.h"
#include "kernels/cuda/gemm.h"
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
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

constexpr std::size_t kGuardBytes = 256;
constexpr unsigned char kGuardByte = 0xA5;

cudaStream_t test_stream() {
  static cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    OFFGEN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }();
  return stream;
}

kernels::cuda::Gemm& test_gemm() {
  static kernels::cuda::Gemm gemm(test_stream());
  return gemm;
}

// `count` elements of T in device memory between two guard regions; starts as a copy of `host`
// (or, for host == nullptr, a null pointer, as the kernels' optional arguments expect).
template <typename T>
class DeviceCopy {
 public:
  DeviceCopy(const T* host, std::size_t count) : host_(host), count_(count) {
    if (host == nullptr) return;
    OFFGEN_CUDA_CHECK(cudaMalloc(&raw_, bytes() + 2 * kGuardBytes));
    OFFGEN_CUDA_CHECK(cudaMemset(raw_, kGuardByte, bytes() + 2 * kGuardBytes));
    OFFGEN_CUDA_CHECK(cudaMemcpy(data(), host, bytes(), cudaMemcpyHostToDevice));
    // A pageable cudaMemcpy may return before its DMA lands, and the kernels run on a
    // non-blocking stream that does not wait for the legacy one: without this, a kernel can read
    // the end of a large input before it arrives (seen on an H200: the last row of a 3 x 50272
    // log_softmax summed stale values).
    OFFGEN_CUDA_CHECK(cudaDeviceSynchronize());
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ~DeviceCopy() {
    if (raw_ != nullptr) cudaFree(raw_);
  }

  T* data() const {
    return raw_ == nullptr ? nullptr
                           : reinterpret_cast<T*>(static_cast<unsigned char*>(raw_) + kGuardBytes);
  }

  // Copies the device values back into `out` (the caller's host output) and checks the guards.
  void copy_back(T* out, const char* what) const {
    if (raw_ == nullptr) return;
    std::vector<unsigned char> all(bytes() + 2 * kGuardBytes);
    OFFGEN_CUDA_CHECK(cudaMemcpy(all.data(), raw_, all.size(), cudaMemcpyDeviceToHost));
    std::memcpy(out, all.data() + kGuardBytes, bytes());
    const auto intact = [](auto begin, auto end) {
      return std::all_of(begin, end, [](unsigned char c) { return c == kGuardByte; });
    };
    if (!intact(all.begin(), all.begin() + kGuardBytes)) {
      ADD_FAILURE() << what << ": the CUDA kernel wrote before its output";
    }
    if (!intact(all.end() - kGuardBytes, all.end())) {
      ADD_FAILURE() << what << ": the CUDA kernel wrote past the end of its output";
    }
  }

 private:
  std::size_t bytes() const { return count_ * sizeof(T); }
  const T* host_;
  std::size_t count_;
  void* raw_ = nullptr;
};

template <typename T>
DeviceCopy<T> device_copy(const T* host, std::int64_t count) {
  return DeviceCopy<T>(host, static_cast<std::size_t>(std::max<std::int64_t>(count, 0)));
}

void finish() {
  OFFGEN_CUDA_CHECK(cudaStreamSynchronize(test_stream()));
}

namespace cuda = kernels::cuda;

void gather_rows(const kernels::GatherRowsArgs& args) {
  auto d_table = device_copy(args.table, args.table_rows * args.dim);
  auto d_ids = device_copy(args.ids, args.rows);
  auto d_out = device_copy(args.out, args.rows * args.dim);
  kernels::GatherRowsArgs d = args;
  d.table = d_table.data();
  d.ids = d_ids.data();
  d.out = d_out.data();
  cuda::gather_rows(d, test_stream());
  finish();
  d_out.copy_back(args.out, "gather_rows");
}

void add_position_embeddings(const kernels::PositionEmbeddingArgs& args) {
  // The table needs every row a position reads (offset - 1 for padding's position -1).
  std::int64_t table_rows = args.offset;
  for (std::int64_t i = 0; i < args.rows; ++i) {
    table_rows = std::max<std::int64_t>(table_rows, args.positions[i] + args.offset + 1);
  }
  auto d_x = device_copy(args.x, args.rows * args.dim);
  auto d_table = device_copy(args.table, table_rows * args.dim);
  auto d_positions = device_copy(args.positions, args.rows);
  kernels::PositionEmbeddingArgs d = args;
  d.x = d_x.data();
  d.table = d_table.data();
  d.positions = d_positions.data();
  cuda::add_position_embeddings(d, test_stream());
  finish();
  d_x.copy_back(args.x, "add_position_embeddings");
}

void layer_norm(const kernels::LayerNormArgs& args) {
  const std::int64_t size = args.rows * args.dim;
  auto d_gamma = device_copy(args.gamma, args.dim);
  auto d_beta = device_copy(args.beta, args.dim);
  kernels::LayerNormArgs d = args;
  d.gamma = d_gamma.data();
  d.beta = d_beta.data();
  if (args.x == args.y) {  // in place: one buffer, as the caller aliases them
    auto d_xy = device_copy(args.y, size);
    d.x = d_xy.data();
    d.y = d_xy.data();
    cuda::layer_norm(d, test_stream());
    finish();
    d_xy.copy_back(args.y, "layer_norm (in place)");
    return;
  }
  auto d_x = device_copy(args.x, size);
  auto d_y = device_copy(args.y, size);
  d.x = d_x.data();
  d.y = d_y.data();
  cuda::layer_norm(d, test_stream());
  finish();
  d_y.copy_back(args.y, "layer_norm");
}

void linear(const kernels::LinearArgs& args) {
  auto d_x = device_copy(args.x, args.rows * args.in_features);
  auto d_w = device_copy(args.weight, std::int64_t{args.out_features} * args.in_features);
  auto d_bias = device_copy(args.bias, args.out_features);
  auto d_y = device_copy(args.y, args.rows * args.out_features);
  kernels::LinearArgs d = args;
  d.x = d_x.data();
  d.weight = d_w.data();
  d.bias = d_bias.data();
  d.y = d_y.data();
  test_gemm().linear(d);
  finish();
  d_y.copy_back(args.y, "linear");
}

void logits(const kernels::LogitsArgs& args) {
  auto d_x = device_copy(args.x, args.rows * args.dim);
  auto d_embed = device_copy(args.embed, std::int64_t{args.vocab} * args.dim);
  auto d_out = device_copy(args.out, args.rows * args.vocab);
  kernels::LogitsArgs d = args;
  d.x = d_x.data();
  d.embed = d_embed.data();
  d.out = d_out.data();
  test_gemm().logits(d);
  finish();
  d_out.copy_back(args.out, "logits");
}

void add_inplace(Half* y, const Half* x, std::int64_t n) {
  auto d_y = device_copy(y, n);
  auto d_x = device_copy(x, n);
  cuda::add_inplace(d_y.data(), d_x.data(), n, test_stream());
  finish();
  d_y.copy_back(y, "add_inplace");
}

void log_softmax(const kernels::LogSoftmaxArgs& args) {
  auto d_values = device_copy(args.values, args.rows * args.cols);
  kernels::LogSoftmaxArgs d = args;
  d.values = d_values.data();
  cuda::log_softmax(d, test_stream());
  finish();
  d_values.copy_back(args.values, "log_softmax");
}

void token_logprobs(const kernels::TokenLogprobsArgs& args) {
  auto d_logits = device_copy(args.logits, args.rows * args.vocab);
  auto d_targets = device_copy(args.targets, args.rows);
  auto d_out = device_copy(args.out, args.rows);
  kernels::TokenLogprobsArgs d = args;
  d.logits = d_logits.data();
  d.targets = d_targets.data();
  d.out = d_out.data();
  cuda::token_logprobs(d, test_stream());
  finish();
  d_out.copy_back(args.out, "token_logprobs");
}

void prefill_attention(const kernels::PrefillAttentionArgs& args) {
  const std::int64_t tokens = std::int64_t{args.batch} * args.seq;
  const std::int64_t width = std::int64_t{args.heads} * args.head_dim;
  const int kv_heads = args.kv_head_count();
  auto d_qkv = device_copy(args.qkv, tokens * (args.heads + 2 * kv_heads) * args.head_dim);
  auto d_valid = device_copy(args.valid, tokens);
  auto d_out = device_copy(args.out, tokens * width);
  auto d_sums = device_copy(args.key_prob_sums, tokens * kv_heads);
  // The per-query-head key-sum rows grouped-query attention needs, between guards.
  std::vector<float> scratch(args.key_prob_sums == nullptr
                                 ? 0
                                 : kernels::prefill_key_sum_scratch_bytes(args.batch, args.heads,
                                                                          args.kv_heads, args.seq) /
                                       sizeof(float));
  auto d_scratch = device_copy(scratch.empty() ? nullptr : scratch.data(),
                               static_cast<std::int64_t>(scratch.size()));
  kernels::PrefillAttentionArgs d = args;
  d.qkv = d_qkv.data();
  d.valid = d_valid.data();
  d.out = d_out.data();
  d.key_prob_sums = d_sums.data();
  d.key_sum_scratch = d_scratch.data();
  cuda::prefill_attention(d, test_stream());
  finish();
  d_out.copy_back(args.out, "prefill_attention out");
  d_sums.copy_back(args.key_prob_sums, "prefill_attention key_prob_sums");
  d_scratch.copy_back(scratch.data(), "prefill_attention key-sum scratch");
}

void store_prefill_kv(const kernels::StorePrefillKvArgs& args) {
  const std::int64_t tokens = std::int64_t{args.batch} * args.seq;
  const int kv_heads = args.kv_head_count();
  const std::int64_t cache = std::int64_t{args.batch} * kv_heads * args.capacity * args.head_dim;
  auto d_qkv = device_copy(args.qkv, tokens * (args.heads + 2 * kv_heads) * args.head_dim);
  auto d_slots = device_copy(args.token_slot, tokens * kv_heads);
  auto d_k = device_copy(args.k_cache, cache);
  auto d_v = device_copy(args.v_cache, cache);
  kernels::StorePrefillKvArgs d = args;
  d.qkv = d_qkv.data();
  d.token_slot = d_slots.data();
  d.k_cache = d_k.data();
  d.v_cache = d_v.data();
  cuda::store_prefill_kv(d, test_stream());
  finish();
  d_k.copy_back(args.k_cache, "store_prefill_kv k");
  d_v.copy_back(args.v_cache, "store_prefill_kv v");
}

void append_kv(const kernels::AppendKvArgs& args) {
  const int kv_heads = args.kv_head_count();
  const std::int64_t cache = std::int64_t{args.batch} * kv_heads * args.capacity * args.head_dim;
  auto d_qkv =
      device_copy(args.qkv, std::int64_t{args.batch} * (args.heads + 2 * kv_heads) * args.head_dim);
  auto d_slots = device_copy(args.write_slot, std::int64_t{args.batch} * kv_heads);
  auto d_k = device_copy(args.k_cache, cache);
  auto d_v = device_copy(args.v_cache, cache);
  kernels::AppendKvArgs d = args;
  d.qkv = d_qkv.data();
  d.write_slot = d_slots.data();
  d.k_cache = d_k.data();
  d.v_cache = d_v.data();
  cuda::append_kv(d, test_stream());
  finish();
  d_k.copy_back(args.k_cache, "append_kv k");
  d_v.copy_back(args.v_cache, "append_kv v");
}

void decode_attention(const kernels::DecodeAttentionArgs& args) {
  const std::int64_t width = std::int64_t{args.heads} * args.head_dim;
  const int kv_heads = args.kv_head_count();
  const std::int64_t cache = std::int64_t{args.batch} * kv_heads * args.capacity * args.head_dim;
  auto d_qkv =
      device_copy(args.qkv, std::int64_t{args.batch} * (args.heads + 2 * kv_heads) * args.head_dim);
  auto d_k = device_copy(args.k_cache, cache);
  auto d_v = device_copy(args.v_cache, cache);
  auto d_count = device_copy(args.slot_count, args.batch);
  auto d_out = device_copy(args.out, std::int64_t{args.batch} * width);
  auto d_probs = device_copy(args.probs, std::int64_t{args.batch} * kv_heads * args.capacity);
  auto d_pages = device_copy(args.pages, std::int64_t{args.batch} * kv_heads * args.max_selected);
  auto d_page_count = device_copy(args.page_count, std::int64_t{args.batch} * kv_heads);
  // The split a runner plans for this shape, and its scratch between guards (a write past the
  // planned bytes fails the guard check).
  const kernels::DecodeSplit split =
      cuda::plan_decode_attention(args.batch, args.heads, args.capacity);
  std::vector<float> scratch(kernels::decode_split_scratch_bytes(split, args.batch, args.heads,
                                                                 args.head_dim, args.kv_heads) /
                             sizeof(float));
  auto d_scratch = device_copy(scratch.empty() ? nullptr : scratch.data(),
                               static_cast<std::int64_t>(scratch.size()));
  kernels::DecodeAttentionArgs d = args;
  d.qkv = d_qkv.data();
  d.k_cache = d_k.data();
  d.v_cache = d_v.data();
  d.slot_count = d_count.data();
  d.out = d_out.data();
  d.probs = d_probs.data();
  d.pages = d_pages.data();
  d.page_count = d_page_count.data();
  d.split = split;
  d.split_scratch = d_scratch.data();
  cuda::decode_attention(d, test_stream());
  finish();
  d_out.copy_back(args.out, "decode_attention out");
  d_probs.copy_back(args.probs, "decode_attention probs");
  d_scratch.copy_back(scratch.data(), "decode_attention split scratch");
}

void page_summary(const kernels::PageSummaryArgs& args) {
  const std::int64_t rows = std::int64_t{args.batch} * args.kv_heads;
  auto d_k = device_copy(args.k_cache, rows * args.capacity * args.head_dim);
  auto d_summary = device_copy(
      args.summary,
      kernels::page_summary_elements(args.batch, args.kv_heads, args.head_dim, args.max_pages));
  auto d_count = device_copy(args.slot_count, args.batch);
  auto d_first = device_copy(args.first_page, args.batch);
  kernels::PageSummaryArgs d = args;
  d.k_cache = d_k.data();
  d.summary = d_summary.data();
  d.slot_count = d_count.data();
  d.first_page = d_first.data();
  cuda::page_summary(d, test_stream());
  finish();
  d_summary.copy_back(args.summary, "page_summary summary");
}

void page_select(const kernels::PageSelectArgs& args) {
  const std::int64_t rows = std::int64_t{args.batch} * args.kv_heads;
  const std::int64_t q_stride = args.q_stride > 0
                                    ? args.q_stride
                                    : std::int64_t{args.heads + 2 * args.kv_heads} * args.head_dim;
  auto d_qkv = device_copy(args.qkv, std::int64_t{args.batch} * q_stride);
  auto d_summary = device_copy(
      args.summary,
      kernels::page_summary_elements(args.batch, args.kv_heads, args.head_dim, args.max_pages));
  auto d_count = device_copy(args.slot_count, args.batch);
  auto d_per_step = device_copy(args.pages_per_step, args.batch);
  auto d_selected = device_copy(args.selected, rows * args.max_selected);
  auto d_selected_count = device_copy(args.selected_count, rows);
  auto d_bounds = device_copy(args.bounds, rows * args.max_pages);
  kernels::PageSelectArgs d = args;
  d.qkv = d_qkv.data();
  d.summary = d_summary.data();
  d.slot_count = d_count.data();
  d.pages_per_step = d_per_step.data();
  d.selected = d_selected.data();
  d.selected_count = d_selected_count.data();
  d.bounds = d_bounds.data();
  cuda::page_select(d, test_stream());
  finish();
  d_selected.copy_back(args.selected, "page_select selected");
  d_selected_count.copy_back(args.selected_count, "page_select selected_count");
  d_bounds.copy_back(args.bounds, "page_select bounds");
}

// The source stays in pinned host memory, read by the kernel over PCIe, as the engine's host
// caches are.
void gather_pages(const kernels::GatherPagesArgs& args) {
  const std::int64_t rows = std::int64_t{args.batch} * args.kv_heads;
  const auto bytes = static_cast<std::size_t>(rows * args.capacity * args.row_bytes);
  std::uint8_t* pinned = nullptr;
  OFFGEN_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned), bytes));
  const std::unique_ptr<std::uint8_t, decltype(&cudaFreeHost)> owner(pinned, &cudaFreeHost);
  std::memcpy(pinned, args.src, bytes);
  auto d_dst = device_copy(args.dst, static_cast<std::int64_t>(bytes));
  auto d_count = device_copy(args.slot_count, args.batch);
  auto d_first = device_copy(args.first_page, args.batch);
  auto d_pages = device_copy(args.pages, rows * args.max_selected);
  auto d_page_count = device_copy(args.page_count, rows);
  auto d_present = device_copy(args.present, rows * args.max_selected);
  auto d_present_count = device_copy(args.present_count, rows);
  auto d_copied = device_copy(args.copied, 1);
  kernels::GatherPagesArgs d = args;
  d.present = d_present.data();
  d.present_count = d_present_count.data();
  d.copied = d_copied.data();
  d.src = pinned;
  d.dst = d_dst.data();
  d.slot_count = d_count.data();
  d.first_page = d_first.data();
  d.pages = d_pages.data();
  d.page_count = d_page_count.data();
  cuda::gather_pages(d, test_stream());
  finish();
  d_dst.copy_back(args.dst, "gather_pages dst");
  d_copied.copy_back(args.copied, "gather_pages copied");
}

void top_logprobs(const kernels::TopLogprobsArgs& args) {
  auto d_logits = device_copy(args.logits, args.rows * args.vocab);
  auto d_ids = device_copy(args.ids, args.rows * args.k);
  auto d_values = device_copy(args.values, args.rows * args.k);
  kernels::TopLogprobsArgs d = args;
  d.logits = d_logits.data();
  d.ids = d_ids.data();
  d.values = d_values.data();
  cuda::top_logprobs(d, test_stream());
  finish();
  d_ids.copy_back(args.ids, "top_logprobs ids");
  d_values.copy_back(args.values, "top_logprobs values");
}

void sample_rows(const kernels::SampleRowsArgs& args) {
  auto d_logits = device_copy(args.logits, args.rows * args.vocab);
  auto d_params = device_copy(args.params, args.rows);
  auto d_sampleable = device_copy(args.sampleable, args.vocab);
  auto d_out = device_copy(args.out, args.rows);
  kernels::SampleRowsArgs d = args;
  d.logits = d_logits.data();
  d.params = d_params.data();
  d.sampleable = d_sampleable.data();
  d.out = d_out.data();
  cuda::sample_rows(d, test_stream());
  finish();
  d_out.copy_back(args.out, "sample_rows");
}

void argmax_rows(const kernels::ArgmaxRowsArgs& args) {
  auto d_logits = device_copy(args.logits, args.rows * args.vocab);
  auto d_out = device_copy(args.out, args.rows);
  kernels::ArgmaxRowsArgs d = args;
  d.logits = d_logits.data();
  d.out = d_out.data();
  cuda::argmax_rows(d, test_stream());
  finish();
  d_out.copy_back(args.out, "argmax_rows");
}

void score_prefill_keep(const kernels::ScorePrefillArgs& args) {
  const std::int64_t cells = std::int64_t{args.batch} * args.heads;
  auto d_sums = device_copy(args.key_prob_sums, cells * args.seq);
  auto d_valid = device_copy(args.valid, std::int64_t{args.batch} * args.seq);
  auto d_token_slot = device_copy(args.token_slot, cells * args.seq);
  auto d_position = device_copy(args.position, cells * args.capacity);
  auto d_score = device_copy(args.score, cells * args.capacity);
  auto d_write_slot = device_copy(args.write_slot, cells);
  auto d_budget = device_copy(args.budget, args.batch);
  auto d_recent = device_copy(args.recent, args.batch);
  kernels::ScorePrefillArgs d = args;
  d.key_prob_sums = d_sums.data();
  d.valid = d_valid.data();
  d.token_slot = d_token_slot.data();
  d.position = d_position.data();
  d.score = d_score.data();
  d.write_slot = d_write_slot.data();
  d.budget = d_budget.data();
  d.recent = d_recent.data();
  cuda::score_prefill_keep(d, test_stream());
  finish();
  d_token_slot.copy_back(args.token_slot, "score_prefill_keep token_slot");
  d_position.copy_back(args.position, "score_prefill_keep position");
  d_score.copy_back(args.score, "score_prefill_keep score");
  d_write_slot.copy_back(args.write_slot, "score_prefill_keep write_slot");
}

void score_decode_update(const kernels::ScoreDecodeArgs& args) {
  const std::int64_t cells = std::int64_t{args.batch} * args.heads;
  auto d_probs = device_copy(args.probs, cells * args.capacity);
  auto d_advancing = device_copy(args.advancing, args.batch);
  auto d_new_position = device_copy(args.new_position, args.batch);
  auto d_count = device_copy(args.count, args.batch);
  auto d_position = device_copy(args.position, cells * args.capacity);
  auto d_score = device_copy(args.score, cells * args.capacity);
  auto d_write_slot = device_copy(args.write_slot, cells);
  auto d_budget = device_copy(args.budget, args.batch);
  auto d_recent = device_copy(args.recent, args.batch);
  kernels::ScoreDecodeArgs d = args;
  d.probs = d_probs.data();
  d.advancing = d_advancing.data();
  d.new_position = d_new_position.data();
  d.count = d_count.data();
  d.position = d_position.data();
  d.score = d_score.data();
  d.write_slot = d_write_slot.data();
  d.budget = d_budget.data();
  d.recent = d_recent.data();
  cuda::score_decode_update(d, test_stream());
  finish();
  d_position.copy_back(args.position, "score_decode_update position");
  d_score.copy_back(args.score, "score_decode_update score");
  d_write_slot.copy_back(args.write_slot, "score_decode_update write_slot");
}

void quantize(const kernels::QuantizeArgs& args) {
  auto d_x = device_copy(args.x, args.shape.values());
  auto d_data = device_copy(args.data, args.shape.data_bytes());
  auto d_params = device_copy(args.params, args.shape.param_count());
  kernels::QuantizeArgs d = args;
  d.x = d_x.data();
  d.data = d_data.data();
  d.params = d_params.data();
  cuda::quantize(d, test_stream());
  finish();
  d_data.copy_back(args.data, "quantize data");
  d_params.copy_back(args.params, "quantize params");
}

void dequantize(const kernels::DequantizeArgs& args) {
  auto d_data = device_copy(args.data, args.shape.data_bytes());
  auto d_params = device_copy(args.params, args.shape.param_count());
  auto d_x = device_copy(args.x, args.shape.values());
  kernels::DequantizeArgs d = args;
  d.data = d_data.data();
  d.params = d_params.data();
  d.x = d_x.data();
  cuda::dequantize(d, test_stream());
  finish();
  d_x.copy_back(args.x, "dequantize");
}

void quantize_kv_slots(const kernels::QuantizeKvSlotsArgs& args) {
  const std::int64_t rows = std::int64_t{args.batch} * args.heads * args.capacity;
  const kernels::QuantShape row{.outer = 1, .dim = args.head_dim, .inner = 1};
  auto d_cache = device_copy(args.cache, rows * args.head_dim);
  auto d_slots = device_copy(args.write_slot, std::int64_t{args.batch} * args.heads);
  auto d_data = device_copy(args.data, rows * row.data_bytes());
  auto d_params = device_copy(args.params, rows * row.param_count());
  kernels::QuantizeKvSlotsArgs d = args;
  d.cache = d_cache.data();
  d.write_slot = d_slots.data();
  d.data = d_data.data();
  d.params = d_params.data();
  cuda::quantize_kv_slots(d, test_stream());
  finish();
  d_data.copy_back(args.data, "quantize_kv_slots data");
  d_params.copy_back(args.params, "quantize_kv_slots params");
}

void rms_norm(const kernels::RmsNormArgs& args) {
  const std::int64_t size = args.rows * args.dim;
  auto d_gamma = device_copy(args.gamma, args.dim);
  kernels::RmsNormArgs d = args;
  d.gamma = d_gamma.data();
  if (args.x == args.y) {  // in place: one buffer, as the caller aliases them
    auto d_xy = device_copy(args.y, size);
    d.x = d_xy.data();
    d.y = d_xy.data();
    cuda::rms_norm(d, test_stream());
    finish();
    d_xy.copy_back(args.y, "rms_norm (in place)");
    return;
  }
  auto d_x = device_copy(args.x, size);
  auto d_y = device_copy(args.y, size);
  d.x = d_x.data();
  d.y = d_y.data();
  cuda::rms_norm(d, test_stream());
  finish();
  d_y.copy_back(args.y, "rms_norm");
}

void rotary(const kernels::RotaryArgs& args) {
  const std::int64_t width = std::int64_t{args.heads + 2 * args.kv_heads} * args.head_dim;
  auto d_qkv = device_copy(args.qkv, args.rows * width);
  auto d_positions = device_copy(args.positions, args.rows);
  auto d_inv_freq = device_copy(args.inv_freq, args.head_dim / 2);
  kernels::RotaryArgs d = args;
  d.qkv = d_qkv.data();
  d.positions = d_positions.data();
  d.inv_freq = d_inv_freq.data();
  cuda::rotary(d, test_stream());
  finish();
  d_qkv.copy_back(args.qkv, "rotary");
}

void silu_mul(const kernels::SiluMulArgs& args) {
  auto d_gate_up = device_copy(args.gate_up, args.rows * 2 * args.ffn);
  auto d_out = device_copy(args.out, args.rows * args.ffn);
  kernels::SiluMulArgs d = args;
  d.gate_up = d_gate_up.data();
  d.out = d_out.data();
  cuda::silu_mul(d, test_stream());
  finish();
  d_out.copy_back(args.out, "silu_mul");
}

// The logits are edited in place: the whole [rows, vocab] block goes over and comes back.
void run_logit_edits(const kernels::EditLogitsArgs& args, bool restore) {
  std::int64_t rows = 0;  // the rows the edits reach
  for (std::int64_t i = 0; i < args.count; ++i) {
    rows = std::max<std::int64_t>(rows, args.edits[i].row - args.first_row + 1);
  }
  auto d_rows = device_copy(args.logits, rows * args.vocab);
  std::int32_t penalty_rows = 0;
  for (std::int64_t i = 0; i < args.count; ++i) {
    penalty_rows = std::max(penalty_rows, args.edits[i].row + 1);
  }
  auto d_edits = device_copy(args.edits, args.count);
  auto d_penalties = device_copy(args.penalties, penalty_rows);
  auto d_saved = device_copy(args.saved, args.count);
  kernels::EditLogitsArgs d = args;
  d.logits = d_rows.data();
  d.edits = d_edits.data();
  d.penalties = d_penalties.data();
  d.saved = d_saved.data();
  if (restore) {
    cuda::restore_logits(d, test_stream());
  } else {
    cuda::edit_logits(d, test_stream());
  }
  finish();
  d_rows.copy_back(args.logits, restore ? "restore_logits" : "edit_logits logits");
  if (!restore) d_saved.copy_back(args.saved, "edit_logits saved");
}

void edit_logits(const kernels::EditLogitsArgs& args) {
  run_logit_edits(args, false);
}

void restore_logits(const kernels::EditLogitsArgs& args) {
  run_logit_edits(args, true);
}

}  // namespace

std::vector<const KernelSet*> kernel_sets_under_test() {
  static const KernelSet cuda_set{
      "cuda", "", gather_rows, add_position_embeddings, layer_norm, linear, logits, add_inplace,
      log_softmax, token_logprobs, top_logprobs, prefill_attention, store_prefill_kv, append_kv,
      decode_attention, sample_rows, argmax_rows, score_prefill_keep, score_decode_update, quantize,
      dequantize, quantize_kv_slots, rms_norm, rotary, silu_mul, edit_logits, restore_logits,
      /*exact_sampling=*/false,
      /*exact_trig=*/false, page_summary, page_select, gather_pages,
      // Values in device memory (page lists, pages per step) are clamped by the kernels, not
      // checked: a kernel cannot throw.
      /*checks_device_values=*/false};
  return {&cuda_set};
}

void ParityTest::SetUp() {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
}

void ParityTest::TearDown() {}

}  // namespace offgen::test
