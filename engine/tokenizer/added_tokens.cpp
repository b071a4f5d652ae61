// See added_tokens.h. The leftmost-longest search walks a byte trie from each position (a table
// of first bytes skips the positions where no token can start); HF uses an Aho-Corasick automaton
// with the same match semantics. The flag checks are HF's find_matches line for line: a match a
// flag rejects is skipped, and the search goes on after it rather than inside it.
#include "engine/tokenizer/added_tokens.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "engine/tokenizer/unicode_classes.h"
#include "engine/tokenizer/utf8.h"

namespace offgen {

namespace {

// Rust's regex crate \w: Alphabetic, Mark, Decimal_Number, Connector_Punctuation, Join_Control.
constexpr std::string_view kWordCharacter = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])";

// Start of the character that ends at `pos` (pos > 0) in valid UTF-8.
std::size_t previous_character(std::string_view text, std::size_t pos) {
  do {
    --pos;
  } while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80);
  return pos;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens)
    : tokens_(std::move(tokens)), trie_(1) {
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& content = tokens_[i].content;
    if (content.empty()) continue;
    first_byte_[static_cast<unsigned char>(content[0])] = true;
    int node = 0;
    for (const char c : content) {
      const auto byte = static_cast<unsigned char>(c);
      int next = child(node, byte);
      if (next < 0) {
        next = static_cast<int>(trie_.size());
        auto& children = trie_[static_cast<std::size_t>(node)].children;
        children.insert(std::lower_bound(children.begin(), children.end(),
                                         std::pair<unsigned char, int>{byte, -1}),
                        {byte, next});
        trie_.emplace_back();
      }
      node = next;
    }
    trie_[static_cast<std::size_t>(node)].token = static_cast<int>(i);
  }
  if (std::any_of(tokens_.begin(), tokens_.end(),
                  [](const AddedToken& t) { return t.single_word; })) {
    word_ = std::make_unique<Pcre2Regex>(kWordCharacter, PCRE2_UTF | PCRE2_UCP, false,
                                         "tokenizer: the word-character class of single_word");
  }
}

AddedTokenMatcher::~AddedTokenMatcher() = default;

int AddedTokenMatcher::child(int node, unsigned char byte) const {
  const auto& children = trie_[static_cast<std::size_t>(node)].children;
  const auto it =
      std::lower_bound(children.begin(), children.end(), std::pair<unsigned char, int>{byte, -1});
  return it != children.end() && it->first == byte ? it->second : -1;
}

bool AddedTokenMatcher::word_character_at(std::string_view text, std::size_t pos) const {
  const std::size_t length = utf8::decode_step(text, pos).length;
  Pcre2Regex::Matcher matcher(*word_);
  const auto match = matcher.find(text.substr(pos, length), 0);
  return match.has_value();
}

bool AddedTokenMatcher::word_character_before(std::string_view text, std::size_t pos) const {
  return word_character_at(text, previous_character(text, pos));
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  out.clear();
  if (text.empty() || tokens_.empty()) {
    out.push_back({0, text.size(), -1});
    return;
  }
  std::size_t start_offset = 0;  // end of the last accepted token
  std::size_t pos = 0;           // where the search for the next match starts
  while (pos < text.size()) {
    // Leftmost-longest: the first position where any token matches, its longest token there.
    int found = -1;
    std::size_t match_start = pos;
    std::size_t match_end = pos;
    for (; match_start < text.size() && found < 0; ++match_start) {
      if (!first_byte_[static_cast<unsigned char>(text[match_start])]) continue;
      int node = 0;
      for (std::size_t i = match_start; i < text.size(); ++i) {
        node = child(node, static_cast<unsigned char>(text[i]));
        if (node < 0) break;
        if (trie_[static_cast<std::size_t>(node)].token >= 0) {
          found = trie_[static_cast<std::size_t>(node)].token;
          match_end = i + 1;
        }
      }
      if (found >= 0) break;
    }
    if (found < 0) break;
    pos = match_end;
    const AddedToken& token = tokens_[static_cast<std::size_t>(found)];
    std::size_t start = match_start;
    std::size_t stop = match_end;
    if (token.single_word) {
      const bool start_space = start == 0 || !word_character_before(text, start);
      const bool stop_space = stop == text.size() || !word_character_at(text, stop);
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) {
      std::size_t new_start = start;
      while (new_start > 0) {
        const std::size_t prev = previous_character(text, new_start);
        std::size_t at = prev;
        if (!unicode_classes::is_white_space(utf8::next_code_point(text, at))) break;
        new_start = prev;
      }
      // The previous token may already have taken those spaces.
      start = std::max(new_start, start_offset);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        std::size_t at = stop;
        if (!unicode_classes::is_white_space(utf8::next_code_point(text, at))) break;
        stop = at;
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, token.id});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace offgen
