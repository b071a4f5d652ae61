// How the cpu device computes a prefill: exactly, or with bf16 operands.
#pragma once

namespace offgen::kernels {

// How the cpu device multiplies a prefill's prompt rows (LinearArgs::prompt_rows): exactly (fp16
// operands in fp32), or with both operands rounded to bf16 (round to nearest even) and their
// products summed in fp32 by the AVX512-BF16 dot product, twice the fp32 FMA rate: per output,
// over pairs of k in order, acc += x[2t+1]·w[2t+1], then acc += x[2t]·w[2t] (each product is
// exact in fp32, each add rounded once: vdpbf16ps's order), k padded with a zero to even.
// Decode rows are always exact: they are memory bound, and bf16 would read the same fp16 bytes.
// int8 weights (LinearArgs::weight_int8) are multiplied in int8 whatever the math; bf16 then
// applies to the prefill's attention alone.
// Prefill attention (PrefillAttentionArgs::prefill_math) under bf16: q·k over bf16 q and k and
// p·v over bf16 probabilities and v, both summed in fp32 by tdpbf16ps on AMX or else vdpbf16ps,
// with the softmax in fp32 (kernels/cpu/attention_bf16.h).
enum class PrefillMath { fp32, bf16 };

// "fp32" or "bf16": the flag's value, and what plan files and bench rows record.
inline const char* prefill_math_name(PrefillMath math) {
  switch (math) {
    case PrefillMath::fp32:
      return "fp32";
    case PrefillMath::bf16:
      return "bf16";
  }
  return "?";
}

}  // namespace offgen::kernels
