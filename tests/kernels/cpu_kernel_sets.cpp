// The implementations the cpu test binary runs the parity suites on: the CPU kernels once per
// micro-kernel ISA (the gpu binary links tests/gpu_kernels/cuda_kernel_sets.cpp instead).
#include <cstdlib>

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
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

KernelSet cpu_set(std::string name, std::string isa) {
  namespace cpu = kernels::cpu;
  return {std::move(name), std::move(isa), cpu::gather_rows, cpu::add_position_embeddings,
          cpu::layer_norm, cpu::linear, cpu::logits, cpu::add_inplace, cpu::log_softmax,
          cpu::token_logprobs, cpu::top_logprobs, cpu::prefill_attention, cpu::store_prefill_kv,
          cpu::append_kv, cpu::decode_attention, cpu::sample_rows, cpu::argmax_rows,
          cpu::score_prefill_keep, cpu::score_decode_update, cpu::quantize, cpu::dequantize,
          cpu::quantize_kv_slots, cpu::rms_norm, cpu::rotary, cpu::silu_mul,
          // The cpu device runs the reference's logit edits (engine/runtime/cpu_ops.cpp).
          kernels::reference::edit_logits, kernels::reference::restore_logits,
          /*exact_sampling=*/true,
          /*exact_trig=*/true, cpu::page_summary, cpu::page_select, cpu::gather_pages,
          /*checks_device_values=*/true};
}

}  // namespace

std::vector<const KernelSet*> kernel_sets_under_test() {
  static const KernelSet best = cpu_set("cpu", "");
  static const KernelSet avx2 = cpu_set("cpu_avx2", "avx2");
  static const KernelSet portable = cpu_set("cpu_portable", "portable");
  return {&best, &avx2, &portable};
}

void ParityTest::SetUp() {
  if (!impl().cpu_isa.empty()) setenv("OFFGEN_CPU_ISA", impl().cpu_isa.c_str(), 1);
}

void ParityTest::TearDown() {
  if (!impl().cpu_isa.empty()) unsetenv("OFFGEN_CPU_ISA");
}

}  // namespace offgen::test
