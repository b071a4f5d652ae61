// Decomposition recurses through one-level mappings (Hangul syllables algorithmically), then each
// run of non-starters is stably sorted by combining class; composition is the standard algorithm
// of UAX #15: a character joins the last starter unless a character between them is a starter or
// has a class at least its own. Text that is all ASCII is returned at once.
#include "engine/tokenizer/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/utf8.h"

namespace offgen::unicode {

namespace {

struct CombiningRange {
  std::uint32_t first;
  std::uint32_t last;
  std::uint8_t combining_class;
};

struct Decomposition {
  std::uint32_t code_point;
  std::uint32_t first;
  std::uint32_t second;  // 0: a singleton
  bool composes;
};

#include "engine/tokenizer/unicode_nfc_data.inc"

constexpr std::uint32_t kSBase = 0xAC00;
constexpr std::uint32_t kLBase = 0x1100;
constexpr std::uint32_t kVBase = 0x1161;
constexpr std::uint32_t kTBase = 0x11A7;
constexpr std::uint32_t kLCount = 19;
constexpr std::uint32_t kVCount = 21;
constexpr std::uint32_t kTCount = 28;
constexpr std::uint32_t kNCount = kVCount * kTCount;
constexpr std::uint32_t kSCount = kLCount * kNCount;

std::uint8_t combining_class(std::uint32_t code_point) {
  const auto it = std::upper_bound(
      std::begin(kCombiningClasses), std::end(kCombiningClasses), code_point,
      [](std::uint32_t cp, const CombiningRange& range) { return cp < range.first; });
  if (it == std::begin(kCombiningClasses)) return 0;
  const CombiningRange& range = *std::prev(it);
  return code_point <= range.last ? range.combining_class : 0;
}

const Decomposition* find_decomposition(std::uint32_t code_point) {
  const auto it =
      std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), code_point,
                       [](const Decomposition& d, std::uint32_t cp) { return d.code_point < cp; });
  if (it == std::end(kDecompositions) || it->code_point != code_point) return nullptr;
  return &*it;
}

std::uint64_t pair_key(std::uint32_t first, std::uint32_t second) {
  return (static_cast<std::uint64_t>(first) << 32) | second;
}

const std::unordered_map<std::uint64_t, std::uint32_t>& compositions() {
  static const std::unordered_map<std::uint64_t, std::uint32_t> map = [] {
    std::unordered_map<std::uint64_t, std::uint32_t> m;
    for (const Decomposition& d : kDecompositions) {
      if (d.composes) m.emplace(pair_key(d.first, d.second), d.code_point);
    }
    return m;
  }();
  return map;
}

void decompose(std::uint32_t code_point, std::vector<std::uint32_t>& out) {
  if (code_point >= kSBase && code_point < kSBase + kSCount) {
    const std::uint32_t s = code_point - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const Decomposition* d = find_decomposition(code_point);
  if (d == nullptr) {
    out.push_back(code_point);
    return;
  }
  decompose(d->first, out);
  if (d->second != 0) decompose(d->second, out);
}

std::vector<std::uint32_t> decomposed(std::string_view text) {
  std::vector<std::uint32_t> out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) decompose(utf8::next_code_point(text, pos), out);
  // Canonical ordering: each run of non-starters, stably sorted by class.
  std::size_t i = 0;
  while (i < out.size()) {
    if (combining_class(out[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < out.size() && combining_class(out[j]) != 0) ++j;
    std::stable_sort(
        out.begin() + static_cast<std::ptrdiff_t>(i), out.begin() + static_cast<std::ptrdiff_t>(j),
        [](std::uint32_t a, std::uint32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  return out;
}

std::optional<std::uint32_t> compose_pair(std::uint32_t first, std::uint32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase &&
      second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const auto& map = compositions();
  const auto it = map.find(pair_key(first, second));
  if (it == map.end()) return std::nullopt;
  return it->second;
}

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::string encode(const std::vector<std::uint32_t>& code_points) {
  std::string out;
  out.reserve(code_points.size() * 2);
  for (const std::uint32_t cp : code_points) utf8::append_code_point(out, cp);
  return out;
}

}  // namespace

std::string nfd(std::string_view text) {
  if (is_ascii(text)) return std::string(text);
  return encode(decomposed(text));
}

std::string nfc(std::string_view text) {
  if (is_ascii(text)) return std::string(text);
  const std::vector<std::uint32_t> code_points = decomposed(text);
  std::vector<std::uint32_t> out;
  out.reserve(code_points.size());
  std::optional<std::size_t> starter;  // index in `out` of the last starter
  int last_class = -1;                 // class of the last character after it; -1: none
  for (const std::uint32_t cp : code_points) {
    const int klass = combining_class(cp);
    if (starter && (last_class < klass || (last_class == -1 && klass == 0))) {
      if (const auto composite = compose_pair(out[*starter], cp)) {
        out[*starter] = *composite;
        continue;
      }
    }
    if (klass == 0) {
      starter = out.size();
      last_class = -1;
    } else {
      last_class = klass;
    }
    out.push_back(cp);
  }
  return encode(out);
}

}  // namespace offgen::unicode
