// The merge loop follows HF tokenizers' Word::merge_all: a priority queue of candidate pairs
// ordered by (rank, position) over a linked list of symbols, so a piece of n bytes costs
// O(n log n) rather than GPT-2's O(n^2) rescans, which matters for long runs (digits, spaces,
// minified code) that have no split points. Stale queue entries are skipped by checking that the
// pair at that position still merges into the same token, exactly HF's test, so ties and odd
// merge files resolve as HF resolves them.
#include "engine/tokenizer/bpe.h"

#include <queue>

namespace offgen {

void BpeMerges::add(std::int32_t left, std::int32_t right, std::uint32_t rank,
                    std::int32_t result) {
  map_.insert_or_assign(key(left, right), Merge{rank, result});
}

const BpeMerges::Merge* BpeMerges::find(std::int32_t left, std::int32_t right) const {
  const auto it = map_.find(key(left, right));
  return it == map_.end() ? nullptr : &it->second;
}

namespace {

struct Symbol {
  std::int32_t id;
  int prev;  // index of the previous live symbol, -1 at the start
  int next;  // index of the next live symbol, -1 at the end
  bool live;
};

struct Candidate {
  std::uint32_t rank;
  int pos;  // index of the left symbol
  std::int32_t result;
  // std::priority_queue pops the greatest; invert so the lowest rank, then leftmost, comes first.
  bool operator<(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : pos > other.pos;
  }
};

}  // namespace

void BpeMerges::apply(std::vector<std::int32_t>& symbols) const {
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return;
  std::vector<Symbol> list(static_cast<std::size_t>(n));
  std::vector<Candidate> storage;
  storage.reserve(static_cast<std::size_t>(n));
  std::priority_queue<Candidate> queue(std::less<Candidate>(), std::move(storage));
  for (int i = 0; i < n; ++i) {
    list[i] = Symbol{symbols[i], i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  for (int i = 0; i + 1 < n; ++i) {
    if (const Merge* merge = find(symbols[i], symbols[i + 1])) {
      queue.push(Candidate{merge->rank, i, merge->result});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = list[top.pos];
    if (!left.live || left.next < 0) continue;
    Symbol& right = list[left.next];
    const Merge* current = find(left.id, right.id);
    if (current == nullptr || current->result != top.result) continue;  // stale entry
    left.id = top.result;
    right.live = false;
    left.next = right.next;
    if (left.next >= 0) list[left.next].prev = top.pos;
    if (left.prev >= 0) {
      if (const Merge* merge = find(list[left.prev].id, left.id)) {
        queue.push(Candidate{merge->rank, left.prev, merge->result});
      }
    }
    if (left.next >= 0) {
      if (const Merge* merge = find(left.id, list[left.next].id)) {
        queue.push(Candidate{merge->rank, top.pos, merge->result});
      }
    }
  }
  symbols.clear();
  for (int i = 0; i >= 0; i = list[i].next) symbols.push_back(list[i].id);
}

}  // namespace offgen
