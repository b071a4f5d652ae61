// Loading vocab.json + merges.txt and their encode / decode paths. The pieces live in their own
// files: utf8 (validation), byte_level (GPT-2's byte map), pretokenizer (PCRE2 regex), bpe (merge
// loop), piece_cache (memo).
#include "engine/tokenizer/vocab_merges.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/tokenizer/bpe.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/piece_cache.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/text_file.h"
#include "engine/tokenizer/token_map.h"
#include "engine/tokenizer/tokenizer_backend.h"
#include "engine/tokenizer/utf8.h"

namespace offgen {

namespace {

// A token's bytes: its characters mapped back through the byte map. HF's ByteLevel decoder keeps
// a token that has any character outside the map (an added token spelled in plain Unicode, with a
// real space or a letter past U+00FF) as its UTF-8 text, whole; so do we. ASCII special tokens
// such as "</s>" are inside the map and come out as themselves either way.
std::string token_bytes(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  std::size_t pos = 0;
  while (pos < token.size()) {
    const auto byte = byte_level::code_point_to_byte(utf8::next_code_point(token, pos));
    if (!byte) return std::string(token);
    bytes.push_back(static_cast<char>(*byte));
  }
  return bytes;
}

class VocabMergesTokenizer final : public TokenizerBackend {
 public:
  std::vector<std::int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const std::int32_t> ids) const override;
  bool has_id(std::int32_t id) const override;
  std::int32_t vocab_size() const override;
  std::optional<std::int32_t> token_to_id(std::string_view token) const override;
  // The engine prepends the model config's bos_token_id, as for OPT.
  std::optional<std::vector<std::int32_t>> prompt_prefix() const override { return std::nullopt; }
  std::optional<std::vector<std::int32_t>> prompt_suffix() const override { return std::nullopt; }

  Pretokenizer pretokenizer;
  TokenMap vocab;
  std::vector<std::string> id_bytes;  // indexed by id: what decode() emits
  std::vector<bool> id_known;         // false for ids vocab.json skips
  std::array<std::int32_t, 256> byte_ids{};
  BpeMerges merges;
  mutable PieceCache cache;  // a memo: filling it does not change what encode() returns

  void load_vocab(const std::filesystem::path& path);
  void load_merges(const std::filesystem::path& path);
  void append_piece(std::string_view piece, std::vector<std::int32_t>& ids,
                    std::vector<std::int32_t>& scratch) const;
};

}  // namespace

void VocabMergesTokenizer::load_vocab(const std::filesystem::path& path) {
  const std::string name = path.string();
  const std::string text = read_text_file(path, "vocab file");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: invalid JSON: {}", name, e.what());
  }
  OFFGEN_CHECK(json.is_object(), "{}: expected a JSON object {{token: id}}, got {}", name,
               json.type_name());
  OFFGEN_CHECK(!json.empty(), "{}: the vocabulary is empty", name);
  vocab.reserve(json.size());
  std::int64_t max_id = -1;
  for (const auto& [token, value] : json.items()) {
    OFFGEN_CHECK(value.is_number_integer(), "{}: token {:?} has a non-integer id {}", name, token,
                 value.dump());
    const auto id = value.get<std::int64_t>();
    OFFGEN_CHECK(id >= 0 && id < kMaxTokenId, "{}: token {:?} has id {} outside [0, {})", name,
                 token, id, kMaxTokenId);
    vocab.emplace(token, static_cast<std::int32_t>(id));
    max_id = std::max(max_id, id);
  }
  id_bytes.assign(static_cast<std::size_t>(max_id + 1), {});
  id_known.assign(static_cast<std::size_t>(max_id + 1), false);
  std::vector<const std::string*> id_token(id_bytes.size(), nullptr);
  for (const auto& [token, id] : vocab) {
    const std::string*& seen = id_token[static_cast<std::size_t>(id)];
    OFFGEN_CHECK(seen == nullptr, "{}: tokens {:?} and {:?} share id {}", name, *seen, token, id);
    seen = &token;
    id_bytes[static_cast<std::size_t>(id)] = token_bytes(token);
    id_known[static_cast<std::size_t>(id)] = true;
  }
  // Byte-level BPE starts every piece from single-byte tokens; without all 256 some input could
  // not be encoded at all.
  for (unsigned byte = 0; byte < 256; ++byte) {
    const std::string& symbol = byte_level::byte_to_utf8()[byte];
    const auto it = vocab.find(symbol);
    OFFGEN_CHECK(it != vocab.end(),
                 "{}: no token for byte 0x{:02X} (written {:?}); a byte-level BPE vocabulary "
                 "needs all 256 byte tokens",
                 name, byte, symbol);
    byte_ids[byte] = it->second;
  }
}

