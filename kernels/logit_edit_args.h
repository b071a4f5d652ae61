// Arguments and exact semantics of the logit edits a request asks for before its token is picked
// — OpenAI's / vLLM's logit_bias, presence and frequency penalties, Hugging Face's / vLLM's
// repetition penalty, and min_tokens' ban on stop tokens — shared by the reference, the CPU
// kernel and the CUDA kernel. The host sends only the ids a row edits (the distinct ids of its
// context and output, its bias and bans), never a vocabulary-wide mask.
#pragma once

#include <cstdint>

namespace offgen::kernels {

// One (row, token) whose logit is edited. Edits of a row are contiguous and no (row, token)
// appears twice, so every edit can run in parallel.
struct LogitEdit {
  std::int32_t row = 0;    // the sequence's row in the block
  std::int32_t token = 0;  // in [0, vocab)
  float count = 0.0f;      // times the row has generated the token so far
  float bias = 0.0f;       // logit_bias (0: none)
  std::uint32_t flags = 0;
};
// The token is in the row's context (its prompt or its generated tokens): the repetition penalty
// applies to it.
constexpr std::uint32_t kEditInContext = 1u;
// The token may not be picked now (min_tokens not reached, and it would end the request).
constexpr std::uint32_t kEditBanned = 2u;

// A row's penalties; neutral values leave the logit unchanged.
struct RowPenalties {
  float repetition = 1.0f;  // > 0
  float frequency = 0.0f;
  float presence = 0.0f;
};

// edit_logits: for each edit e (x = the logit of e.token in row e.row - first_row), in this order,
// each step one fp32 operation rounded on its own (no fused multiply-add), as PyTorch's separate
// ops round them in vLLM and Hugging Face:
//   saved[e] = x
//   banned: x = -inf. Otherwise, with p = penalties[e.row]:
//   1. x = x + e.bias                                          (logit_bias; vLLM adds it first)
//   2. in context and p.repetition != 1: x = x > 0 ? x / p.repetition : x * p.repetition
//   3. x = x - p.frequency * e.count                           (the product rounded first)
//   4. x = x - p.presence * (e.count > 0 ? 1 : 0)
// restore_logits puts saved[e] back: the raw logits again, for log-probs of the raw model.
struct EditLogitsArgs {
  float* logits = nullptr;                  // [rows, vocab] fp32, edited in place
  const LogitEdit* edits = nullptr;         // [count], rows in [first_row, first_row + rows)
  const RowPenalties* penalties = nullptr;  // indexed by the block row e.row
  float* saved = nullptr;                   // [count]
  std::int64_t count = 0;
  std::int32_t first_row = 0;
  int vocab = 0;
};

}  // namespace offgen::kernels
