// The tokenizer a Hugging Face tokenizer.json describes (tokenizer_json.h builds it), run as
// `tokenizers` runs it:
//   encode: added tokens found in the raw text -> each stretch between them normalized ->
//           added tokens with normalized = true found in that -> pre-tokenizer -> BPE per piece;
//   decode: ids -> token strings (an added token's own text; ids with no token skipped) ->
//           the decoder chain -> concatenated.
// No special tokens are added by encode() and none are skipped by decode(); prompt_prefix() /
// prompt_suffix() say what the post-processor's single-sequence template would add.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/decoder.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/pre_tokenizer_chain.h"
#include "engine/tokenizer/token_map.h"
#include "engine/tokenizer/tokenizer_backend.h"

namespace offgen {

struct HfTokenizerParts {
  std::unique_ptr<BpeModel> model;
  // With the ids `tokenizers` gives them; content as written (not normalized).
  std::vector<AddedToken> added_tokens;
  Normalizer normalizer;
  PreTokenizerChain pre_tokenizer;
  Decoder decoder;
  std::vector<std::int32_t> prompt_prefix;
  std::vector<std::int32_t> prompt_suffix;
};

class HfTokenizer final : public TokenizerBackend {
 public:
  explicit HfTokenizer(HfTokenizerParts parts);

  // Invalid UTF-8 (which `tokenizers`, taking a Python str, never sees) is first replaced by
  // U+FFFD as to_valid_utf8() does; the result is then encoded exactly as `tokenizers` would.
  std::vector<std::int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const std::int32_t> ids) const override;
  bool has_id(std::int32_t id) const override;
  std::int32_t vocab_size() const override;
  std::optional<std::int32_t> token_to_id(std::string_view token) const override;
  std::optional<std::vector<std::int32_t>> prompt_prefix() const override { return prefix_; }
  std::optional<std::vector<std::int32_t>> prompt_suffix() const override { return suffix_; }

 private:
  void encode_normalized(std::string_view text, bool at_start,
                         std::vector<std::int32_t>& ids) const;

  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<AddedTokenMatcher> raw_tokens_;         // normalized = false
  std::unique_ptr<AddedTokenMatcher> normalized_tokens_;  // normalized = true, content normalized
  TokenMap added_ids_;                                    // content -> id
  std::unordered_map<std::int32_t, std::string> added_text_;  // id -> what decode() passes on
  Normalizer normalizer_;
  PreTokenizerChain pre_tokenizer_;
  Decoder decoder_;
  std::vector<std::int32_t> prefix_;
  std::vector<std::int32_t> suffix_;
  std::int32_t vocab_size_ = 0;
};

}  // namespace offgen
