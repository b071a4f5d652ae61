// See onig_pattern.h. A single left-to-right pass that tracks only what changes a rewrite:
// whether we are inside a character class, and escapes.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/tokenizer/onig_pattern.h"

#include <pcre2.h>

#include <cctype>

#include "engine/core/error.h"
#include "engine/tokenizer/unicode_classes.h"

namespace offgen {

namespace {

using unicode_classes::kNewLetters;
using unicode_classes::kNewNumbers;
using unicode_classes::kWhiteSpace;

constexpr std::string_view kHexDigits = "0-9A-Fa-f";

// Oniguruma's Unicode \w (Word): Alphabetic, Mark, Decimal_Number, Connector_Punctuation, and
// (a quirk of its Latin-1 table) the superscript digits and vulgar fractions of U+00B2..U+00BE.
std::string word_class() {
  return R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE})" +
         std::string(kNewLetters) + std::string(kNewNumbers);
}

// The members of \p{name} as written inside a class, for the properties whose PCRE2 tables need
// the newer code points added; "" for any other property.
std::string patched_property(std::string_view name) {
  if (name == "L" || name == "Letter") return R"(\p{L})" + std::string(kNewLetters);
  if (name == "N" || name == "Number") return R"(\p{N})" + std::string(kNewNumbers);
  return "";
}

class Translator {
 public:
  explicit Translator(std::string_view pattern) : in_(pattern) {}

  std::string run() {
    while (pos_ < in_.size()) {
      const char c = in_[pos_];
      if (c == '\\') {
        escape();
      } else if (c == '[') {
        open_class();
      } else if (c == ']' && in_class_) {
        in_class_ = false;
        out_ += c;
        ++pos_;
      } else if (c == '&' && in_class_ && pos_ + 1 < in_.size() && in_[pos_ + 1] == '&') {
        refuse("a character class intersection (&&)");
      } else if (c == '(' && !in_class_ && in_.substr(pos_).starts_with("(?")) {
        group_options();
      } else {
        out_ += c;
        ++pos_;
      }
    }
    return std::move(out_);
  }

 private:
  [[noreturn]] void refuse(std::string_view what) const {
    fail("Oniguruma pattern {:?}: {} at offset {} has no PCRE2 equivalent offgen supports", in_,
         what, pos_);
  }

  void open_class() {
    if (in_class_) {
      // "[:alpha:]" is a POSIX class in both; any other "[" inside a class is a nested set.
      const std::size_t close = in_.find(":]", pos_);
      if (pos_ + 1 < in_.size() && in_[pos_ + 1] == ':' && close != std::string_view::npos) {
        out_ += in_.substr(pos_, close + 2 - pos_);
        pos_ = close + 2;
        return;
      }
      refuse("a nested character class");
    }
    in_class_ = true;
    out_ += '[';
    ++pos_;
    if (pos_ < in_.size() && in_[pos_] == '^') out_ += in_[pos_++];
    if (pos_ < in_.size() && in_[pos_] == ']') out_ += in_[pos_++];  // a literal "]" first
  }

  // "(?imx-imx:" or "(?imx)": Ruby's m is PCRE2's s. Other "(?" groups pass through.
  void group_options() {
    std::size_t end = pos_ + 2;
    while (end < in_.size() && std::string_view("imx-").find(in_[end]) != std::string_view::npos) {
      ++end;
    }
    if (end == pos_ + 2 || end >= in_.size() || (in_[end] != ':' && in_[end] != ')')) {
      out_ += "(?";
      pos_ += 2;
      return;
    }
    for (std::size_t i = pos_; i < end; ++i) out_ += in_[i] == 'm' ? 's' : in_[i];
    pos_ = end;
  }

  // Writes a set of members: as a class of its own outside [...], inline inside one.
  void members(std::string_view set, bool negated) {
    if (in_class_) {
      if (negated) refuse("a negated class escape inside a character class");
      out_ += set;
    } else {
      out_ += negated ? "[^" : "[";
      out_ += set;
      out_ += ']';
    }
  }

  void escape() {
    if (pos_ + 1 >= in_.size()) refuse("a trailing backslash");
    const char c = in_[pos_ + 1];
    pos_ += 2;
    switch (c) {
      case 's':
      case 'S':
        members(kWhiteSpace, c == 'S');
        return;
      case 'h':
      case 'H':
        members(kHexDigits, c == 'H');
        return;
      case 'w':
      case 'W':
        members(word_class(), c == 'W');
        return;
      case 'v':
        out_ += R"(\x{0B})";
        return;
      case 'p':
      case 'P':
        property(c == 'P');
        return;
      case 'u':
        if (pos_ + 4 <= in_.size() && std::isxdigit(static_cast<unsigned char>(in_[pos_])) &&
            std::isxdigit(static_cast<unsigned char>(in_[pos_ + 1])) &&
            std::isxdigit(static_cast<unsigned char>(in_[pos_ + 2])) &&
            std::isxdigit(static_cast<unsigned char>(in_[pos_ + 3]))) {
          out_ += R"(\x{)";
          out_ += in_.substr(pos_, 4);
          out_ += '}';
          pos_ += 4;
          return;
        }
        refuse("\\u without four hexadecimal digits");
      default:
        out_ += '\\';
        out_ += c;
        return;
    }
  }

  // After "\p" or "\P": "{Name}" or "{^Name}". Ruby syntax has no one-letter form: there "\pL"
  // is the two letters "pL".
  void property(bool negated) {
    if (pos_ >= in_.size() || in_[pos_] != '{') {
      out_ += negated ? 'P' : 'p';
      return;
    }
    const std::size_t close = in_.find('}', pos_);
    if (close == std::string_view::npos) refuse("an unterminated \\p{");
    std::string_view name = in_.substr(pos_ + 1, close - pos_ - 1);
    pos_ = close + 1;
    if (name.starts_with('^')) {
      negated = !negated;
      name.remove_prefix(1);
    }
    const std::string patched = patched_property(name);
    if (!patched.empty()) {
      members(patched, negated);
      return;
    }
    out_ += negated ? R"(\P{)" : R"(\p{)";
    out_ += name;
    out_ += '}';
  }

  std::string_view in_;
  std::size_t pos_ = 0;
  bool in_class_ = false;
  std::string out_;
};

}  // namespace

std::string onig_to_pcre2(std::string_view pattern) {
  return Translator(pattern).run();
}

std::uint32_t onig_pcre2_options() {
  return PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE;
}

}  // namespace offgen
