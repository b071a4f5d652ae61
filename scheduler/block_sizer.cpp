#include "scheduler/block_sizer.h"

#include <algorithm>

namespace offgen {

BlockSizer::BlockSizer(std::size_t max_block, double target_seconds, bool probe)
    : max_block_(std::max<std::size_t>(max_block, 1)), target_(target_seconds), probe_(probe) {}

std::size_t BlockSizer::next(std::span<const SequenceWork> upcoming) const {
  const std::size_t most = std::min(max_block_, std::max<std::size_t>(upcoming.size(), 1));
  if (target_ <= 0) return most;
  if (seen_.empty()) {
    return probe_ ? std::max<std::size_t>(1, std::min(most, max_block_ / 8)) : most;
  }
  if (per_token_ <= 0) return most;  // every second is fixed per step: size cannot help
  double tokens = 0;
  int steps = 0;
  std::size_t n = 0;
  while (n < most) {
    const double t = tokens + upcoming[n].tokens;
    const int s = std::max(steps, upcoming[n].steps);
    if (n > 0 && per_step_ * s + per_token_ * t > target_) break;
    tokens = t;
    steps = s;
    ++n;
  }
  // The fixed part alone takes most of the target: shrinking would lose throughput and still
  // not meet it, so run the planned block.
  if (n < most && per_step_ * steps >= 0.5 * target_) return most;
  return n;
}

void BlockSizer::observe(int steps, double tokens, double seconds) {
  if (steps <= 0 || tokens <= 0 || seconds < 0) return;
  seen_.push_back({static_cast<double>(steps), tokens, seconds});
  fit();
}

// Least squares of seconds = per_step * steps + per_token * tokens over the blocks seen, both
// coefficients >= 0. With one block (or blocks of one shape) the split is unknown: all of it is
// charged to tokens, which errs toward smaller blocks.
void BlockSizer::fit() {
  double ss = 0, st = 0, tt = 0, sy = 0, ty = 0;
  for (const Observation& o : seen_) {
    ss += o.steps * o.steps;
    st += o.steps * o.tokens;
    tt += o.tokens * o.tokens;
    sy += o.steps * o.seconds;
    ty += o.tokens * o.seconds;
  }
  const double det = ss * tt - st * st;
  const bool distinct = det > 1e-9 * ss * tt;  // blocks of more than one shape
  if (distinct) {
    per_step_ = (sy * tt - ty * st) / det;
    per_token_ = (ty * ss - sy * st) / det;
    if (per_step_ >= 0 && per_token_ >= 0) return;
  }
  // One shape, or a negative part: the one-part fit that explains more (tokens when unsure).
  per_step_ = 0;
  per_token_ = ty / tt;
  if (distinct && sy * sy / ss > ty * ty / tt) {
    per_token_ = 0;
    per_step_ = sy / ss;
  }
}

}  // namespace offgen
