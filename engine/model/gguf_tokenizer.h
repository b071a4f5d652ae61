// The tokenizer a GGUF file describes (tokenizer.ggml.*), as a Hugging Face tokenizer.json
// document that Tokenizer::from_document() then loads with every check tokenizer.json gets:
//   gpt2   byte-level BPE: tokens + merges, the pre-tokenizer that llama.cpp's
//          tokenizer.ggml.pre names (see kPreTokenizers in the .cpp), ByteLevel decoding.
//   llama  SentencePiece-style: tokens + scores, as transformers 5 builds it from such a file:
//          BPE whose merges are every split of a token into two tokens, ranked by the token's
//          score, byte fallback (<0xNN> tokens), Metaspace "▁" with one prepended to the text's
//          first piece only, and the decoder that undoes both. This differs from llama.cpp and
//          SentencePiece on a text that starts with a space (" Hi": one "▁", not two) or follows
//          an added token ("<s>Hi": no "▁"); offgen's bar is transformers'.
// Tokens of type CONTROL, and the BOS / EOS / unknown / padding tokens, become special added
// tokens and USER_DEFINED ones plain added tokens, so "<|im_start|>" in a prompt encodes to its
// id. Of duplicated token strings the last keeps the string. The prompt prefix is [BOS] when
// tokenizer.ggml.add_bos_token says so (default: true for llama, false for gpt2), and the
// suffix [EOS] with add_eos_token. Throws offgen::Error naming the file and key.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/model/gguf_file.h"

namespace offgen {

nlohmann::json gguf_tokenizer_document(const GgufFile& file);

// tokenizer.chat_template, when the file has one.
std::optional<std::string> gguf_chat_template(const GgufFile& file);

}  // namespace offgen
