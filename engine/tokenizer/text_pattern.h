// The pattern of HF tokenizers' Split pre-tokenizer and Replace normalizer / decoder: a literal
// string or an Oniguruma regex (run on PCRE2 after onig_to_pcre2), and HF's find_matches, which
// cuts a text into the matches and the gaps between them. Immutable after construction, so it may
// be shared between threads.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/pcre2_regex.h"

namespace offgen {

class TextPattern {
 public:
  enum class Kind { literal, regex };

  // Throws offgen::Error naming `what` (the file and component it came from) for a regex that
  // cannot be translated or compiled.
  TextPattern(Kind kind, std::string_view pattern, std::string_view what);

  struct Span {
    std::size_t begin;
    std::size_t end;
    bool is_match;
  };

  // HF's Pattern::find_matches on valid UTF-8 `text`: spans in order that cover it, the matches
  // flagged. Matches are found as Oniguruma's iterator finds them: the next search starts where
  // the last match ended (one character further after an empty match), and an empty match right
  // where the previous match ended is skipped. An empty text gives one empty non-match span.
  void find_matches(std::string_view text, std::vector<Span>& out) const;

  // Every match replaced by `content` (HF's Replace).
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  std::unique_ptr<Pcre2Regex> regex_;
};

}  // namespace offgen
