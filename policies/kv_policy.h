// KV eviction policies (design section 5): each (layer, sequence, head) keeps at most C cached
// tokens. A policy is told C and what the attention computed and answers which tokens to keep
// after the prefill and which slot to free when a decode step has filled the cache to C + 1.
//
// These are the semantics' single source of truth, on the host: the KV cache of a device either
// calls them or runs a kernel that the policy tests compare against them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace offgen {

// full .. pyramidkv evict; quest keeps every token and selects the pages each step attends to.
enum class PolicyKind { full, local, h2o, streaming, tova, snapkv, pyramidkv, quest };

std::string_view policy_name(PolicyKind kind);
// Every policy's name, in PolicyKind order: what --policy accepts.
std::vector<std::string> policy_names();
// "full", "local", "h2o", "streaming", "tova", "snapkv", "pyramidkv", "quest"; throws offgen::Error
// naming the choices otherwise.
PolicyKind parse_policy(std::string_view text);

struct PolicyOptions {
  PolicyKind kind = PolicyKind::full;
  double recent_fraction = 0.5;  // h2o: R = max(1, round(C * recent_fraction))
  int sinks = 4;                 // streaming: S attention-sink tokens kept from the start
  int observation_window = 32;   // snapkv, pyramidkv: w, the last prompt queries that score it
  int pool_kernel = 5;           // snapkv, pyramidkv: odd width k of the pooling of those scores
  int pyramid_beta = 20;         // pyramidkv: the top layer keeps (C - w) / beta prefix tokens
  int page_size = 16;            // quest: P, slots per page of the cache
  // quest: the first layers attend every token (Quest leaves its first two dense: their attention
  // is not sparse enough to choose from).
  int dense_layers = 2;
  // quest: C, the tokens a decode step attends per (sequence, kv head) — the sequence's
  // --kv-budget resolved for its length (sequence_policy in kv_budget.h fills it in); the policy's
  // budget() is then the whole sequence, which its cache keeps.
  int attended_tokens = 0;
};

// Whose scores rank a head's tokens: its own (h2o, snapkv), or the mean over the heads of its
// layer (tova), so that every head of a layer keeps the same tokens.
enum class HeadScores { per_head, layer_mean };
// What a decode step does to a cached token's score: adds the step's probability (h2o: the score
// is the attention accumulated so far) or replaces it (tova: only the current query counts).
enum class DecodeScores { accumulate, replace };

class KvPolicy {
 public:
  virtual ~KvPolicy() = default;
  PolicyKind kind() const { return kind_; }
  // C: tokens kept per (layer, sequence, head); the cache has C + 1 slots.
  int budget() const { return budget_; }
  // Whether the policy reads attention probabilities (column sums at prefill, the row at decode).
  // Policies that do not (full, local, streaming) cost the attention kernels nothing.
  virtual bool needs_attention_scores() const = 0;

  // After a prefill of `prompt_len` real tokens (positions 0 .. prompt_len-1): the positions to
  // keep, ascending, at most C. `scores[i]` is token i's summed attention probability over the
  // prompt's last prefill_score_queries() queries (all of them for 0), averaged over the heads of
  // the layer for HeadScores::layer_mean (empty unless needs_attention_scores()).
  virtual std::vector<int> keep_after_prefill(int prompt_len,
                                              std::span<const float> scores) const = 0;

  // A decode step filled the cache to C + 1 tokens. `positions[s]` / `scores[s]` describe slot s
  // (scores already include this step's row, as decode_scores() says, averaged over the layer's
  // heads for HeadScores::layer_mean). Returns the slot to free. Ties: the older token.
  virtual int victim(std::span<const std::int32_t> positions,
                     std::span<const float> scores) const = 0;

  // Attention-score policies: the R most recent tokens, never evicted (h2o's window, snapkv's
  // observation window); 0 otherwise (tova protects none).
  virtual int recent_window() const { return 0; }
  // How many of the prompt's last queries the prefill scores sum over; 0 = all of them.
  virtual int prefill_score_queries() const { return 0; }
  // The width of the average pooling keep_after_prefill applies to the scores of the tokens
  // outside the recent window before it ranks them (1 = none).
  virtual int pool_kernel() const { return 1; }
  virtual HeadScores head_scores() const { return HeadScores::per_head; }
  // Selection policies (quest; kernels/page_selection_args.h): the cache, cut into pages of
  // page_size() slots, keeps every token (budget() is the whole sequence) and each decode step
  // attends to pages_per_step() of them (>= 2). 0 and 0 for every policy that attends to every
  // token it keeps.
  virtual int page_size() const { return 0; }
  virtual int pages_per_step() const { return 0; }
  // The first layers, which attend every token even so.
  virtual int dense_layers() const { return 0; }
  virtual DecodeScores decode_scores() const { return DecodeScores::accumulate; }

  // The policy layer `layer` of a `layers`-layer model runs where the budget differs by layer
  // (pyramidkv: snapkv at that layer's budget); null where every layer runs this policy.
  virtual std::unique_ptr<KvPolicy> layer_policy(int layer, int layers) const;
  // Slots per cache in a `layers`-layer model: the largest layer budget + 1 (every layer's caches
  // have as many; C + 1 but for pyramidkv).
  int cache_slots(int layers) const;

 protected:
  KvPolicy(PolicyKind kind, int budget) : kind_(kind), budget_(budget) {}

 private:
  PolicyKind kind_;
  int budget_;
};

// Throws offgen::Error when the budget cannot hold what the policy always keeps (streaming: more
// than its sinks; any policy: at least one token) or an option is out of range.
std::unique_ptr<KvPolicy> make_policy(const PolicyOptions& options, int budget);

// snapkv's and pyramidkv's options: observation_window >= 1, pool_kernel odd and >= 1,
// pyramid_beta >= 1. Throws ParameterError naming them.
void validate_snapkv_options(const PolicyOptions& options);
// quest's: page_size >= 1, dense_layers >= 0. Throws ParameterError naming them.
void validate_quest_options(const PolicyOptions& options);

}  // namespace offgen
