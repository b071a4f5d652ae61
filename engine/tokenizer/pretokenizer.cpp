// The GPT-2 split regex on PCRE2. HF tokenizers runs it on Oniguruma; the character classes are
// spelled as Oniguruma's (unicode_classes.h), and tests/data/tokenizer/unicode_classes.txt (every
// code point, classified by HF) checks that nothing else differs.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/tokenizer/pretokenizer.h"

#include <pcre2.h>

#include "engine/tokenizer/unicode_classes.h"
#include "engine/tokenizer/utf8.h"

namespace offgen {

namespace {

using unicode_classes::kNewLetters;
using unicode_classes::kNewNumbers;
using unicode_classes::kWhiteSpace;

// GPT-2's 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ with the
// classes spelled as described at the top of the file.
std::string gpt2_pattern() {
  const std::string white(kWhiteSpace);
  const std::string space = "[" + white + "]";
  const std::string non_space = "[^" + white + "]";
  const std::string letter = R"([\p{L})" + std::string(kNewLetters) + "]";
  const std::string number = R"([\p{N})" + std::string(kNewNumbers) + "]";
  const std::string other =
      "[^" + white + R"(\p{L}\p{N})" + std::string(kNewLetters) + std::string(kNewNumbers) + "]";
  return "'s|'t|'re|'ve|'m|'ll|'d| ?" + letter + "+| ?" + number + "+| ?" + other + "+|" + space +
         "+(?!" + non_space + ")|" + space + "+";
}

}  // namespace

// PCRE2_UCP makes \s and \p{} Unicode-aware.
Pretokenizer::Pretokenizer(bool use_jit)
    : regex_(gpt2_pattern(), PCRE2_UTF | PCRE2_UCP, use_jit, "tokenizer: the GPT-2 split pattern") {
}

void Pretokenizer::split(std::string_view text,
                         const std::function<void(std::string_view)>& emit) const {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t valid = utf8::valid_prefix_length(text.substr(pos));
    if (valid > 0) split_valid(text.substr(pos, valid), emit);
    pos += valid;
    if (pos >= text.size()) break;
    // Gather the whole run of invalid bytes: a character cut in two by a chunk boundary stays
    // one piece, so BPE can still merge its bytes as it would have merged them whole.
    std::size_t end = pos;
    while (end < text.size()) {
      const utf8::Step step = utf8::decode_step(text, end);
      if (step.valid) break;
      end += step.length;
    }
    emit(text.substr(pos, end - pos));
    pos = end;
  }
}

std::vector<std::string> Pretokenizer::split(std::string_view text) const {
  std::vector<std::string> pieces;
  split(text, [&](std::string_view piece) { pieces.emplace_back(piece); });
  return pieces;
}

void Pretokenizer::split_valid(std::string_view text,
                               const std::function<void(std::string_view)>& emit) const {
  // One matcher per call keeps split() thread-safe without locking; the compiled code (and its
  // JIT) is read-only and shared.
  Pcre2Regex::Matcher matcher(regex_);
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto match = matcher.find(text, pos);
    if (!match) break;
    const std::size_t start = match->begin;
    std::size_t end = match->end;
    // Every character is a letter, a number, whitespace or none of these, so the pattern leaves
    // no gaps; HF would keep one as its own piece, and so do we.
    if (start > pos) emit(text.substr(pos, start - pos));
    if (end == start) {  // cannot happen (no alternative matches empty); never loop forever
      end = start + utf8::decode_step(text, start).length;
    }
    emit(text.substr(start, end - start));
    pos = end;
  }
  if (pos < text.size()) emit(text.substr(pos));
}

}  // namespace offgen
