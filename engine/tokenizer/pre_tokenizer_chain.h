// The pre-tokenizers of HF tokenizers that the LLaMA family's tokenizer.json files use: Split,
// ByteLevel and Metaspace, applied in sequence (a Sequence of sequences is one flat sequence).
// Digits, Punctuation, Whitespace and WhitespaceSplit are Splits on a character class or
// tokenizers' own regex (tokenizer_json.cpp builds them so).
// Each step splits every piece the previous step left, as HF's PreTokenizedString does; empty
// pieces are dropped. Immutable once built; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/text_pattern.h"

namespace offgen {

// How a Split keeps the matches of its pattern (HF's SplitDelimiterBehavior).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// Metaspace's prepend_scheme: when the replacement is put before a piece.
enum class PrependScheme { always, first, never };

struct PreTokenPiece {
  std::string text;
  // Whether the piece starts where the input text started (HF: offsets_original().0 == 0), which
  // is where Metaspace's prepend_scheme "first" prepends.
  bool at_start;
};

class PreTokenizerChain {
 public:
  struct Split {
    std::shared_ptr<const TextPattern> pattern;
    SplitBehavior behavior;
    bool invert;
  };
  struct ByteLevel {
    bool add_prefix_space;
    // Split with the GPT-2 regex first (HF's use_regex); shared, it is read-only.
    std::shared_ptr<const Pretokenizer> gpt2;  // null: use_regex = false
  };
  struct Metaspace {
    std::string replacement;  // one character
    PrependScheme prepend_scheme;
    bool split;
  };
  using Step = std::variant<Split, ByteLevel, Metaspace>;

  PreTokenizerChain() = default;
  explicit PreTokenizerChain(std::vector<Step> steps) : steps_(std::move(steps)) {}

  // Replaces `pieces` by the pieces of `text` (valid UTF-8). After a ByteLevel step the pieces
  // are written in GPT-2's byte-level characters, as the BPE vocabulary is.
  void split(std::string_view text, bool at_start, std::vector<PreTokenPiece>& pieces) const;

 private:
  std::vector<Step> steps_;
};

}  // namespace offgen
