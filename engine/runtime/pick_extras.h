// What a block's token picks carry beyond the ids, sized when its BlockRunner is made.
#pragma once

#include <cstdint>

namespace offgen {

struct PickExtras {
  std::int64_t logit_edits = 0;  // the most logit edits one pick is given (LogitEditor::capacity)
  int top_logprobs = 0;          // the most likely ids each log-prob read reports (0: none)
};

}  // namespace offgen
