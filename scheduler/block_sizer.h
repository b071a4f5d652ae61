// How many requests the next block of a batch job (generate, score) takes. Results are written as
// each block finishes, so a block's time bounds how long a user waits for the first results and
// how much an interrupt can lose: the sizer keeps a block near a time target, learning the cost
// of work from the blocks that ran — without shrinking a block where that would not make it
// faster (when a block's time is mostly a fixed cost per step, e.g. weights streamed in every
// pass, a smaller block only lowers throughput, so the full block runs).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace offgen {

// One request's share of a block: the tokens it runs through the model (prompt, generated or
// teacher-forced) and the passes its block needs for it (prefill + decode steps).
struct SequenceWork {
  double tokens = 0;
  int steps = 0;
};

class BlockSizer {
 public:
  // max_block: the planned block (the most that runs together). target_seconds <= 0: always the
  // planned block. probe: start with an eighth of the planned block to measure the cost cheaply
  // (right where a step's fixed cost is small, i.e. the weights are resident; where they stream
  // in every pass, a small first block would pay that cost once more for little).
  BlockSizer(std::size_t max_block, double target_seconds, bool probe = true);

  // How many of `upcoming` (in the order they will run) the next block takes: the most whose
  // predicted time fits the target, at least 1; before any measurement the probe block (or the
  // planned one); the planned block when the fixed cost per step alone exceeds half the target.
  std::size_t next(std::span<const SequenceWork> upcoming) const;

  // A block that ran: its passes (the most steps of its requests), tokens and wall seconds.
  void observe(int steps, double tokens, double seconds);

  // The fitted cost: seconds per pass and per token (both >= 0; 0 before any observation).
  double seconds_per_step() const { return per_step_; }
  double seconds_per_token() const { return per_token_; }

 private:
  struct Observation {
    double steps, tokens, seconds;
  };
  void fit();

  std::size_t max_block_;
  double target_;
  bool probe_;
  std::vector<Observation> seen_;
  double per_step_ = 0;
  double per_token_ = 0;
};

}  // namespace offgen
