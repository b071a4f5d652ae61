// The BPE model of HF tokenizers as tokenizer.json configures it: a piece is split into its
// characters, each looked up in the vocabulary (byte_fallback: a character without a token
// becomes its UTF-8 bytes' <0xNN> tokens; otherwise unk_token, runs of unknowns fused into one
// with fuse_unk; with neither, dropped), then merged by rank (BpeMerges). ignore_merges: a piece
// that is itself a token is that one token. Thread-safe; results are memoized per piece.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/bpe.h"
#include "engine/tokenizer/piece_cache.h"
#include "engine/tokenizer/token_map.h"

namespace offgen {

struct BpeOptions {
  std::optional<std::int32_t> unk_id;  // the id of unk_token, when there is one
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeModel {
 public:
  // `merges` hold ids of `vocab`. The vocabulary's ids must be unique.
  BpeModel(TokenMap vocab, BpeMerges merges, BpeOptions options);
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  // Appends the ids of `piece` (valid UTF-8, non-empty) to `ids`.
  void tokenize(std::string_view piece, std::vector<std::int32_t>& ids) const;

  const TokenMap& vocab() const { return vocab_; }
  // The token of `id`, or nullptr where the vocabulary has none.
  const std::string* token(std::int32_t id) const;

 private:
  void split_characters(std::string_view piece, std::vector<std::int32_t>& symbols) const;

  TokenMap vocab_;
  std::vector<const std::string*> id_token_;  // indexed by id; null for holes
  BpeMerges merges_;
  BpeOptions options_;
  // Ids of single characters below U+0800 (-1: not a token): the byte-level alphabet and most
  // scripts' letters skip the hash lookup.
  std::vector<std::int32_t> small_char_ids_;
  std::array<std::int32_t, 256> byte_fallback_ids_{};  // <0xNN> tokens; -1 where missing
  mutable PieceCache cache_;
};

}  // namespace offgen
