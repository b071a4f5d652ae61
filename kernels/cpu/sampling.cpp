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

// The draw walks block sums first, then one block.
constexpr int kBlock = 64;

// Per-thread scratch, reused across rows and steps so a step allocates nothing once warm.
struct Scratch {
  std::vector<float> masked;   // the row with unsampleable ids at -inf
  std::vector<float> weights;  // w (0 outside the kept set)
  std::vector<float> values;   // selection scratch (top-k logits, top-p weights)
  std::vector<double> block_mass;
  std::vector<double> mass;     // top-p histogram
  std::vector<int> counts;      // top-k key histogram
  std::vector<int> candidates;  // top-p: the ids that can be kept, in id order
};

// The lowest id of the largest logit (NaN ranks as -inf): the maximum by a vectorised reduction
// that skips NaN, then the first id holding it. A row of only NaN / -inf picks 0.
OFFGEN_SIMD_CLONES std::int32_t greedy(const float* row, int vocab) {
  float m = kMinusInf;
#pragma omp simd reduction(max : m)
  for (int i = 0; i < vocab; ++i) m = vmax(m, row[i]);
  if (!(m > kMinusInf)) return 0;
  for (int i = 0; i < vocab; ++i) {
    if (row[i] == m) return i;
  }
  return 0;
}

// Step 1: the largest candidate logit (NaN skipped). Every later step treats NaN as no candidate
// through its comparisons (NaN >= anything is false), so an unmasked row is read as it is.
OFFGEN_SIMD_CLONES float row_max(const float* row, int vocab) {
  float m = kMinusInf;
#pragma omp simd reduction(max : m)
  for (int i = 0; i < vocab; ++i) m = vmax(m, row[i]);
  return m;
}

