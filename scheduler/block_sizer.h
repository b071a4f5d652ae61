// How many requests the next block of a batch job (generate, score) takes. Results are written as
// each block finishes, so a block's time bounds how long a user waits for the first results and
// how much an interrupt can lose: the sizer keeps a block within a time target, learning the cost
// of work from the blocks that ran, and cuts a block short where taking more requests would pad
// more than it gains — without shrinking a block where that would not make it faster (when a
// block's time is mostly a fixed cost per step, e.g. weights streamed in every pass, a smaller
// block only lowers throughput, so the full block runs).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace offgen {

// One request's share of a block: its prefill columns (its prompt; score's prefix) and the
// passes its block needs for it (the prefill and each decode step). A block pads every prompt to
// its longest and runs every row through its longest request's steps, so it computes
// n x (longest prompt + most steps - 1) token slots for the useful ones its requests add up to.
struct SequenceWork {
  int prompt = 0;
  int steps = 0;
  // Token slots that carry this request's tokens: its prompt, then one per decode step.
  double useful() const { return prompt + std::max(steps - 1, 0); }
};

class BlockSizer {
 public:
  // max_block: the planned block (the most that runs together). target_seconds <= 0: always the
  // planned block. probe: start with an eighth of the planned block to measure the cost cheaply
  // (right where a step's fixed cost is small, i.e. the weights are resident; where they stream
  // in every pass, a small first block would pay that cost once more for little).
  BlockSizer(std::size_t max_block, double target_seconds, bool probe = true);

  // How many of `upcoming` (in the order they will run) the next block takes, at least 1 and at
  // most the planned block: before any measurement the probe block (or the planned one); then,
  // of the blocks whose predicted time fits the target, the largest within 5% of the best
  // predicted rate of useful token slots per second (a block that would pad far more, taking the
  // next, longer requests, waits for the next block), or simply the largest while the fit cannot
  // yet tell fixed costs from per-slot ones; the planned block when the fixed cost per step
  // alone exceeds half the target.
  std::size_t next(std::span<const SequenceWork> upcoming) const;

  // Continuous batching (a runner whose finished rows take the next requests): how many rows.
  // A runner of few rows pays the fixed cost of a pass for few tokens; one of many pads its first
  // prompts to the longest of many and refills in larger groups, and runs short of requests at
  // the job's end: of the sizes whose longest-running request (its passes at per_step +
  // per_slot x rows each) fits the target — an interrupt loses at most the life of the requests
  // in flight — the one with the least predicted time for `upcoming`, simulated as the runner
  // refills (continuous_seconds; a refill waits for rows / refill_divisor free rows). Before the
  // fit tells fixed costs from per-slot ones, or without a target: as many as next() would run.
  std::size_t rows(std::span<const SequenceWork> upcoming, std::size_t refill_divisor) const;
  // Whether a block has been observed (the sizer has a cost to go by).
  bool measured() const { return !seen_.empty(); }

  // Predicted seconds of `upcoming` (each request running to its last step) through a runner of
  // `rows` rows whose finished rows are refilled, a group of requests at a time, once
  // max(1, rows / refill_divisor) rows are free (or the rest fits, or none runs): each refill a
  // pass over its group padded to the group's longest prompt, each decode step a pass charged
  // for every row (see the comment in the simulation).
  double continuous_seconds(std::span<const SequenceWork> upcoming, std::size_t rows,
                            std::size_t refill_divisor) const;

  // A block that ran: its passes (the most steps of its requests), the token slots it computed
  // (padding and finished rows included) and its wall seconds.
  void observe(int steps, double slots, double seconds);

  // The fitted cost: seconds per pass and per computed token slot (both >= 0; 0 before any
  // observation).
  double seconds_per_step() const { return per_step_; }
  double seconds_per_slot() const { return per_slot_; }

 private:
  struct Observation {
    double steps, slots, seconds;
  };
  void fit();

  std::size_t max_block_;
  double target_;
  bool probe_;
  std::vector<Observation> seen_;
  double per_step_ = 0;
  double per_slot_ = 0;
  bool both_parts_ = false;  // the fit told fixed costs from per-slot ones (blocks of two shapes)
};

}  // namespace offgen
