// See normalizer.h. Offsets (which HF tracks through normalization for its alignments) are not
// needed to produce ids, so each step is a plain string transformation.
#include "engine/tokenizer/normalizer.h"

#include "engine/tokenizer/overloaded.h"
#include "engine/tokenizer/unicode_classes.h"
#include "engine/tokenizer/unicode_lowercase.h"
#include "engine/tokenizer/unicode_nfc.h"
#include "engine/tokenizer/utf8.h"

namespace offgen {
namespace {

std::string strip(std::string_view text, bool left, bool right) {
  std::size_t begin = 0;
  std::size_t end = text.size();
  if (left) {
    while (begin < end) {
      std::size_t next = begin;
      if (!unicode_classes::is_white_space(utf8::next_code_point(text, next))) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      std::size_t start = end - 1;  // back to the last character's lead byte
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      std::size_t next = start;
      if (!unicode_classes::is_white_space(utf8::next_code_point(text, next))) break;
      end = start;
    }
  }
  return std::string(text.substr(begin, end - begin));
}

}  // namespace

std::string Normalizer::normalize(std::string_view text) const {
  std::string current(text);
  for (const Step& step : steps_) {
    current = std::visit(
        Overloaded{
            [&](const Prepend& p) { return current.empty() ? current : p.text + current; },
            [&](const Replace& r) { return r.pattern->replace_all(current, r.content); },
            [&](const Nfc&) { return unicode::nfc(current); },
            [&](const Nfd&) { return unicode::nfd(current); },
            [&](const Lowercase&) { return unicode::lowercase(current); },
            [&](const Strip& s) { return strip(current, s.left, s.right); },
        },
        step);
  }
  return current;
}

}  // namespace offgen
