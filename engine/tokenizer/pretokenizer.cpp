// The GPT-2 split regex on PCRE2. HF tokenizers runs it on Oniguruma; two differences are
// bridged here, and tests/data/tokenizer/unicode_classes.txt (every code point, classified by HF)
// checks that nothing else differs:
//  - \s: Oniguruma's Unicode \s is exactly the White_Space property. PCRE2's \s under PCRE2_UCP
//    is \p{Z} plus \t\n\v\f\r plus its fixed list of horizontal spaces, so it lacks U+0085 (NEL,
//    a Cc control) and has U+180E (MONGOLIAN VOWEL SEPARATOR, Cf since Unicode 6.3). We spell
//    White_Space out instead; the property has not changed since Unicode 6.3.
//  - Unicode versions: the Oniguruma in the tokenizers the fixtures were made with (0.23) has
//    Unicode 16.0 tables, PCRE2 10.42 (Debian 12) has 14.0, so letters and digits assigned in
//    15.0..16.0 would be neither \p{L} nor \p{N} to PCRE2. They are listed explicitly; with a
//    newer PCRE2 the lists are redundant and harmless.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <memory>

#include "engine/core/error.h"
#include "engine/tokenizer/utf8.h"

namespace offgen {

namespace {

// Letters (Lo/Lm/Lu/Ll) and numbers (Nd/Nl/No) new in Unicode 15.0, 15.1 and 16.0: HF's
// classification of every code point (tools/make_tokenizer_fixtures.py) minus Unicode 14.0's.
constexpr std::string_view kNewLetters =
    R"(\x{1C89}-\x{1C8A}\x{A7CB}-\x{A7CD}\x{A7DA}-\x{A7DC}\x{105C0}-\x{105F3}\x{10D4A}-\x{10D65})"
    R"(\x{10D6F}-\x{10D85}\x{10EC2}-\x{10EC4}\x{1123F}-\x{11240}\x{11380}-\x{11389}\x{1138B})"
    R"(\x{1138E}\x{11390}-\x{113B5}\x{113B7}\x{113D1}\x{113D3}\x{11BC0}-\x{11BE0}\x{11F02})"
    R"(\x{11F04}-\x{11F10}\x{11F12}-\x{11F33}\x{1342F}\x{13441}-\x{13446}\x{13460}-\x{143FA})"
    R"(\x{16100}-\x{1611D}\x{16D40}-\x{16D6C}\x{18CFF}\x{1B132}\x{1B155}\x{1DF25}-\x{1DF2A})"
    R"(\x{1E030}-\x{1E06D}\x{1E4D0}-\x{1E4EB}\x{1E5D0}-\x{1E5ED}\x{1E5F0}\x{2B739})"
    R"(\x{2EBF0}-\x{2EE5D}\x{31350}-\x{323AF})";
constexpr std::string_view kNewNumbers =
    R"(\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{11F50}-\x{11F59})"
    R"(\x{16130}-\x{16139}\x{16D70}-\x{16D79}\x{1CCF0}-\x{1CCF9}\x{1D2C0}-\x{1D2D3})"
    R"(\x{1E4F0}-\x{1E4F9}\x{1E5F1}-\x{1E5FA})";

// The White_Space property (PropList.txt), which is what Oniguruma's \s matches.
constexpr std::string_view kWhiteSpace =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F})"
    R"(\x{3000})";

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

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return "unknown PCRE2 error";
  return reinterpret_cast<const char*>(buffer);
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

}  // namespace

Pretokenizer::Pretokenizer(bool use_jit) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // PCRE2_UCP makes \s and \p{} Unicode-aware; NO_UTF_CHECK at match time is safe because split()
  // only hands valid UTF-8 to the matcher.
  const std::string pattern = gpt2_pattern();
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                        PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code_ == nullptr) {
    fail("tokenizer: PCRE2 cannot compile the GPT-2 split pattern at offset {}: {}", error_offset,
         pcre2_message(error_code));
  }
  // JIT is several times faster; builds without JIT support (or W^X systems that refuse
  // executable memory) fall back to the interpreter, which gives the same matches.
  jit_ = use_jit && pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Pretokenizer::~Pretokenizer() {
  pcre2_code_free(code_);
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
  // One match block per call keeps split() thread-safe without locking; the compiled code (and
  // its JIT) is read-only and shared.
  const std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(
      pcre2_match_data_create_from_pattern(code_, nullptr));
  if (!match) fail("tokenizer: out of memory allocating PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t pos = 0;
  while (pos < text.size()) {
    const int rc =
        pcre2_match(code_, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("tokenizer: PCRE2 match failed: {}", pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    const std::size_t start = ovector[0];
    std::size_t end = ovector[1];
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
