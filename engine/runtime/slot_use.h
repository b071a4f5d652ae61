// How much of a run's work its requests needed: token slots (one row of one pass) that carried a
// real token, against every slot the passes computed. A block pads each prompt to its longest,
// and a sequence that has finished keeps its row in the decode steps until the block's last one
// is done: both are computed and wasted.
#pragma once

#include <cstdint>

namespace offgen {

struct SlotUse {
  std::uint64_t useful = 0;  // real prompt tokens prefilled + tokens fed by running sequences
  std::uint64_t passes = 0;  // prefills and decode steps run
  // The wasted slots by cause: prefill columns left of a shorter prompt, and decode rows of
  // sequences that had finished.
  std::uint64_t padding = 0;
  std::uint64_t idle = 0;

  // Rows x columns of every prefill, rows of every decode step.
  std::uint64_t computed() const { return useful + padding + idle; }
  // useful / computed; 1 for a run that computed nothing.
  double efficiency() const {
    return computed() == 0 ? 1.0 : static_cast<double>(useful) / static_cast<double>(computed());
  }
  SlotUse& operator+=(const SlotUse& other) {
    useful += other.useful;
    passes += other.passes;
    padding += other.padding;
    idle += other.idle;
    return *this;
  }
  friend SlotUse operator-(SlotUse a, const SlotUse& b) {
    a.useful -= b.useful;
    a.passes -= b.passes;
    a.padding -= b.padding;
    a.idle -= b.idle;
    return a;
  }
};

// Passes of one kind (a job's prefills), the token slots they computed and their wall seconds.
struct PassTime {
  std::uint64_t passes = 0;
  std::uint64_t slots = 0;
  double seconds = 0;
  PassTime& operator+=(const PassTime& other) {
    passes += other.passes;
    slots += other.slots;
    seconds += other.seconds;
    return *this;
  }
  friend PassTime operator-(PassTime a, const PassTime& b) {
    a.passes -= b.passes;
    a.slots -= b.slots;
    a.seconds -= b.seconds;
    return a;
  }
};

// While it lives, adds what `source.slot_use()` grows by to `total` (when it ends, so a block or
// a job that an interrupt or an error cuts short still counts what it ran). Source: a runner
// (one block), an engine (one job).
template <typename Source>
class SlotUseCounter {
 public:
  SlotUseCounter(const Source& source, SlotUse& total)
      : source_(source), total_(total), before_(source.slot_use()) {}
  SlotUseCounter(const SlotUseCounter&) = delete;
  SlotUseCounter& operator=(const SlotUseCounter&) = delete;
  ~SlotUseCounter() { total_ += source_.slot_use() - before_; }

 private:
  const Source& source_;
  SlotUse& total_;
  SlotUse before_;
};

}  // namespace offgen
