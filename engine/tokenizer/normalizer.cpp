// See normalizer.h. Offsets (which HF tracks through normalization for its alignments) are not
// needed to produce ids, so each step is a plain string transformation.
#include "engine/tokenizer/normalizer.h"

#include "engine/tokenizer/overloaded.h"
#include "engine/tokenizer/unicode_nfc.h"

namespace offgen {

std::string Normalizer::normalize(std::string_view text) const {
  std::string current(text);
  for (const Step& step : steps_) {
    current = std::visit(
        Overloaded{
            [&](const Prepend& p) { return current.empty() ? current : p.text + current; },
            [&](const Replace& r) { return r.pattern->replace_all(current, r.content); },
            [&](const Nfc&) { return unicode::nfc(current); },
            [&](const Nfd&) { return unicode::nfd(current); },
        },
        step);
  }
  return current;
}

}  // namespace offgen
