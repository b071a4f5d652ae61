// Text <-> token ids. Two file formats, each identical in its ids to Hugging Face `tokenizers`:
//  - GPT-2 / OPT's vocab.json + merges.txt: byte-level BPE with add_prefix_space = false.
//    Special-token text ("</s>") encodes as plain text, and prompt_prefix() is nullopt: the engine
//    prepends the model config's bos_token_id, as OPT does.
//  - Hugging Face tokenizer.json (LLaMA 2 / 3, Mistral, Qwen2; tokenizer_json.h lists what is
//    supported): added tokens in the text ("<|eot_id|>", "<s>") encode to their ids, and
//    prompt_prefix() says which ids the file's template puts before a prompt.
//  - A GGUF file's tokenizer.ggml.* metadata (engine/model/gguf_tokenizer.h), turned into the
//    tokenizer.json it stands for.
// encode() never adds special tokens; decode() never skips any.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace offgen {

class TokenizerBackend;

class Tokenizer {
 public:
  // Loads the tokenizer in `dir`. vocab.json + merges.txt are used when both are there, unless
  // a tokenizer.json beside them describes a different pipeline (OPT checkpoints ship all three,
  // with the same byte-level BPE in each: they keep today's vocab.json + merges.txt behaviour;
  // Qwen2's tokenizer.json normalizes and splits differently, so it wins); otherwise
  // tokenizer.json. Throws offgen::Error naming the file for a missing or bad file.
  // `dir` may also be a GGUF file, or a directory holding one .gguf and no config.json.
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& dir);
  // Whether `path` (a checkpoint directory or GGUF file) holds a tokenizer load() reads:
  // vocab.json, tokenizer.json or a GGUF file. Throws as find_gguf_file() does.
  static bool found_in(const std::filesystem::path& path);
  // Throws offgen::Error naming the file (and line of merges.txt) for a missing file, bad JSON, a
  // merge whose parts or result are not in the vocab.
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& vocab_json,
                                         const std::filesystem::path& merges_txt);
  // Loads a Hugging Face tokenizer.json, and the tokenizer_config.json beside it if there is one
  // (its add_bos_token / add_eos_token override the template; see prompt_prefix()). Throws
  // offgen::Error naming the file, the place in it and the component for anything malformed or
  // unsupported.
  static std::unique_ptr<Tokenizer> load_json(const std::filesystem::path& tokenizer_json);
  // A tokenizer.json document already in memory; errors name `source`.
  static std::unique_ptr<Tokenizer> from_document(const nlohmann::json& document,
                                                  const std::string& source);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Any byte string encodes. vocab.json + merges.txt: GPT-2 pre-tokenisation via PCRE2 with
  // Unicode properties, then BPE by merge rank on the byte-to-unicode mapped pieces; invalid
  // UTF-8 keeps its bytes. tokenizer.json: as `tokenizers`' encode(text,
  // add_special_tokens=False); invalid UTF-8 is first replaced by U+FFFD (to_valid_utf8()), as
  // `tokenizers` can only be given valid text. Thread-safe.
  std::vector<std::int32_t> encode(std::string_view text) const;
  // The text of `ids`, skipping none (special tokens decode as their text). An id with no entry
  // (OPT's head has 50272 rows, its vocab.json 50265 entries) decodes to nothing, so no generated
  // id can fail a request; the caller keeps the ids. vocab.json + merges.txt: the tokens' bytes,
  // concatenated, which may be invalid UTF-8 (a multi-byte character cut between tokens); see
  // to_valid_utf8(). tokenizer.json: exactly `tokenizers`' decode(ids,
  // skip_special_tokens=False), valid UTF-8 (its decoders write U+FFFD for cut characters).
  std::string decode(std::span<const std::int32_t> ids) const;
  // Whether `id` has an entry (decodes to bytes).
  bool has_id(std::int32_t id) const;
  // One past the largest id, added tokens included.
  std::int32_t vocab_size() const;
  // The id of a token as written in the file (added tokens first, then the vocabulary).
  std::optional<std::int32_t> token_to_id(std::string_view token) const;

  // The ids to put before an encoded prompt: nullopt for vocab.json + merges.txt (the engine
  // prepends the model config's bos_token_id), else what the post-processor's single-sequence
  // template puts before "$A" ([bos] for LLaMA 2 and 3, [] for Qwen2); a tokenizer_config.json
  // beside tokenizer.json that sets add_bos_token overrides it (true: [id of its bos_token];
  // false: []).
  std::optional<std::vector<std::int32_t>> prompt_prefix() const;
  // The same after the prompt: the template's ids after "$A", overridden by add_eos_token.
  std::optional<std::vector<std::int32_t>> prompt_suffix() const;

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerBackend> backend);
  std::unique_ptr<TokenizerBackend> backend_;
};

// Replaces each invalid UTF-8 sequence with U+FFFD (as Python's errors="replace" does).
std::string to_valid_utf8(std::string_view bytes);

}  // namespace offgen