void VocabMergesTokenizer::load_merges(const std::filesystem::path& path) {
  const std::string name = path.string();
  const std::string text = read_text_file(path, "merges file");
  std::uint32_t rank = 0;
  std::size_t line_number = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // HF skips "#version" lines wherever they are; blank lines (a trailing newline) carry nothing.
    if (line.empty() || line.starts_with("#version")) continue;
    const std::size_t space = line.find(' ');
    OFFGEN_CHECK(space != std::string_view::npos && space > 0 && space + 1 < line.size() &&
                     line.find(' ', space + 1) == std::string_view::npos,
                 "{}:{}: expected two tokens separated by one space, got {:?}", name, line_number,
                 line);
    const std::string_view left = line.substr(0, space);
    const std::string_view right = line.substr(space + 1);
    const std::string merged = std::string(left) + std::string(right);
    const auto left_it = vocab.find(left);
    const auto right_it = vocab.find(right);
    const auto merged_it = vocab.find(merged);
    OFFGEN_CHECK(left_it != vocab.end(), "{}:{}: merge {:?}: {:?} is not in the vocabulary", name,
                 line_number, line, left);
    OFFGEN_CHECK(right_it != vocab.end(), "{}:{}: merge {:?}: {:?} is not in the vocabulary", name,
                 line_number, line, right);
    OFFGEN_CHECK(merged_it != vocab.end(),
                 "{}:{}: merge {:?}: the result {:?} is not in the vocabulary", name, line_number,
                 line, merged);
    merges.add(left_it->second, right_it->second, rank++, merged_it->second);
  }
}

void VocabMergesTokenizer::append_piece(std::string_view piece, std::vector<std::int32_t>& ids,
                                        std::vector<std::int32_t>& scratch) const {
  if (piece.size() == 1) {  // punctuation, single spaces: no merge applies, no cache needed
    ids.push_back(byte_ids[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (cache.lookup(piece, ids)) return;
  scratch.clear();
  for (const char c : piece) scratch.push_back(byte_ids[static_cast<unsigned char>(c)]);
  merges.apply(scratch);
  ids.insert(ids.end(), scratch.begin(), scratch.end());
  cache.insert(piece, scratch);
}

std::unique_ptr<TokenizerBackend> load_vocab_merges(const std::filesystem::path& vocab_json,
                                                    const std::filesystem::path& merges_txt) {
  auto backend = std::make_unique<VocabMergesTokenizer>();
  backend->load_vocab(vocab_json);
  backend->load_merges(merges_txt);
  return backend;
}

std::vector<std::int32_t> VocabMergesTokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<std::int32_t> scratch;
  pretokenizer.split(text, [&](std::string_view piece) { append_piece(piece, ids, scratch); });
  return ids;
}

std::string VocabMergesTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (const std::int32_t id : ids) {
    if (has_id(id)) out.append(id_bytes[static_cast<std::size_t>(id)]);
  }
  return out;
}

bool VocabMergesTokenizer::has_id(std::int32_t id) const {
  return id >= 0 && static_cast<std::size_t>(id) < id_known.size() &&
         id_known[static_cast<std::size_t>(id)];
}

// One past the largest id, so every id below it indexes the embedding table (equal to the number
// of entries for OPT's and GPT-2's files, whose ids have no holes).
std::int32_t VocabMergesTokenizer::vocab_size() const {
  return static_cast<std::int32_t>(id_bytes.size());
}

std::optional<std::int32_t> VocabMergesTokenizer::token_to_id(std::string_view token) const {
  const auto it = vocab.find(token);
  if (it == vocab.end()) return std::nullopt;
  return it->second;
}

}  // namespace offgen
