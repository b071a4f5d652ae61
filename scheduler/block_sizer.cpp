#include "scheduler/block_sizer.h"

#include <algorithm>

namespace offgen {

BlockSizer::BlockSizer(std::size_t max_block, double target_seconds, bool probe)
    : max_block_(std::max<std::size_t>(max_block, 1)), target_(target_seconds), probe_(probe) {}

std::size_t BlockSizer::next(std::span<const SequenceWork> upcoming) const {
  const std::size_t most = std::min(max_block_, std::max<std::size_t>(upcoming.size(), 1));
  if (target_ <= 0 || upcoming.empty()) return most;
  if (seen_.empty()) {
    return probe_ ? std::max<std::size_t>(1, std::min(most, max_block_ / 8)) : most;
  }
  if (per_slot_ <= 0) return most;  // every second is fixed per step: size cannot help
  int prompt = 0;
  int steps = 0;
  double useful = 0;
  std::size_t fits = 1;  // the largest block within the target (at least one request)
  int fits_steps = 0;
  std::vector<double> rate;  // rate[n - 1]: predicted useful slots per second of n requests
  for (std::size_t n = 1; n <= most; ++n) {
    const SequenceWork& w = upcoming[n - 1];
    prompt = std::max(prompt, w.prompt);
    steps = std::max(steps, w.steps);
    useful += w.useful();
    const double computed = static_cast<double>(n) * (prompt + std::max(steps - 1, 0));
    const double seconds = per_step_ * steps + per_slot_ * computed;
    if (n == 1 || seconds <= target_) {  // time only grows with n: the fitting ones are a prefix
      fits = n;
      fits_steps = steps;
    }
    rate.push_back(seconds > 0 ? useful / seconds : 0);
    if (!both_parts_ && n > 1 && seconds > target_) break;
  }
  // Until the fit tells per-step from per-slot costs (per_step_ is 0 then), fill the target.
  if (!both_parts_) return fits;
  // The fixed part alone takes most of the target: shrinking would lose throughput and still
  // hardly meet it, so the target no longer bounds the block; the rate still does.
  const bool unreachable = fits < most && per_step_ * fits_steps >= 0.5 * target_;
  const std::size_t limit = unreachable ? most : fits;
  const double best = *std::max_element(rate.begin(), rate.begin() + static_cast<long>(limit));
  std::size_t n = limit;
  while (n > 1 && rate[n - 1] < 0.95 * best) --n;
  return n;
}

std::size_t BlockSizer::rows(std::span<const SequenceWork> upcoming,
                             std::size_t refill_divisor) const {
  const std::size_t most = std::min(max_block_, std::max<std::size_t>(upcoming.size(), 1));
  if (target_ <= 0 || upcoming.empty() || !both_parts_) return next(upcoming);
  // The first requests stand for the job: the simulation costs O(their slots) per size.
  const std::span<const SequenceWork> sample =
      upcoming.first(std::min<std::size_t>(upcoming.size(), std::max<std::size_t>(4096, 4 * most)));
  int steps = 0;
  for (const SequenceWork& w : upcoming) steps = std::max(steps, w.steps);
  // The largest runner whose longest-running request fits the target (all, where the fixed
  // cost alone takes half of it: shrinking could not meet it).
  std::size_t fits = most;
  if (per_step_ * steps < 0.5 * target_) {
    fits = 1;
    for (std::size_t n = 2; n <= most; ++n) {
      if (steps * (per_step_ + per_slot_ * static_cast<double>(n)) > target_) break;
      fits = n;
    }
  }
  std::size_t best = fits;
  double best_seconds = continuous_seconds(sample, fits, refill_divisor);
  for (std::size_t n = fits; n > 1;) {
    n = std::min(n - 1, static_cast<std::size_t>(static_cast<double>(n) * 0.85));
    const double seconds = continuous_seconds(sample, std::max<std::size_t>(n, 1), refill_divisor);
    if (seconds < best_seconds) {
      best_seconds = seconds;
      best = std::max<std::size_t>(n, 1);
    }
  }
  return best;
}

double BlockSizer::continuous_seconds(std::span<const SequenceWork> upcoming, std::size_t rows,
                                      std::size_t refill_divisor) const {
  rows = std::max<std::size_t>(rows, 1);
  const std::size_t threshold =
      std::max<std::size_t>(1, rows / std::max<std::size_t>(refill_divisor, 1));
  std::vector<int> left(rows, 0);  // decode steps each row still runs; 0: free
  std::size_t next = 0;
  double passes = 0;
  double slots = 0;
  std::size_t running = 0;
  // A prefill of the next k requests into free rows; a request of one step ends at its pick.
  const auto refill = [&](std::size_t k) {
    int longest = 0;
    for (std::size_t i = 0; i < k; ++i) longest = std::max(longest, upcoming[next + i].prompt);
    passes += 1;
    slots += static_cast<double>(k) * longest;
    std::size_t row = 0;
    for (std::size_t i = 0; i < k; ++i) {
      const int decode = upcoming[next + i].steps - 1;
      if (decode <= 0) continue;
      while (left[row] > 0) ++row;
      left[row] = decode;
      ++running;
    }
    next += k;
  };
  refill(std::min(rows, upcoming.size()));
  for (;;) {
    const std::size_t free = rows - running;
    const std::size_t waiting = upcoming.size() - next;
    if (waiting > 0 && free > 0 && (free >= threshold || free >= waiting || running == 0)) {
      refill(std::min(free, waiting));
      continue;
    }
    if (running == 0) break;
    passes += 1;
    // Every row is charged, though a step computes only the running ones: the fit has one cost
    // per slot, which makes a decode row as cheap as a prefill column, and on the cpu device it
    // is dearer. Charging the free rows too chose 22 rows (130.5 tokens/s, 0.97 of the slots
    // used) on scripts/mixed-job --requests 150 where charging the running ones chose 38 (115.1,
    // 0.93): measured, the rows it stands in for are worth more than the model's precision.
    slots += static_cast<double>(rows);
    for (int& l : left) {
      if (l > 0 && --l == 0) --running;
    }
  }
  return per_step_ * passes + per_slot_ * slots;
}

void BlockSizer::observe(int steps, double slots, double seconds) {
  if (steps <= 0 || slots <= 0 || seconds < 0) return;
  seen_.push_back({static_cast<double>(steps), slots, seconds});
  fit();
}

// Least squares of seconds = per_step * steps + per_slot * slots over the blocks seen, both
// coefficients >= 0. With one block (or blocks of one shape) the split is unknown: all of it is
// charged to slots, which errs toward smaller blocks.
void BlockSizer::fit() {
  double ss = 0, st = 0, tt = 0, sy = 0, ty = 0;
  for (const Observation& o : seen_) {
    ss += o.steps * o.steps;
    st += o.steps * o.slots;
    tt += o.slots * o.slots;
    sy += o.steps * o.seconds;
    ty += o.slots * o.seconds;
  }
  const double det = ss * tt - st * st;
  const bool distinct = det > 1e-9 * ss * tt;  // blocks of more than one shape
  if (distinct) {
    per_step_ = (sy * tt - ty * st) / det;
    per_slot_ = (ty * ss - sy * st) / det;
    both_parts_ = per_step_ >= 0 && per_slot_ >= 0;
    if (both_parts_) return;
  }
  both_parts_ = false;
  // One shape, or a negative part: the one-part fit that explains more (slots when unsure).
  per_step_ = 0;
  per_slot_ = ty / tt;
  if (distinct && sy * sy / ss > ty * ty / tt) {
    per_slot_ = 0;
    per_step_ = sy / ss;
  }
}

}  // namespace offgen
