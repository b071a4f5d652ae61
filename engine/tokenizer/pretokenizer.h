// GPT-2 pre-tokenisation: splits text into the pieces BPE runs on, with the regex Hugging Face's
// ByteLevel pre-tokenizer uses (use_regex = true, add_prefix_space = false).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/pcre2_regex.h"

namespace offgen {

class Pretokenizer {
 public:
  // Compiles the pattern, JIT-compiled when `use_jit` and PCRE2 supports it (tests turn it off to
  // check the interpreter gives the same pieces). Throws offgen::Error on failure.
  explicit Pretokenizer(bool use_jit = true);

  // Calls `emit` with each piece of `text`, in order; pieces are non-empty and concatenate to
  // `text`. Valid UTF-8 splits exactly as HF does. Invalid UTF-8 (which HF's str-only API never
  // sees) is a hard boundary: each maximal run of bytes that are not part of a valid character is
  // one piece of its own, and the valid text between such runs splits as HF would split it alone.
  // Thread-safe.
  void split(std::string_view text, const std::function<void(std::string_view)>& emit) const;
  std::vector<std::string> split(std::string_view text) const;

  bool jit() const { return regex_.jit(); }

  // Calls `emit` with each piece of `text`, which must be valid UTF-8 (unchecked).
  void split_valid(std::string_view text, const std::function<void(std::string_view)>& emit) const;

 private:
  Pcre2Regex regex_;
};

}  // namespace offgen
