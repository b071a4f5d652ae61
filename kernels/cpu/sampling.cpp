#include "kernels/cpu/sampling.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "kernels/cpu/vector_math.h"

namespace offgen::kernels::cpu {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
// The draw walks block sums first, then one block.
constexpr int kBlock = 64;

// Per-thread scratch, reused across rows and steps so a step allocates nothing once warm.
struct Scratch {
  std::vector<float> masked;   // the row with unsampleable ids and NaN as -inf
  std::vector<float> weights;  // w (0 outside the kept set)
  std::vector<float> values;   // selection scratch (top-k logits, top-p weights)
  std::vector<double> block_mass;
  std::vector<int> counts;  // top-k key histogram
};

std::int32_t greedy(const float* row, int vocab) {
  int best = 0;
  float best_value = std::isnan(row[0]) ? kMinusInf : row[0];
  for (int i = 1; i < vocab; ++i) {
    if (row[i] > best_value) {  // NaN compares false: it never wins
      best = i;
      best_value = row[i];
    }
  }
  return best;
}

// Step 1: y = the row, with every id that is not a candidate (unsampleable, NaN) at -inf; returns
// the maximum of y.
OFFGEN_SIMD_CLONES float mask_row(const float* row, const std::uint8_t* sampleable, int vocab,
                                  float* y) {
  float m = kMinusInf;
  if (sampleable == nullptr) {
#pragma omp simd reduction(max : m)
    for (int i = 0; i < vocab; ++i) {
      y[i] = pick(row[i] == row[i], row[i], kMinusInf);
      m = vmax(m, y[i]);
    }
  } else {
#pragma omp simd reduction(max : m)
    for (int i = 0; i < vocab; ++i) {
      y[i] = pick(row[i] == row[i] && sampleable[i] != 0, row[i], kMinusInf);
      m = vmax(m, y[i]);
    }
  }
  return m;
}

// fp32 values as unsigned keys in the same order (-inf lowest).
std::uint32_t order_key(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}

// Step 2: the k-th largest candidate (y > -inf), or -inf when there are k or fewer. A histogram
// of the keys' top 11 bits finds the bucket that holds it; only that bucket is selected from.
float kth_largest(const float* y, int vocab, int k, Scratch& s) {
  constexpr int kShift = 21;
  s.counts.assign(std::size_t{1} << (32 - kShift), 0);
  int candidates = 0;
  for (int i = 0; i < vocab; ++i) {
    if (y[i] > kMinusInf) {
      ++s.counts[order_key(y[i]) >> kShift];
      ++candidates;
    }
  }
  if (k >= candidates) return kMinusInf;
  int remaining = k;
  std::uint32_t bucket = static_cast<std::uint32_t>(s.counts.size() - 1);
  while (remaining > s.counts[bucket]) remaining -= s.counts[bucket--];
  s.values.clear();
  for (int i = 0; i < vocab; ++i) {
    if (y[i] > kMinusInf && order_key(y[i]) >> kShift == bucket) s.values.push_back(y[i]);
  }
  const auto nth = s.values.begin() + (remaining - 1);
  std::nth_element(s.values.begin(), nth, s.values.end(), std::greater<float>());
  return *nth;
}

// Step 3: w = exp((y - m) / T) for y >= kth (1 where y = m; 0 for -inf), else 0; returns the sum.
// Built with fp contraction off (kernels/CMakeLists.txt), so every ISA clone computes the
// reference's bits.
OFFGEN_SIMD_CLONES double weigh(const float* y, int vocab, float m, float kth, float temperature,
                                float* w) {
  double z = 0.0;
#pragma omp simd reduction(+ : z)
  for (int i = 0; i < vocab; ++i) {
    const float e = pick(y[i] == m, 1.0f, fast_exp((y[i] - m) / temperature));
    w[i] = pick(y[i] >= kth, e, 0.0f);
    z += static_cast<double>(w[i]);
  }
  return z;
}

// Step 4: the largest tau with sum(w >= tau) >= target, by 3-way quickselect over `values`
// (descending mass from the top: each round keeps the side that holds the boundary).
float top_p_threshold(std::vector<float>& values, double target) {
  double above = 0.0;  // mass of the values known to rank above [lo, hi)
  std::size_t lo = 0, hi = values.size();
  while (hi - lo > 32) {
    const float pivot = values[lo + (hi - lo) / 2];
    // [lo, gt) > pivot, [gt, lt) == pivot, [lt, hi) < pivot.
    const auto gt_end = std::partition(values.begin() + static_cast<std::ptrdiff_t>(lo),
                                       values.begin() + static_cast<std::ptrdiff_t>(hi),
                                       [&](float v) { return v > pivot; });
    const auto eq_end = std::partition(gt_end, values.begin() + static_cast<std::ptrdiff_t>(hi),
                                       [&](float v) { return v == pivot; });
    double greater = 0.0;
    for (auto it = values.begin() + static_cast<std::ptrdiff_t>(lo); it != gt_end; ++it) {
      greater += *it;
    }
    const double equal = static_cast<double>(pivot) * static_cast<double>(eq_end - gt_end);
    if (above + greater >= target) {
      hi = static_cast<std::size_t>(gt_end - values.begin());
    } else if (above + greater + equal >= target) {
      return pivot;
    } else {
      above += greater + equal;
      lo = static_cast<std::size_t>(eq_end - values.begin());
    }
  }
  std::sort(values.begin() + static_cast<std::ptrdiff_t>(lo),
            values.begin() + static_cast<std::ptrdiff_t>(hi), std::greater<float>());
  for (std::size_t i = lo; i < hi; ++i) {
    above += values[i];
    if (above >= target) return values[i];
  }
  // Rounding left the mass short of the target: keep every positive weight.
  return hi > 0 ? values[hi - 1] : std::numeric_limits<float>::denorm_min();
}

// Step 5, first half: the kept mass of each block of kBlock ids (w >= tau; zeros add nothing).
OFFGEN_SIMD_CLONES double block_sums(const float* w, int vocab, float tau, double* blocks) {
  double total = 0.0;
  for (int b0 = 0; b0 < vocab; b0 += kBlock) {
    const int b1 = std::min(vocab, b0 + kBlock);
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int i = b0; i < b1; ++i) sum += static_cast<double>(pick(w[i] >= tau, w[i], 0.0f));
    blocks[b0 / kBlock] = sum;
    total += sum;
  }
  return total;
}

