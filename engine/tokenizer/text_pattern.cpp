// See text_pattern.h. A literal pattern becomes a PCRE2 pattern with every ASCII punctuation
// character escaped, as HF passes regex::escape(literal) to Oniguruma: one matcher serves both.
#include "engine/tokenizer/text_pattern.h"

#include <cctype>

#include "engine/core/error.h"
#include "engine/tokenizer/onig_pattern.h"
#include "engine/tokenizer/utf8.h"

namespace offgen {

namespace {

std::string escape_literal(std::string_view literal) {
  std::string out;
  out.reserve(literal.size() * 2);
  for (const char c : literal) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x80 && !std::isalnum(byte)) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

TextPattern::TextPattern(Kind kind, std::string_view pattern, std::string_view what) {
  std::string translated;
  switch (kind) {
    case Kind::literal:
      translated = escape_literal(pattern);
      break;
    case Kind::regex:
      try {
        translated = onig_to_pcre2(pattern);
      } catch (const Error& e) {
        fail("{}: {}", what, e.what());
      }
      break;
  }
  regex_ = std::make_unique<Pcre2Regex>(translated, onig_pcre2_options(), true, what);
}

void TextPattern::find_matches(std::string_view text, std::vector<Span>& out) const {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  Pcre2Regex::Matcher matcher(*regex_);
  std::size_t prev = 0;      // end of the spans written so far
  std::size_t search = 0;    // where the next search starts
  std::size_t last_end = 0;  // end of the last match returned
  bool have_last = false;
  while (search <= text.size()) {
    const auto match = matcher.find(text, search);
    if (!match) break;
    if (match->begin == match->end) {
      search = match->end < text.size() ? match->end + utf8::decode_step(text, match->end).length
                                        : match->end + 1;
      if (have_last && last_end == match->end) continue;
    } else {
      search = match->end;
    }
    have_last = true;
    last_end = match->end;
    if (prev != match->begin) out.push_back({prev, match->begin, false});
    out.push_back({match->begin, match->end, true});
    prev = match->end;
  }
  if (prev != text.size()) out.push_back({prev, text.size(), false});
}

std::string TextPattern::replace_all(std::string_view text, std::string_view content) const {
  std::vector<Span> spans;
  find_matches(text, spans);
  std::string out;
  out.reserve(text.size());
  for (const Span& span : spans) {
    if (span.is_match) {
      out += content;
    } else {
      out += text.substr(span.begin, span.end - span.begin);
    }
  }
  return out;
}

}  // namespace offgen
