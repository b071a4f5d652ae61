// See jinja_lexer.h. This follows jinja2/lexer.py rule by rule: at each position inside a tag
// the end of the tag is tried first (only while brackets are balanced), then whitespace, float,
// integer, name, string and operator. Where jinja2 uses Python's \s (Unicode whitespace) so does
// this, through text::is_space.
#include "engine/jinja/jinja_lexer.h"

#include <cctype>

#include "engine/core/error.h"
#include "engine/jinja/jinja_text.h"

namespace offgen::jinja {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

// \r\n and \r become \n, and one trailing newline goes (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int count_newlines(std::string_view s) {
  int n = 0;
  for (const char c : s) n += c == '\n';
  return n;
}

bool all_space(std::string_view s) {
  if (s.empty()) return false;
  std::size_t pos = 0;
  while (pos < s.size()) {
    if (!text::is_space(text::next_code_point(s, pos))) return false;
  }
  return true;
}

class Lexer {
 public:
  Lexer(std::string_view source, std::string_view name)
      : src_(normalize_newlines(source)), name_(name) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const std::size_t tag = find_opener(pos_);
      if (tag == std::string::npos) {
        add_data(src_.substr(pos_), line_);
        line_ += count_newlines(std::string_view(src_).substr(pos_));
        pos_ = src_.size();
        break;
      }
      const char kind = src_[tag + 1];
      const std::size_t after = tag + 2;
      const char sign =
          after < src_.size() && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
      std::size_t raw_end = 0;
      const bool raw = kind == '%' && match_raw_begin(tag, raw_end);
      std::string text = src_.substr(pos_, tag - pos_);
      const int text_line = line_;
      line_ += count_newlines(text);
      add_data(control_whitespace(std::move(text), sign, kind != '{'), text_line);
      if (raw) {
        line_ += count_newlines(std::string_view(src_).substr(tag, raw_end - tag));
        line_starting_ = src_[raw_end - 1] == '\n';
        pos_ = raw_end;
        lex_raw_body(tag);
        continue;
      }
      pos_ = after + (sign != 0 ? 1 : 0);
      switch (kind) {
        case '#':
          lex_comment(tag);
          break;
        case '%':
          tokens_.push_back(Token{TokenType::kBlockBegin, "", 0, 0.0, line_});
          lex_tag(true);
          break;
        default:
          tokens_.push_back(Token{TokenType::kVariableBegin, "", 0, 0.0, line_});
          lex_tag(false);
          break;
      }
    }
    tokens_.push_back(Token{TokenType::kEof, "", 0, 0.0, line_});
    return std::move(tokens_);
  }

 private:
  template <typename... Args>
  [[noreturn]] void fail(int line, fmt::format_string<Args...> format, Args&&... args) const {
    throw Error(fmt::format("chat template {}, line {}: {}", name_, line,
                            fmt::format(format, std::forward<Args>(args)...)));
  }

  std::size_t find_opener(std::size_t from) const {
    for (std::size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string::npos;
  }

  bool starts(std::size_t at, std::string_view what) const {
    return src_.compare(at, what.size(), what) == 0;
  }

  // Past the Unicode whitespace at `at`.
  std::size_t skip_space(std::size_t at) const {
    while (at < src_.size()) {
      std::size_t next = at;
      if (!text::is_space(text::next_code_point(src_, next))) break;
      at = next;
    }
    return at;
  }

  void add_data(std::string text, int line) {
    if (!text.empty()) tokens_.push_back(Token{TokenType::kData, std::move(text), 0, 0.0, line});
  }

  // The text before a tag: `-` strips its trailing whitespace; lstrip_blocks strips the spaces
  // between the last line start and a block or comment tag, unless the tag says `+`.
  std::string control_whitespace(std::string text, char sign, bool lstrip) const {
    if (sign == '-') return text::strip(text, std::nullopt, text::StripSide::kRight);
    if (sign == '+' || !lstrip) return text;
    const std::size_t newline = text.rfind('\n');
    const std::size_t line_start = newline == std::string::npos ? 0 : newline + 1;
    if ((line_start > 0 || line_starting_) &&
        all_space(std::string_view(text).substr(line_start))) {
      text.resize(line_start);
    }
    return text;
  }

  // `{% raw %}` (or `{%- raw -%}`) at `tag`; `end` is past it. trim_blocks does not apply here.
  bool match_raw_begin(std::size_t tag, std::size_t& end) const {
    std::size_t p = tag + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = skip_space(p);
    if (!starts(p, "raw")) return false;
    p = skip_space(p + 3);
    if (starts(p, "-%}")) {
      end = skip_space(p + 3);
      return true;
    }
    if (starts(p, "%}")) {
      end = p + 2;
      return true;
    }
    return false;
  }

  void lex_raw_body(std::size_t raw_tag) {
    for (std::size_t p = src_.find("{%", pos_); p != std::string::npos;
         p = src_.find("{%", p + 1)) {
      std::size_t q = p + 2;
      const char sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      if (sign != 0) ++q;
      q = skip_space(q);
      if (!starts(q, "endraw")) continue;
      q = skip_space(q + 6);
      std::size_t end = 0;
      if (starts(q, "+%}")) {
        end = q + 3;
      } else if (starts(q, "-%}")) {
        end = skip_space(q + 3);
      } else if (starts(q, "%}")) {
        end = q + 2 + (starts(q + 2, "\n") ? 1 : 0);
      } else {
        continue;
      }
      std::string text = src_.substr(pos_, p - pos_);
      const int text_line = line_;
      add_data(control_whitespace(std::move(text), sign, true), text_line);
      line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    fail(line_at(raw_tag), "missing end of raw directive ({{% endraw %}})");
  }

  int line_at(std::size_t offset) const {
    return 1 + count_newlines(std::string_view(src_).substr(0, offset));
  }

  void lex_comment(std::size_t tag) {
    for (std::size_t i = pos_; i + 1 < src_.size(); ++i) {
      std::size_t end = 0;
      if ((src_[i] == '+' || src_[i] == '-') && starts(i + 1, "#}")) {
        end = src_[i] == '-' ? skip_space(i + 3) : i + 3;
      } else if (starts(i, "#}")) {
        end = i + 2 + (starts(i + 2, "\n") ? 1 : 0);
      } else {
        continue;
      }
      line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    fail(line_at(tag), "missing end of comment tag (#}})");
  }

  // The inside of {% ... %} or {{ ... }}, from pos_ through its end.
  void lex_tag(bool block) {
    const int open_line = line_;
    std::string balance;  // the closing brackets expected, innermost last
    while (true) {
      if (pos_ >= src_.size()) {
        fail(open_line, "unexpected end of template: the {} opened here is not closed",
             block ? "{% tag" : "{{ expression");
      }
      if (balance.empty()) {
        std::size_t end = 0;
        if (block) {
          if (starts(pos_, "+%}")) {
            end = pos_ + 3;
          } else if (starts(pos_, "-%}")) {
            end = skip_space(pos_ + 3);
          } else if (starts(pos_, "%}")) {
            end = pos_ + 2 + (starts(pos_ + 2, "\n") ? 1 : 0);  // trim_blocks
          }
        } else {
          if (starts(pos_, "-}}")) {
            end = skip_space(pos_ + 3);
          } else if (starts(pos_, "}}")) {
            end = pos_ + 2;
          }
        }
        if (end != 0) {
          tokens_.push_back(
              Token{block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "", 0, 0.0, line_});
          line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
          line_starting_ = src_[end - 1] == '\n';
          pos_ = end;
          return;
        }
      }
      const char c = src_[pos_];
      std::size_t next = pos_;
      if (text::is_space(text::next_code_point(src_, next))) {
        line_ += c == '\n';
        pos_ = next;
      } else if (is_digit(c)) {
        lex_number();
      } else if (is_name_start(c)) {
        const std::size_t begin = pos_;
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        tokens_.push_back(Token{TokenType::kName, src_.substr(begin, pos_ - begin), 0, 0.0, line_});
      } else if (c == '\'' || c == '"') {
        lex_string();
      } else {
        lex_operator(balance);
      }
    }
  }

  // (\d+_)*\d+ at `p`: its end, or npos.
  std::size_t digit_run(std::size_t p) const {
    if (p >= src_.size() || !is_digit(src_[p])) return std::string::npos;
    while (p < src_.size() && is_digit(src_[p])) ++p;
    while (p + 1 < src_.size() && src_[p] == '_' && is_digit(src_[p + 1])) {
      ++p;
      while (p < src_.size() && is_digit(src_[p])) ++p;
    }
    return p;
  }

  std::size_t float_end() const {
    if (pos_ > 0 && src_[pos_ - 1] == '.') return std::string::npos;
    const std::size_t whole = digit_run(pos_);
    std::size_t fraction = std::string::npos;
    if (whole < src_.size() && src_[whole] == '.') fraction = digit_run(whole + 1);
    const std::size_t mantissa = fraction != std::string::npos ? fraction : whole;
    if (mantissa < src_.size() && (src_[mantissa] == 'e' || src_[mantissa] == 'E')) {
      std::size_t p = mantissa + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      const std::size_t exponent = digit_run(p);
      if (exponent != std::string::npos) return exponent;
    }
    return fraction;
  }

  void lex_number() {
    const std::size_t fend = float_end();
    if (fend != std::string::npos) {
      std::string digits;
      for (std::size_t i = pos_; i < fend; ++i) {
        if (src_[i] != '_') digits.push_back(src_[i]);
      }
      tokens_.push_back(
          Token{TokenType::kFloat, digits, 0, std::strtod(digits.c_str(), nullptr), line_});
      pos_ = fend;
      return;
    }
    int base = 10;
    std::size_t p = pos_;
    const auto digit_ok = [&](char ch) {
      const int d = std::isdigit(static_cast<unsigned char>(ch))    ? ch - '0'
                    : std::isxdigit(static_cast<unsigned char>(ch)) ? std::tolower(ch) - 'a' + 10
                                                                    : 99;
      return d < base;
    };
    std::size_t end = p;
    if (src_[p] == '0' && p + 1 < src_.size()) {
      const char prefix = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[p + 1])));
      base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : prefix == 'x' ? 16 : 10;
      if (base != 10) {
        // (_?digit)+ after the prefix
        std::size_t q = p + 2;
        while (true) {
          const std::size_t r = q < src_.size() && src_[q] == '_' ? q + 1 : q;
          if (r >= src_.size() || !digit_ok(src_[r])) break;
          q = r + 1;
        }
        if (q == p + 2) {
          base = 10;  // "0x" alone: the integer 0, then a name
        } else {
          end = q;
        }
      }
    }
    if (base == 10) {
      // [1-9](_?\d)* or 0(_?0)*
      const char first = src_[p];
      end = p + 1;
      while (true) {
        const std::size_t r = end < src_.size() && src_[end] == '_' ? end + 1 : end;
        if (r >= src_.size() || !is_digit(src_[r]) || (first == '0' && src_[r] != '0')) break;
        end = r + 1;
      }
    }
    std::int64_t value = 0;
    for (std::size_t i = pos_ + (base == 10 ? 0 : 2); i < end; ++i) {
      if (src_[i] == '_') continue;
      const char ch = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[i])));
      const int d = is_digit(ch) ? ch - '0' : ch - 'a' + 10;
      if (__builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, d, &value)) {
        fail(line_, "the integer literal {} does not fit 64 bits", src_.substr(pos_, end - pos_));
      }
    }
    tokens_.push_back(Token{TokenType::kInteger, src_.substr(pos_, end - pos_), value, 0.0, line_});
    pos_ = end;
  }

  // A string literal, unescaped as Python's unicode-escape codec does (jinja2 encodes the
  // literal with backslashreplace first, so non-ASCII characters survive as they are).
  void lex_string() {
    const char quote = src_[pos_];
    std::size_t i = pos_ + 1;
    while (i < src_.size() && src_[i] != quote) i += src_[i] == '\\' ? 2 : 1;
    if (i >= src_.size()) fail(line_, "unterminated string literal");
    const std::string_view raw = std::string_view(src_).substr(pos_ + 1, i - pos_ - 1);
    tokens_.push_back(Token{TokenType::kString, unescape(raw), 0, 0.0, line_});
    line_ += count_newlines(raw);
    pos_ = i + 1;
  }

  std::string unescape(std::string_view raw) const {
    std::string out;
    std::size_t i = 0;
    const auto hex_escape = [&](std::size_t digits) {
      if (i + digits > raw.size()) {
        fail(line_, "truncated \\{} escape in a string literal", raw[i - 1]);
      }
      char32_t c = 0;
      for (std::size_t k = 0; k < digits; ++k) {
        const char h = raw[i + k];
        if (!std::isxdigit(static_cast<unsigned char>(h))) {
          fail(line_, "truncated \\{} escape in a string literal", raw[i - 1]);
        }
        c = c * 16 + static_cast<char32_t>(is_digit(h) ? h - '0' : std::tolower(h) - 'a' + 10);
      }
      if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        fail(line_, "the escape in a string literal is not a valid character");
      }
      i += digits;
      text::append_utf8(out, c);
    };
    while (i < raw.size()) {
      if (raw[i] != '\\') {
        out.push_back(raw[i++]);
        continue;
      }
      ++i;  // the backslash; raw never ends in one (the lexer skipped escaped characters)
      const char c = raw[i++];
      switch (c) {
        case '\n':
          break;  // a line continuation
        case '\\':
        case '\'':
        case '"':
          out.push_back(c);
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
          hex_escape(2);
          break;
        case 'u':
          hex_escape(4);
          break;
        case 'U':
          hex_escape(8);
          break;
        case 'N':
          fail(line_, "\\N{{...}} escapes in string literals are not supported");
        default:
          if (c >= '0' && c <= '7') {
            char32_t value = static_cast<char32_t>(c - '0');
            for (int k = 0; k < 2 && i < raw.size() && raw[i] >= '0' && raw[i] <= '7'; ++k) {
              value = value * 8 + static_cast<char32_t>(raw[i++] - '0');
            }
            text::append_utf8(out, value);
          } else if (static_cast<unsigned char>(c) >= 0x80) {
            // backslashreplace turned the character into \xNN / \uNNNN / \UNNNNNNNN, and the
            // backslash before it escapes the first backslash of that: the text survives.
            std::size_t start = i - 1;
            const char32_t cp = text::next_code_point(raw, start);
            i = start;
            out += cp <= 0xFF     ? fmt::format("\\x{:02x}", static_cast<unsigned>(cp))
                   : cp <= 0xFFFF ? fmt::format("\\u{:04x}", static_cast<unsigned>(cp))
                                  : fmt::format("\\U{:08x}", static_cast<unsigned>(cp));
          } else {
            out.push_back('\\');
            out.push_back(c);
          }
          break;
      }
    }
    return out;
  }

  void lex_operator(std::string& balance) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    static constexpr std::string_view kOne = "+-/*%~[](){}=.:|,;<>";
    std::string op;
    for (const std::string_view two : kTwo) {
      if (starts(pos_, two)) op = two;
    }
    if (op.empty() && kOne.find(src_[pos_]) != std::string_view::npos) op = src_.substr(pos_, 1);
    if (op.empty()) {
      std::size_t next = pos_;
      const char32_t c = text::next_code_point(src_, next);
      std::string shown;
      text::append_utf8(shown, c);
      fail(line_, "unexpected character '{}'", shown);
    }
    if (op == "(" || op == "[" || op == "{") {
      balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
    } else if (op == ")" || op == "]" || op == "}") {
      if (balance.empty()) fail(line_, "unexpected '{}'", op);
      if (balance.back() != op[0]) {
        fail(line_, "unexpected '{}', expected '{}'", op, balance.back());
      }
      balance.pop_back();
    }
    tokens_.push_back(Token{TokenType::kOperator, op, 0, 0.0, line_});
    pos_ += op.size();
  }

  std::string src_;
  std::string_view name_;
  std::size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, std::string_view name) {
  return Lexer(source, name).run();
}

}  // namespace offgen::jinja
