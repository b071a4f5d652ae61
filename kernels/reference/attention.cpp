#include <cmath>
#include <limits>
#include <vector>

#include "engine/core/error.h"
#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {
namespace {

double dot(const Half* a, const Half* b, int n) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += double{half_to_float(a[i])} * half_to_float(b[i]);
  return sum;
}

// In-place softmax over the entries of `scores` whose `use` flag is set; others become 0.
void softmax(std::vector<double>& scores, const std::vector<bool>& use) {
  double max = -std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < scores.size(); ++j) {
    if (use[j] && scores[j] > max) max = scores[j];
  }
  double sum = 0.0;
  for (std::size_t j = 0; j < scores.size(); ++j) {
    scores[j] = use[j] ? std::exp(scores[j] - max) : 0.0;
    sum += scores[j];
  }
  for (double& s : scores) s /= sum;
}

// Grouped-query attention needs whole groups (kernels/attention_args.h).
void check_groups(const char* op, int heads, int kv_heads) {
  OFFGEN_CHECK(kv_heads > 0 && heads % kv_heads == 0,
               "{}: {} query heads do not split into groups over {} kv heads", op, heads, kv_heads);
}

}  // namespace

void prefill_attention(const PrefillAttentionArgs& a) {
  if (a.heads <= 0) return;
  const int kv_heads = a.kv_head_count();
  check_groups("prefill_attention", a.heads, kv_heads);
  const int group = a.heads / kv_heads;
  const int hd = a.heads * a.head_dim;
  const std::int64_t k_col = hd;                                        // first k column
  const std::int64_t v_col = hd + std::int64_t{kv_heads} * a.head_dim;  // first v column
  const std::int64_t qkv_stride = std::int64_t{a.heads + 2 * kv_heads} * a.head_dim;
  for (int b = 0; b < a.batch; ++b) {
    const std::uint8_t* valid = a.valid + std::int64_t{b} * a.seq;
    for (int c = 0; c < kv_heads; ++c) {
      // The kv head's key sums: each query head's double sums rounded to fp32, then added in
      // fp32 in head order (the spec's order).
      std::vector<float> group_sums(static_cast<std::size_t>(a.seq), 0.0f);
      for (int h = c * group; h < (c + 1) * group; ++h) {
        std::vector<double> key_sums_acc(static_cast<std::size_t>(a.seq), 0.0);
        for (int i = 0; i < a.seq; ++i) {
          const std::int64_t token = std::int64_t{b} * a.seq + i;
          Half* out = a.out + token * hd + std::int64_t{h} * a.head_dim;
          if (valid[i] == 0) {  // padding query: zeros
            for (int d = 0; d < a.head_dim; ++d) out[d] = float_to_half(0.0f);
            continue;
          }
          const Half* q = a.qkv + token * qkv_stride + std::int64_t{h} * a.head_dim;
          std::vector<double> p(static_cast<std::size_t>(i + 1));
          std::vector<bool> use(static_cast<std::size_t>(i + 1));
          for (int j = 0; j <= i; ++j) {  // causal: keys 0..i, real ones only
            const Half* k = a.qkv + (std::int64_t{b} * a.seq + j) * qkv_stride + k_col +
                            std::int64_t{c} * a.head_dim;
            use[j] = valid[j] != 0;
            p[j] = use[j] ? double{a.scale} * dot(q, k, a.head_dim) : 0.0;
          }
          softmax(p, use);
          for (int d = 0; d < a.head_dim; ++d) {
            double acc = 0.0;
            for (int j = 0; j <= i; ++j) {
              const Half* v = a.qkv + (std::int64_t{b} * a.seq + j) * qkv_stride + v_col +
                              std::int64_t{c} * a.head_dim;
              acc += p[j] * half_to_float(v[d]);
            }
            out[d] = float_to_half(static_cast<float>(acc));
          }
          if (a.key_sum_queries == 0 || i >= a.seq - a.key_sum_queries) {
            for (int j = 0; j <= i; ++j) key_sums_acc[j] += p[j];
          }
        }
        for (int j = 0; j < a.seq; ++j) group_sums[j] += static_cast<float>(key_sums_acc[j]);
      }
      if (a.key_prob_sums != nullptr) {
        float* key_sums = a.key_prob_sums + (std::int64_t{b} * kv_heads + c) * a.seq;
        for (int j = 0; j < a.seq; ++j) key_sums[j] = group_sums[j];
      }
    }
  }
}

namespace {

// Which of the first `count` slots kv head c of sequence b attends: all, or its chosen pages'.
std::vector<bool> attended_slots(const DecodeAttentionArgs& a, int b, int c, int count) {
  if (a.pages == nullptr) return std::vector<bool>(static_cast<std::size_t>(count), true);
  std::vector<bool> mask(static_cast<std::size_t>(count), false);
  const std::int64_t row = std::int64_t{b} * a.kv_head_count() + c;
  for (int i = 0; i < a.page_count[row]; ++i) {
    const int page = a.pages[row * a.max_selected + i];
    for (int s = page * a.page_size; s < std::min(count, (page + 1) * a.page_size); ++s) {
      mask[static_cast<std::size_t>(s)] = true;
    }
  }
  return mask;
}

}  // namespace

void decode_attention(const DecodeAttentionArgs& a) {
  if (a.heads <= 0) return;
  const int kv_heads = a.kv_head_count();
  check_groups("decode_attention", a.heads, kv_heads);
  const int group = a.heads / kv_heads;
  const int hd = a.heads * a.head_dim;
  const std::int64_t qkv_stride = std::int64_t{a.heads + 2 * kv_heads} * a.head_dim;
  for (int b = 0; b < a.batch; ++b) {
    const int count = a.slot_count[b];
    for (int c = 0; c < kv_heads; ++c) {
      const std::int64_t cache = (std::int64_t{b} * kv_heads + c) * a.capacity;
      // Each query head's probabilities rounded to fp32, added in fp32 in head order.
      std::vector<float> group_probs(static_cast<std::size_t>(a.capacity), 0.0f);
      for (int h = c * group; h < (c + 1) * group; ++h) {
        const Half* q = a.qkv + std::int64_t{b} * qkv_stride + std::int64_t{h} * a.head_dim;
        Half* out = a.out + std::int64_t{b} * hd + std::int64_t{h} * a.head_dim;
        std::vector<double> p(static_cast<std::size_t>(count));
        for (int j = 0; j < count; ++j) {
          p[j] = double{a.scale} * dot(q, a.k_cache + (cache + j) * a.head_dim, a.head_dim);
        }
        softmax(p, attended_slots(a, b, c, count));
        for (int d = 0; d < a.head_dim; ++d) {
          double acc = 0.0;  // count == 0: stays 0
          for (int j = 0; j < count; ++j) {
            acc += p[j] * half_to_float(a.v_cache[(cache + j) * a.head_dim + d]);
          }
          out[d] = float_to_half(static_cast<float>(acc));
        }
        for (int j = 0; j < count; ++j) group_probs[j] += static_cast<float>(p[j]);
      }
      if (a.probs != nullptr) {
        float* row = a.probs + cache;
        for (int j = 0; j < a.capacity; ++j) row[j] = group_probs[j];
      }
    }
  }
}

}  // namespace offgen::kernels::reference
