// Loading vocab.json + merges.txt and the encode / decode paths of Tokenizer. The pieces live in
// their own files: utf8 (validation), byte_level (GPT-2's byte map), pretokenizer (PCRE2 regex),
// bpe (merge loop), piece_cache (memo).
#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/error.h"
#include "engine/tokenizer/bpe.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/piece_cache.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace offgen {

namespace {

// Ids index a dense table; a vocab.json with ids past this is corrupt rather than big (OPT and
// GPT-2 have ~50k tokens).
constexpr std::int64_t kMaxTokenId = std::int64_t{1} << 24;

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const {
    return std::hash<std::string_view>{}(text);
  }
};
using TokenMap = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

std::string read_file(const std::filesystem::path& path, std::string_view what) {
  const std::string name = path.string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("{}: {} not found", name, what);
  if (!std::filesystem::is_regular_file(path, ec)) fail("{}: {} is not a regular file", name, what);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open {}: {}", name, what, std::strerror(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) fail("{}: error reading {}", name, what);
  return std::move(contents).str();
}

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

}  // namespace

struct Tokenizer::Impl {
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

void Tokenizer::Impl::load_vocab(const std::filesystem::path& path) {
  const std::string name = path.string();
  const std::string text = read_file(path, "vocab file");
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

void Tokenizer::Impl::load_merges(const std::filesystem::path& path) {
  const std::string name = path.string();
  const std::string text = read_file(path, "merges file");
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

void Tokenizer::Impl::append_piece(std::string_view piece, std::vector<std::int32_t>& ids,
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

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& dir) {
  return load(dir / "vocab.json", dir / "merges.txt");
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& vocab_json,
                                           const std::filesystem::path& merges_txt) {
  auto impl = std::make_unique<Impl>();
  impl->load_vocab(vocab_json);
  impl->load_merges(merges_txt);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<std::int32_t> scratch;
  impl_->pretokenizer.split(
      text, [&](std::string_view piece) { impl_->append_piece(piece, ids, scratch); });
  return ids;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (const std::int32_t id : ids) {
    if (has_id(id)) out.append(impl_->id_bytes[static_cast<std::size_t>(id)]);
  }
  return out;
}

bool Tokenizer::has_id(std::int32_t id) const {
  return id >= 0 && static_cast<std::size_t>(id) < impl_->id_known.size() &&
         impl_->id_known[static_cast<std::size_t>(id)];
}

// One past the largest id, so every id below it indexes the embedding table (equal to the number
// of entries for OPT's and GPT-2's files, whose ids have no holes).
std::int32_t Tokenizer::vocab_size() const {
  return static_cast<std::int32_t>(impl_->id_bytes.size());
}

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const {
  const auto it = impl_->vocab.find(token);
  if (it == impl_->vocab.end()) return std::nullopt;
  return it->second;
}

}  // namespace offgen
