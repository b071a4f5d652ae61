// Reference logit edits: kernels/logit_edit_args.h's steps written out, one edit at a time.
#include <limits>

#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {

void edit_logits(const EditLogitsArgs& args) {
  for (std::int64_t i = 0; i < args.count; ++i) {
    const LogitEdit& e = args.edits[i];
    float& x = args.logits[std::int64_t{e.row - args.first_row} * args.vocab + e.token];
    args.saved[i] = x;
    if (e.flags & kEditBanned) {
      x = -std::numeric_limits<float>::infinity();
      continue;
    }
    const RowPenalties& p = args.penalties[e.row];
    x = x + e.bias;
    if ((e.flags & kEditInContext) && p.repetition != 1.0f) {
      x = x > 0.0f ? x / p.repetition : x * p.repetition;
    }
    const float frequency = p.frequency * e.count;
    x = x - frequency;
    const float presence = e.count > 0.0f ? p.presence : 0.0f;
    x = x - presence;
  }
}

void restore_logits(const EditLogitsArgs& args) {
  for (std::int64_t i = 0; i < args.count; ++i) {
    const LogitEdit& e = args.edits[i];
    args.logits[std::int64_t{e.row - args.first_row} * args.vocab + e.token] = args.saved[i];
  }
}

}  // namespace offgen::kernels::reference
