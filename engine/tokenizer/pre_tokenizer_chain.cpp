// See pre_tokenizer_chain.h. Each step follows the HF source it names; offsets are not tracked,
// only whether a piece begins the input (what Metaspace's "first" asks). A piece that starts
// later in its parent does not begin the input. HF answers from its alignments, which differ from
// this only where a normalizer inserted text before a normalized added token, and then only for
// Metaspace "first": no published file combines those.
#include "engine/tokenizer/pre_tokenizer_chain.h"

#include <algorithm>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/overloaded.h"

namespace offgen {

namespace {

using Span = TextPattern::Span;

// HF's NormalizedString::split: which spans of `matches` become pieces, and which are dropped.
void apply_behavior(const std::vector<Span>& matches, SplitBehavior behavior,
                    std::vector<Span>& out) {
  out.clear();
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::isolated:
      for (const Span& s : matches) out.push_back({s.begin, s.end, false});
      return;
    case SplitBehavior::removed:
      for (const Span& s : matches) {
        if (!s.is_match) out.push_back({s.begin, s.end, false});
      }
      return;
    case SplitBehavior::contiguous:
      for (const Span& s : matches) {
        if (s.is_match == previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back({s.begin, s.end, false});
        }
        previous_match = s.is_match;
      }
      return;
    case SplitBehavior::merged_with_previous:
      for (const Span& s : matches) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back({s.begin, s.end, false});
        }
        previous_match = s.is_match;
      }
      return;
    case SplitBehavior::merged_with_next:
      // HF folds from the end: a match joins the piece after it.
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back({it->begin, it->end, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      return;
  }
}

void emit_spans(const PreTokenPiece& piece, const std::vector<Span>& spans,
                std::vector<PreTokenPiece>& out) {
  for (const Span& s : spans) {
    if (s.end == s.begin) continue;
    out.push_back({piece.text.substr(s.begin, s.end - s.begin), piece.at_start && s.begin == 0});
  }
}

std::string to_byte_level(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 2);
  for (const char c : text) out += byte_level::byte_to_utf8()[static_cast<unsigned char>(c)];
  return out;
}

// HF's Pattern for a char: every occurrence is a match of its own.
void char_matches(std::string_view text, std::string_view c, std::vector<Span>& out) {
  out.clear();
  std::size_t prev = 0;
  for (std::size_t pos = text.find(c); pos != std::string_view::npos;
       pos = text.find(c, pos + c.size())) {
    if (pos > prev) out.push_back({prev, pos, false});
    out.push_back({pos, pos + c.size(), true});
    prev = pos + c.size();
  }
  if (prev < text.size() || text.empty()) out.push_back({prev, text.size(), false});
}

std::string replace_spaces(std::string_view text, std::string_view replacement) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == ' ') {
      out += replacement;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

void PreTokenizerChain::split(std::string_view text, bool at_start,
                              std::vector<PreTokenPiece>& pieces) const {
  pieces.clear();
  if (text.empty()) return;
  pieces.push_back({std::string(text), at_start});
  std::vector<PreTokenPiece> next;
  std::vector<Span> matches;
  std::vector<Span> kept;
  for (const Step& step : steps_) {
    next.clear();
    for (PreTokenPiece& piece : pieces) {
      std::visit(
          Overloaded{
              [&](const Split& s) {
                s.pattern->find_matches(piece.text, matches);
                if (s.invert) {
                  for (Span& m : matches) m.is_match = !m.is_match;
                }
                apply_behavior(matches, s.behavior, kept);
                emit_spans(piece, kept, next);
              },
              [&](const ByteLevel& b) {
                if (b.add_prefix_space && !piece.text.starts_with(' ')) {
                  piece.text.insert(piece.text.begin(), ' ');
                }
                if (!b.gpt2) {
                  next.push_back({to_byte_level(piece.text), piece.at_start});
                  return;
                }
                const char* const base = piece.text.data();
                b.gpt2->split_valid(piece.text, [&](std::string_view part) {
                  next.push_back({to_byte_level(part), piece.at_start && part.data() == base});
                });
              },
              [&](const Metaspace& m) {
                std::string replaced_text = replace_spaces(piece.text, m.replacement);
                const bool prepend = !replaced_text.starts_with(m.replacement) &&
                                     (m.prepend_scheme == PrependScheme::always ||
                                      (m.prepend_scheme == PrependScheme::first && piece.at_start));
                if (prepend) replaced_text.insert(0, m.replacement);
                const PreTokenPiece replaced{std::move(replaced_text), piece.at_start};
                if (!m.split) {
                  next.push_back(replaced);
                  return;
                }
                char_matches(replaced.text, m.replacement, matches);
                apply_behavior(matches, SplitBehavior::merged_with_next, kept);
                emit_spans(replaced, kept, next);
              },
          },
          step);
    }
    pieces.swap(next);
  }
}

}  // namespace offgen
