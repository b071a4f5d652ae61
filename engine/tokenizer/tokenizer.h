// Byte-level BPE tokenizer (GPT-2 / OPT format: vocab.json + merges.txt), identical in its ids to
// Hugging Face `tokenizers`' ByteLevel BPE with add_prefix_space = false. encode() adds no BOS: the
// engine prepends the model's bos_token_id as OPT does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace offgen {

class Tokenizer {
 public:
  // Loads `dir`/vocab.json and `dir`/merges.txt. Throws offgen::Error naming the file (and line of
  // merges.txt) for a missing file, bad JSON, a merge whose parts or result are not in the vocab.
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& dir);
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& vocab_json,
                                         const std::filesystem::path& merges_txt);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Any byte string (valid UTF-8 or not) encodes; GPT-2 pre-tokenisation via PCRE2 with Unicode
  // properties, then BPE by merge rank on the byte-to-unicode mapped pieces. Thread-safe.
  std::vector<std::int32_t> encode(std::string_view text) const;
  // Concatenates the tokens' bytes. An id with no entry (OPT's head has 50272 rows, its
  // vocab.json 50265 entries) decodes to nothing, so no generated id can fail a request; the
  // caller keeps the ids. The result may be invalid UTF-8 (a multi-byte character cut between
  // tokens); see to_valid_utf8().
  std::string decode(std::span<const std::int32_t> ids) const;
  // Whether `id` has an entry (decodes to bytes).
  bool has_id(std::int32_t id) const;
  std::int32_t vocab_size() const;
  std::optional<std::int32_t> token_to_id(std::string_view token) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Replaces each invalid UTF-8 sequence with U+FFFD (as Python's errors="replace" does).
std::string to_valid_utf8(std::string_view bytes);

}  // namespace offgen
