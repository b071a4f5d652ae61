// HF tokenizers' AddedVocabulary: the added tokens of tokenizer.json ("<|eot_id|>", "<s>", ...)
// are found in the text before the model sees it and map straight to their ids. Tokens with
// normalized = false are matched in the raw text, the others in each normalized stretch between
// those. Matching is leftmost-longest over all tokens, then each match is checked and widened by
// its token's flags: single_word (no word character touches it), lstrip / rstrip (it takes the
// whitespace on its left / right). Special or not makes no difference to encoding (HF's
// encode_special_tokens = false). Immutable once built; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/pcre2_regex.h"

namespace offgen {

struct AddedToken {
  std::string content;
  std::int32_t id = 0;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

class AddedTokenMatcher {
 public:
  // `tokens` are matched by `content` (for normalized tokens: their normalized form).
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  ~AddedTokenMatcher();
  AddedTokenMatcher(const AddedTokenMatcher&) = delete;
  AddedTokenMatcher& operator=(const AddedTokenMatcher&) = delete;

  bool empty() const { return tokens_.empty(); }

  struct Segment {
    std::size_t begin;
    std::size_t end;
    std::int32_t id;  // the added token's id, or -1 for text between tokens
  };
  // HF's find_matches: segments of `text` (valid UTF-8) in order; an empty text is one empty
  // text segment. With lstrip / rstrip a token's segment includes the whitespace it took.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int>> children;  // sorted by byte
    int token = -1;                                       // index in tokens_ ending here
  };
  int child(int node, unsigned char byte) const;
  bool word_character_before(std::string_view text, std::size_t pos) const;
  bool word_character_at(std::string_view text, std::size_t pos) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
  std::array<bool, 256> first_byte_{};
  std::unique_ptr<Pcre2Regex> word_;  // one word character, as Rust's regex crate means \w
};

}  // namespace offgen
