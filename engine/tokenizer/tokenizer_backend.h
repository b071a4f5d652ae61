// What a Tokenizer runs: one implementation per file format (vocab_merges.h: GPT-2 / OPT's
// vocab.json + merges.txt; hf_tokenizer.h: Hugging Face tokenizer.json). Tokenizer forwards each
// call; the contracts are those of tokenizer.h. Implementations are immutable after loading and
// thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace offgen {

class TokenizerBackend {
 public:
  virtual ~TokenizerBackend() = default;
  virtual std::vector<std::int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(std::span<const std::int32_t> ids) const = 0;
  virtual bool has_id(std::int32_t id) const = 0;
  virtual std::int32_t vocab_size() const = 0;
  virtual std::optional<std::int32_t> token_to_id(std::string_view token) const = 0;
  virtual std::optional<std::vector<std::int32_t>> prompt_prefix() const = 0;
  virtual std::optional<std::vector<std::int32_t>> prompt_suffix() const = 0;
};

}  // namespace offgen
