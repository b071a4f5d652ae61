// See bpe_model.h. The character loop is HF's BPE::merge_word, quirks included: a character that
// falls back to bytes does not end a pending run of unknowns, so with both byte_fallback and
// unk_token the unk comes after the byte tokens (only a vocabulary that lacks some <0xNN> tokens
// can tell).
#include "engine/tokenizer/bpe_model.h"

#include <algorithm>
#include <utility>

#include "engine/tokenizer/utf8.h"

namespace offgen {

namespace {

constexpr std::uint32_t kSmallCharLimit = 0x800;

}  // namespace

BpeModel::BpeModel(TokenMap vocab, BpeMerges merges, BpeOptions options)
    : vocab_(std::move(vocab)), merges_(std::move(merges)), options_(options) {
  std::int32_t max_id = -1;
  for (const auto& [token, id] : vocab_) max_id = std::max(max_id, id);
  id_token_.assign(static_cast<std::size_t>(max_id + 1), nullptr);
  for (const auto& [token, id] : vocab_) id_token_[static_cast<std::size_t>(id)] = &token;

  small_char_ids_.assign(kSmallCharLimit, -1);
  std::string c;
  for (std::uint32_t cp = 0; cp < kSmallCharLimit; ++cp) {
    c.clear();
    utf8::append_code_point(c, cp);
    if (const auto it = vocab_.find(c); it != vocab_.end()) small_char_ids_[cp] = it->second;
  }
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned byte = 0; byte < 256; ++byte) {
    const std::string name = std::string("<0x") + kHex[byte >> 4] + kHex[byte & 15] + ">";
    const auto it = vocab_.find(name);
    byte_fallback_ids_[byte] = it == vocab_.end() ? -1 : it->second;
  }
}

const std::string* BpeModel::token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_token_.size()) return nullptr;
  return id_token_[static_cast<std::size_t>(id)];
}

void BpeModel::split_characters(std::string_view piece, std::vector<std::int32_t>& symbols) const {
  symbols.clear();
  std::optional<std::int32_t> pending_unk;
  std::size_t pos = 0;
  while (pos < piece.size()) {
    const std::size_t start = pos;
    const std::uint32_t cp = utf8::next_code_point(piece, pos);
    const std::string_view character = piece.substr(start, pos - start);
    std::int32_t id = -1;
    if (cp < kSmallCharLimit) {
      id = small_char_ids_[cp];
    } else if (const auto it = vocab_.find(character); it != vocab_.end()) {
      id = it->second;
    }
    if (id >= 0) {
      if (pending_unk) symbols.push_back(*std::exchange(pending_unk, std::nullopt));
      symbols.push_back(id);
      continue;
    }
    if (options_.byte_fallback && std::all_of(character.begin(), character.end(), [&](char byte) {
          return byte_fallback_ids_[static_cast<unsigned char>(byte)] >= 0;
        })) {
      for (const char byte : character) {
        symbols.push_back(byte_fallback_ids_[static_cast<unsigned char>(byte)]);
      }
      continue;
    }
    if (options_.unk_id) {
      if (pending_unk && !options_.fuse_unk) symbols.push_back(*pending_unk);
      pending_unk = options_.unk_id;
    }
  }
  if (pending_unk) symbols.push_back(*pending_unk);
}

void BpeModel::tokenize(std::string_view piece, std::vector<std::int32_t>& ids) const {
  if (piece.empty()) return;
  if (options_.ignore_merges) {
    if (const auto it = vocab_.find(piece); it != vocab_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  if (cache_.lookup(piece, ids)) return;
  std::vector<std::int32_t> symbols;
  split_characters(piece, symbols);
  merges_.apply(symbols);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  cache_.insert(piece, symbols);
}

}  // namespace offgen
