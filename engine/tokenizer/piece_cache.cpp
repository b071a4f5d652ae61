// See piece_cache.h. The lock is held only for the hash lookup and the copy of a few ids.
#include "engine/tokenizer/piece_cache.h"

namespace offgen {

bool PieceCache::lookup(std::string_view piece, std::vector<std::int32_t>& out) const {
  Shard& s = shard(piece);
  const std::lock_guard<std::mutex> lock(s.mutex);
  const auto it = s.map.find(piece);
  if (it == s.map.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void PieceCache::insert(std::string_view piece, std::span<const std::int32_t> ids) {
  if (piece.size() > kMaxPieceBytes) return;
  Shard& s = shard(piece);
  const std::lock_guard<std::mutex> lock(s.mutex);
  if (s.map.size() >= kShardEntries) s.map.clear();
  s.map.try_emplace(std::string(piece), ids.begin(), ids.end());
}

}  // namespace offgen
