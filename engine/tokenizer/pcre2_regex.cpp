// See pcre2_regex.h. Matching passes PCRE2_NO_UTF_CHECK: callers only hand over valid UTF-8
// (the tokenizer validates or repairs its input first), and checking on every call would make a
// split of n pieces cost O(n^2).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/tokenizer/pcre2_regex.h"

#include <pcre2.h>

#include "engine/core/error.h"

namespace offgen {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return "unknown PCRE2 error";
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

Pcre2Regex::Pcre2Regex(std::string_view pattern, std::uint32_t options, bool use_jit,
                       std::string_view what)
    : what_(what) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                        &error_code, &error_offset, nullptr);
  if (code_ == nullptr) {
    fail("{}: PCRE2 cannot compile the pattern at offset {}: {}", what, error_offset,
         pcre2_message(error_code));
  }
  // JIT is several times faster; builds without JIT support (or W^X systems that refuse
  // executable memory) fall back to the interpreter, which gives the same matches.
  jit_ = use_jit && pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Pcre2Regex::~Pcre2Regex() {
  pcre2_code_free(code_);
}

Pcre2Regex::Matcher::Matcher(const Pcre2Regex& regex)
    : regex_(regex), data_(pcre2_match_data_create_from_pattern(regex.code_, nullptr)) {
  if (data_ == nullptr) fail("{}: out of memory allocating PCRE2 match data", regex.what_);
}

Pcre2Regex::Matcher::~Matcher() {
  pcre2_match_data_free(data_);
}

std::optional<Pcre2Regex::Match> Pcre2Regex::Matcher::find(std::string_view text,
                                                           std::size_t start) {
  const int rc = pcre2_match(regex_.code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                             start, PCRE2_NO_UTF_CHECK, data_, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return std::nullopt;
  if (rc < 0) fail("{}: PCRE2 match failed: {}", regex_.what_, pcre2_message(rc));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data_);
  return Match{ovector[0], ovector[1]};
}

}  // namespace offgen
