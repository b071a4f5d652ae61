// A debugging aid for the attention-score policies: with OFFGEN_TRACE_SCORES=FILE set, every
// prefill keep and decode update appends the layer's state (each slot's position and score, the
// write slot, and the probabilities the update added) to FILE as text, one line per (sequence,
// KV head), and every decode attention over gpu-resident caches each slot's K and V sums and each
// query head's output sum; so two runs — the cpu and the cuda device, say — can be compared cell
// by cell with diff. Unset (the normal case) it costs one getenv per state and a test per call.
// Each dump waits for the compute stream, so a traced run is slow.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string_view>

#include "engine/core/half.h"
#include "engine/device/device.h"

namespace offgen {

class ScoreTrace {
 public:
  // Opens OFFGEN_TRACE_SCORES for appending when it is set; otherwise enabled() is false.
  explicit ScoreTrace(Device& device);

  bool enabled() const { return file_ != nullptr; }

  // Appends `what` of `layer`: batch x heads rows of `capacity` slots' positions and scores,
  // each row's write slot, and (when not null) its `probs_width` probabilities; all device
  // pointers of the compute stream.
  void dump(std::string_view what, int layer, int batch, int heads, int capacity,
            const std::int32_t* position, const float* score, const std::int32_t* write_slot,
            const float* probs, int probs_width);
  // Appends `what` of `layer`: each of batch x heads rows' sums of K and of V per slot
  // (capacity slots of head_dim halves, fp16 caches), then each sequence's attention output
  // summed per query head (out: batch x q_heads x head_dim halves, or null).
  void dump_cache(std::string_view what, int layer, int batch, int heads, int capacity,
                  int head_dim, const Half* k, const Half* v, const Half* out, int q_heads);

 private:
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  Device& device_;
  std::unique_ptr<std::FILE, Close> file_;
  int calls_ = 0;
};

}  // namespace offgen
