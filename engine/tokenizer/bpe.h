// Byte-pair merging by rank, on token ids: the BPE model of GPT-2 / HF tokenizers (no dropout,
// no unk, no continuing-subword prefix).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace offgen {

class BpeMerges {
 public:
  struct Merge {
    std::uint32_t rank;   // position in merges.txt: lower merges first
    std::int32_t result;  // id of the merged token
  };

  // A pair listed twice keeps its last rank, as both GPT-2's dict() and HF's HashMap do.
  void add(std::int32_t left, std::int32_t right, std::uint32_t rank, std::int32_t result);
  const Merge* find(std::int32_t left, std::int32_t right) const;
  std::size_t size() const { return map_.size(); }

  // Replaces `symbols` (initially one id per byte) by the merged ids: repeatedly merges the
  // adjacent pair of lowest rank, leftmost first, until no adjacent pair has a merge.
  void apply(std::vector<std::int32_t>& symbols) const;

 private:
  static std::uint64_t key(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
           static_cast<std::uint32_t>(right);
  }
  std::unordered_map<std::uint64_t, Merge> map_;
};

}  // namespace offgen
