// Fuzzes the tokenizers (the small vocabularies of tests/data/tokenizer) with
//  - the input as text, any bytes: encode() never throws, gives ids inside the vocabulary, gives
//    the same ids again (the piece cache changes nothing), and decode(encode(s)) == s — for valid
//    UTF-8 as the tokenizer's contract, and for invalid UTF-8 too, since every byte has a token;
//    the pre-tokenizer's pieces are non-empty, concatenate to the input and are the same with and
//    without PCRE2's JIT; to_valid_utf8() gives valid UTF-8, the input itself when it was valid;
//  - the same text through two tokenizer.json files (tests/data/tokenizer/json): LLaMA 3-style
//    (added tokens, the LLaMA 3 split regex, ignore_merges) must round-trip to to_valid_utf8(s),
//    since encode() repairs invalid UTF-8 first; LLaMA 2-style (normalizer, byte fallback, a
//    decoder that strips) must give ids in the vocabulary, deterministically, and a decode that
//    is valid UTF-8;
//  - the input as token ids (little-endian int16, so negative and out-of-vocabulary ids come up
//    often): decode() skips ids without a token, and what it returns encodes and decodes back to
//    itself; the tokenizer.json decoders give valid UTF-8 for any ids.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/error.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

const offgen::Tokenizer& tokenizer() {
  static const std::unique_ptr<offgen::Tokenizer> instance =
      offgen::Tokenizer::load(offgen::fuzz::data_dir() / "tokenizer");
  return *instance;
}

const offgen::Tokenizer& json_tokenizer(const char* style) {
  static const std::unique_ptr<offgen::Tokenizer> llama3 = offgen::Tokenizer::load_json(
      offgen::fuzz::data_dir() / "tokenizer" / "json" / "llama3-style" / "tokenizer.json");
  static const std::unique_ptr<offgen::Tokenizer> llama2 = offgen::Tokenizer::load_json(
      offgen::fuzz::data_dir() / "tokenizer" / "json" / "llama2-style" / "tokenizer.json");
  return std::string_view(style) == "llama3" ? *llama3 : *llama2;
}

void check_json_text(std::string_view text) {
  const bool valid = offgen::utf8::valid_prefix_length(text) == text.size();
  for (const char* style : {"llama3", "llama2"}) {
    const offgen::Tokenizer& t = json_tokenizer(style);
    const std::vector<std::int32_t> ids = t.encode(text);
    for (const std::int32_t id : ids) {
      OFFGEN_FUZZ_EXPECT(t.has_id(id), std::string(style) + " id " + std::to_string(id));
    }
    OFFGEN_FUZZ_EXPECT(t.encode(text) == ids, std::string(style) + ": encode not deterministic");
    if (!valid) {
      OFFGEN_FUZZ_EXPECT(t.encode(offgen::to_valid_utf8(text)) == ids,
                         std::string(style) + ": invalid UTF-8 not encoded as its repair");
    }
    const std::string decoded = t.decode(ids);
    OFFGEN_FUZZ_EXPECT(offgen::utf8::valid_prefix_length(decoded) == decoded.size(),
                       std::string(style) + ": decode gave invalid UTF-8");
    if (std::string_view(style) == "llama3") {
      OFFGEN_FUZZ_EXPECT(decoded == offgen::to_valid_utf8(text), "llama3: decode(encode(s))");
    }
  }
}

void check_text(std::string_view text) {
  const offgen::Tokenizer& t = tokenizer();
  const std::vector<std::int32_t> ids = t.encode(text);
  for (const std::int32_t id : ids) {
    OFFGEN_FUZZ_EXPECT(id >= 0 && id < t.vocab_size(), std::to_string(id));
  }
  OFFGEN_FUZZ_EXPECT(t.encode(text) == ids, "encode is not deterministic");
  OFFGEN_FUZZ_EXPECT(t.decode(ids) == text, "decode(encode(s)) != s");

  static const offgen::Pretokenizer jit(true);
  static const offgen::Pretokenizer interpreter(false);
  const std::vector<std::string> pieces = jit.split(text);
  std::string joined;
  for (const std::string& piece : pieces) {
    OFFGEN_FUZZ_EXPECT(!piece.empty(), "empty piece");
    joined += piece;
  }
  OFFGEN_FUZZ_EXPECT(joined == text, "pieces do not concatenate to the text");
  OFFGEN_FUZZ_EXPECT(interpreter.split(text) == pieces, "JIT and interpreter split differently");

  const bool valid = offgen::utf8::valid_prefix_length(text) == text.size();
  const std::string repaired = offgen::to_valid_utf8(text);
  OFFGEN_FUZZ_EXPECT(offgen::utf8::valid_prefix_length(repaired) == repaired.size(),
                     "to_valid_utf8 gave invalid UTF-8");
  OFFGEN_FUZZ_EXPECT(valid == (repaired == text), "to_valid_utf8 changed valid text");
}

void check_ids(const std::uint8_t* data, std::size_t size) {
  const offgen::Tokenizer& t = tokenizer();
  std::vector<std::int32_t> ids(size / 2);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::int16_t id;
    std::memcpy(&id, data + 2 * i, sizeof id);
    ids[i] = id;
  }
  std::string text;
  try {
    text = t.decode(ids);
  } catch (const offgen::Error&) {
    return;
  }
  OFFGEN_FUZZ_EXPECT(t.decode(t.encode(text)) == text, "decode(encode(decode(ids))) differs");
  for (const char* style : {"llama3", "llama2"}) {
    const std::string decoded = json_tokenizer(style).decode(ids);
    OFFGEN_FUZZ_EXPECT(offgen::utf8::valid_prefix_length(decoded) == decoded.size(),
                       std::string(style) + ": decode of ids gave invalid UTF-8");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_text(std::string_view(reinterpret_cast<const char*>(data), size));
  check_json_text(std::string_view(reinterpret_cast<const char*>(data), size));
  check_ids(data, size);
  return 0;
}
