// The normalizers of HF tokenizers that the LLaMA family's tokenizer.json files use: Prepend,
// Replace, NFC (and NFD, which comes with the same tables), Lowercase and Strip, in sequence. A
// Sequence of sequences is the same as one flat sequence, so the steps are kept flat. Immutable
// once built; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/tokenizer/text_pattern.h"

namespace offgen {

class Normalizer {
 public:
  struct Prepend {
    std::string text;  // put before a non-empty input
  };
  struct Replace {
    std::shared_ptr<const TextPattern> pattern;
    std::string content;
  };
  struct Nfc {};
  struct Nfd {};
  struct Lowercase {};
  // Removes White_Space characters (Rust's char::is_whitespace) from either end.
  struct Strip {
    bool left;
    bool right;
  };
  using Step = std::variant<Prepend, Replace, Nfc, Nfd, Lowercase, Strip>;

  Normalizer() = default;
  explicit Normalizer(std::vector<Step> steps) : steps_(std::move(steps)) {}

  bool empty() const { return steps_.empty(); }
  // `text` must be valid UTF-8; so is the result.
  std::string normalize(std::string_view text) const;

 private:
  std::vector<Step> steps_;
};

}  // namespace offgen
