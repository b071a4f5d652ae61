// Reading Hugging Face's tokenizer.json (the `tokenizers` library's format) into an HfTokenizer.
// Supported, as the LLaMA 2 / 3, Mistral and Qwen2 files use them:
//   model           BPE: vocab; merges as "a b" strings or [a, b] pairs; unk_token, fuse_unk,
//                   byte_fallback, ignore_merges; dropout null (or 0); continuing_subword_prefix
//                   and end_of_word_suffix null or "".
//   normalizer      null, Sequence, Prepend, Replace (String or Regex pattern), NFC, NFD,
//                   Lowercase, Strip.
//   pre_tokenizer   null, Sequence, Split (String or Regex pattern, any behavior, invert),
//                   ByteLevel (add_prefix_space, use_regex: GPT-2's regex), Metaspace
//                   (replacement, prepend_scheme, split), Digits (individual_digits),
//                   Punctuation (behavior), Whitespace, WhitespaceSplit.
//   added_tokens    all flags (single_word, lstrip, rstrip, normalized, special).
//   decoder         null, Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace.
//   post_processor  null, Sequence, TemplateProcessing, ByteLevel, RobertaProcessing,
//                   BertProcessing: only the ids the single-sequence template puts before and
//                   after $A are read (prompt_prefix / prompt_suffix).
// Anything else (WordPiece / Unigram models, NFKC, BertPreTokenizer, ...) is refused with an
// offgen::Error naming the file, where in it, and the component. truncation and padding are
// settings of HF's encode call, not of tokenization, and are ignored. Regexes are Oniguruma
// patterns, run on PCRE2 (onig_pattern.h).
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "engine/tokenizer/decoder.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/pre_tokenizer_chain.h"
#include "engine/tokenizer/tokenizer_backend.h"

namespace offgen {

// Loads `path`. A tokenizer_config.json beside it that sets add_bos_token / add_eos_token to
// true or false overrides the template's prefix / suffix with [its bos_token's id] / [] (and the
// same for eos).
std::unique_ptr<TokenizerBackend> load_tokenizer_json(const std::filesystem::path& path);

// A tokenizer.json document already in memory (what a GGUF file's tokenizer metadata is turned
// into): the same components and checks; errors name `source`; no tokenizer_config.json is read.
std::unique_ptr<TokenizerBackend> tokenizer_from_document(const nlohmann::json& document,
                                                          const std::string& source);

// Whether `path` describes the pipeline of GPT-2 / OPT's vocab.json + merges.txt: no normalizer,
// and a lone ByteLevel pre-tokenizer with GPT-2's regex and no prefix space.
bool describes_gpt2_byte_level(const std::filesystem::path& path);

// The parts on their own, for tests: errors name `file` and `path`, `json`'s place in it.
namespace tokenizer_json {
Normalizer parse_normalizer(const nlohmann::json& json, std::string_view file,
                            std::string_view path);
PreTokenizerChain parse_pre_tokenizer(const nlohmann::json& json, std::string_view file,
                                      std::string_view path);
Decoder parse_decoder(const nlohmann::json& json, std::string_view file, std::string_view path);
}  // namespace tokenizer_json

}  // namespace offgen
