// The decoders of HF tokenizers that the LLaMA family's tokenizer.json files use: ByteLevel,
// Replace, ByteFallback, Fuse, Strip and Metaspace, applied in sequence to the list of token
// strings (HF's decode_chain), whose concatenation is the text. Immutable once built; thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "engine/tokenizer/text_pattern.h"

namespace offgen {

class Decoder {
 public:
  struct ByteLevel {};  // GPT-2's byte-level characters back to bytes; invalid UTF-8 -> U+FFFD
  struct Replace {
    std::shared_ptr<const TextPattern> pattern;
    std::string content;
  };
  struct ByteFallback {};  // runs of <0xNN> tokens -> their bytes (U+FFFD per byte if invalid)
  struct Fuse {};          // all tokens -> one
  struct Strip {
    std::string content;  // one character
    std::size_t start;    // at most this many leading `content` characters go, from each token
    std::size_t stop;     // ... and trailing ones
  };
  struct Metaspace {
    std::string replacement;  // one character: back to a space, dropped in the first token
    bool drop_in_first;       // prepend_scheme is not "never"
  };
  using Step = std::variant<ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace>;

  // No steps: HF's decode without a decoder, which joins the tokens with spaces.
  Decoder() = default;
  explicit Decoder(std::vector<Step> steps) : steps_(std::move(steps)), present_(true) {}

  // The text of `tokens` (HF's Decoder::decode). Always valid UTF-8 when the tokens are.
  std::string decode(std::vector<std::string> tokens) const;

 private:
  std::vector<Step> steps_;
  bool present_ = false;
};

}  // namespace offgen