// Step 1 with unsampleable ids: y = the row with them at -inf; returns the maximum of y.
OFFGEN_SIMD_CLONES float mask_row(const float* row, const std::uint8_t* sampleable, int vocab,
                                  float* y) {
  float m = kMinusInf;
#pragma omp simd reduction(max : m)
  for (int i = 0; i < vocab; ++i) {
    y[i] = pick(sampleable[i] != 0, row[i], kMinusInf);
    m = vmax(m, y[i]);
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

// Step 3: w = exp((y - m) / T) for y >= kth and w >= min_p (1 where y = m; 0 for -inf and NaN),
// else 0; the sum of each block of kBlock ids into `blocks`, and the total returned. Built with
// fp contraction off (kernels/CMakeLists.txt), so every ISA clone computes the reference's bits.
OFFGEN_SIMD_CLONES double weigh(const float* y, int vocab, float m, float kth, float min_p,
                                float temperature, float* w, double* blocks) {
  double z = 0.0;
  for (int b0 = 0; b0 < vocab; b0 += kBlock) {
    const int b1 = std::min(vocab, b0 + kBlock);
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int i = b0; i < b1; ++i) {
      const float e = pick(y[i] == m, 1.0f, fast_exp((y[i] - m) / temperature));
      w[i] = pick((y[i] >= kth) & (e >= min_p), e, 0.0f);
      sum += static_cast<double>(w[i]);
    }
    blocks[b0 / kBlock] = sum;
    z += sum;
  }
  return z;
}

// Step 4, within one bucket: the largest tau with above + sum(values >= tau) >= target, by 3-way
// quickselect (each round keeps the side that holds the boundary). `above`: the mass of every
// weight larger than the bucket's.
float select_threshold(std::vector<float>& values, double above, double target) {
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

// Step 4: the largest tau with sum(w >= tau) >= target. Only weights above `floor` can be kept;
// a histogram of their mass by fp32 exponent and top 3 mantissa bits finds the bucket that holds
// tau, and only that bucket is selected from.
constexpr int kBuckets = 1017;  // a weight in (0, 1] has bits <= 0x3F800000: bucket <= 1016

// The ids whose weight is above `floor`, in id order, into s.candidates. A vectorised test per
// block of kBlock skips blocks with none (with a trained model's peaked distribution, most);
// inside a block the ids are compacted without a branch.
void collect_above(const float* w, int vocab, float floor, Scratch& s) {
  s.candidates.resize(static_cast<std::size_t>(vocab) + kBlock);
  int* out = s.candidates.data();
  std::size_t n = 0;
  for (int b0 = 0; b0 < vocab; b0 += kBlock) {
    const int b1 = std::min(vocab, b0 + kBlock);
    int hits = 0;
#pragma omp simd reduction(+ : hits)
    for (int i = b0; i < b1; ++i) hits += w[i] > floor ? 1 : 0;
    if (hits == 0) continue;
    for (int i = b0; i < b1; ++i) {
      out[n] = i;
      n += w[i] > floor ? 1 : 0;
    }
  }
  s.candidates.resize(n);
}

// Also leaves the ids above the floor in s.candidates (id order): the kept set is among them.
float top_p_threshold(const float* w, int vocab, float floor, double target, Scratch& s) {
  collect_above(w, vocab, floor, s);
  // Four interleaved histograms: a flat distribution puts long runs into one bucket, and one
  // histogram would chain every add through the same memory slot.
  constexpr int kWays = 4;
  s.mass.assign(kWays * kBuckets, 0.0);
  double* mass = s.mass.data();
  const int* ids = s.candidates.data();
  const std::size_t count = s.candidates.size();
  for (std::size_t k = 0; k < count; ++k) {
    const float v = w[ids[k]];
    mass[(k % kWays) * kBuckets + (std::bit_cast<std::uint32_t>(v) >> 20)] += v;
  }
  for (int b = 0; b < kBuckets; ++b) {
    const auto u = static_cast<std::size_t>(b);
    s.mass[u] += s.mass[u + kBuckets] + s.mass[u + 2 * kBuckets] + s.mass[u + 3 * kBuckets];
  }
  double above = 0.0;
  int bucket = kBuckets - 1;
  while (bucket >= 0 && above + s.mass[static_cast<std::size_t>(bucket)] < target) {
    above += s.mass[static_cast<std::size_t>(bucket--)];
  }
  if (bucket < 0) return std::numeric_limits<float>::denorm_min();  // rounding: keep all
  // Branch-free compaction: in a flat distribution a candidate is in the bucket at random.
  const auto wanted = static_cast<std::uint32_t>(bucket);
  s.values.resize(count + 1);
  std::size_t in_bucket = 0;
  for (std::size_t k = 0; k < count; ++k) {
    const float v = w[ids[k]];
    s.values[in_bucket] = v;
    in_bucket += std::bit_cast<std::uint32_t>(v) >> 20 == wanted ? 1 : 0;
  }
  s.values.resize(in_bucket);
  return select_threshold(s.values, above, target);
}

// Step 5 with many kept weights: the kept mass (w >= tau) of each block of kBlock ids.
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

// Step 5 over block sums (s.block_mass, total `total`): the block whose running mass passes
// uniform * total, then the kept id inside it that does.
std::int32_t draw_by_blocks(const float* w, int vocab, float tau, double total, float uniform,
                            const Scratch& s, const float* row) {
  const double target = static_cast<double>(uniform) * total;
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

std::int32_t sample_row(const float* row, int vocab, const SampleParams& p,
                        const std::uint8_t* sampleable, Scratch& s) {
  if (p.temperature == 0.0f || p.top_k == 1) return greedy(row, vocab);
  const auto n = static_cast<std::size_t>(vocab);
  s.masked.resize(n);
  s.weights.resize(n);
  s.block_mass.resize((n + kBlock - 1) / kBlock);
  const float* y = row;
  float m = 0.0f;
  if (sampleable != nullptr) {
    m = mask_row(row, sampleable, vocab, s.masked.data());
    y = s.masked.data();
  } else {
    m = row_max(row, vocab);
  }
  float* w = s.weights.data();
  if (!(m > kMinusInf)) return greedy(row, vocab);  // no candidate

  // 2. top-k: the k-th largest candidate logit.
  const float kth = p.top_k > 0 ? kth_largest(y, vocab, p.top_k, s) : kMinusInf;
  // 3. Weights.
  const double z = weigh(y, vocab, m, kth, p.min_p, p.temperature, w, s.block_mass.data());

  // 4. top-p. Only weights above (1 - top_p) * z / vocab can be in the kept set: all the ones at
  // or below it hold at most (1 - top_p) * z, so the rest already reach top_p * z.
  if (p.top_p < 1.0f) {
    const double floor = (1.0 - static_cast<double>(p.top_p)) * z / static_cast<double>(vocab);
    // In fp32, rounded down, so no weight above the exact floor is left out.
    float floor32 = static_cast<float>(floor);
    if (static_cast<double>(floor32) > floor) floor32 = std::nextafter(floor32, 0.0f);
    const float tau = top_p_threshold(w, vocab, floor32, static_cast<double>(p.top_p) * z, s);
    // 5. The draw over the kept weights, in id order: a few candidates (a peaked distribution)
    // are walked directly; many (a flat one) through block sums, as without top-p.
    if (s.candidates.size() * 16 < static_cast<std::size_t>(vocab)) {
      double total = 0.0;
      for (int i : s.candidates) total += w[i] >= tau ? static_cast<double>(w[i]) : 0.0;
      const double target = static_cast<double>(p.uniform) * total;
      double running = 0.0;
      int last = -1;
      for (int i : s.candidates) {
        if (w[i] < tau) continue;
        running += w[i];
        last = i;
        if (running > target) return i;
      }
      return last >= 0 ? last : greedy(row, vocab);  // rounding short of the target
    }
    return draw_by_blocks(w, vocab, tau, block_sums(w, vocab, tau, s.block_mass.data()), p.uniform,
                          s, row);
  }
  return draw_by_blocks(w, vocab, 0.0f, z, p.uniform, s, row);
}

}  // namespace

void argmax_rows(const ArgmaxRowsArgs& args) {
  tbb::parallel_for(std::int64_t{0}, args.rows, [&](std::int64_t r) {
    args.out[r] = greedy(args.logits + r * args.vocab, args.vocab);
  });
}

void sample_rows(const SampleRowsArgs& args) {
  tbb::parallel_for(std::int64_t{0}, args.rows, [&](std::int64_t r) {
    thread_local Scratch scratch;
    args.out[r] = sample_row(args.logits + r * args.vocab, args.vocab, args.params[r],
                             args.sampleable, scratch);
  });
}

}  // namespace offgen::kernels::cpu