std::int32_t sample_row(const float* row, int vocab, const SampleParams& p,
                        const std::uint8_t* sampleable, Scratch& s) {
  if (p.temperature == 0.0f || p.top_k == 1) return greedy(row, vocab);
  const auto n = static_cast<std::size_t>(vocab);
  s.masked.resize(n);
  s.weights.resize(n);
  s.block_mass.resize((n + kBlock - 1) / kBlock);
  float* y = s.masked.data();
  float* w = s.weights.data();
  const float m = mask_row(row, sampleable, vocab, y);
  if (!(m > kMinusInf)) return greedy(row, vocab);  // no candidate

  // 2. top-k: the k-th largest candidate logit.
  const float kth = p.top_k > 0 ? kth_largest(y, vocab, p.top_k, s) : kMinusInf;
  // 3. Weights.
  const double z = weigh(y, vocab, m, kth, p.temperature, w);

  // 4. top-p. Only weights above (1 - top_p) * z / vocab can be in the kept set: all the ones at
  // or below it hold at most (1 - top_p) * z, so the rest already reach top_p * z.
  float tau = 0.0f;
  if (p.top_p < 1.0f) {
    const double target = static_cast<double>(p.top_p) * z;
    const double floor = (1.0 - static_cast<double>(p.top_p)) * z / static_cast<double>(vocab);
    s.values.clear();
    for (int i = 0; i < vocab; ++i) {
      if (static_cast<double>(w[i]) > floor) s.values.push_back(w[i]);
    }
    tau = top_p_threshold(s.values, target);
  }

  // 5. The draw: the block whose running mass passes uniform * total, then the id inside it.
  const double total = block_sums(w, vocab, tau, s.block_mass.data());
  const double target = static_cast<double>(p.uniform) * total;
  double running = 0.0;
  std::size_t block = 0;
  const std::size_t blocks = s.block_mass.size();
  while (block + 1 < blocks && running + s.block_mass[block] <= target) {
    running += s.block_mass[block++];
  }
  int last_positive = -1;
  const int end = std::min(vocab, static_cast<int>(block + 1) * kBlock);
  for (int i = static_cast<int>(block) * kBlock; i < end; ++i) {
    if (w[i] < tau || w[i] <= 0.0f) continue;
    running += w[i];
    last_positive = i;
    if (running > target) return i;
  }
  if (last_positive >= 0) return last_positive;  // rounding short of the target
  for (int i = vocab - 1; i >= 0; --i) {
    if (w[i] >= tau && w[i] > 0.0f) return i;
  }
  return greedy(row, vocab);
}

}  // namespace

void sample_rows(const SampleRowsArgs& args) {
  tbb::parallel_for(std::int64_t{0}, args.rows, [&](std::int64_t r) {
    thread_local Scratch scratch;
    args.out[r] = sample_row(args.logits + r * args.vocab, args.vocab, args.params[r],
                             args.sampleable, scratch);
  });
}

}  // namespace offgen::kernels::cpu
