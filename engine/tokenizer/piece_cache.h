// Memo of piece -> ids for the tokenizer. Natural text repeats its words, so most pieces skip BPE;
// sharded mutexes keep concurrent encode() calls from queueing on one lock.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace offgen {

class PieceCache {
 public:
  // Pieces longer than this are not cached (HF's limit too): long pieces rarely repeat.
  static constexpr std::size_t kMaxPieceBytes = 256;

  // Appends the cached ids of `piece` to `out` and returns true, or returns false on a miss.
  bool lookup(std::string_view piece, std::vector<std::int32_t>& out) const;
  void insert(std::string_view piece, std::span<const std::int32_t> ids);

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const {
      return std::hash<std::string_view>{}(text);
    }
  };
  // A shard that fills up is emptied rather than evicted entry by entry: memory stays bounded
  // (about kShards * kShardEntries pieces) and a changing workload refills it with what it uses.
  static constexpr std::size_t kShards = 16;
  static constexpr std::size_t kShardEntries = 4096;
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, std::vector<std::int32_t>, Hash, std::equal_to<>> map;
  };
  Shard& shard(std::string_view piece) const { return shards_[Hash{}(piece) % kShards]; }
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace offgen
