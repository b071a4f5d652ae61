// A compiled PCRE2 pattern (8-bit code units, UTF-8 subjects), JIT-compiled where PCRE2 can.
// Owns its pcre2_code; matching allocates its own match data per Matcher, so one Pcre2Regex may
// be shared by any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

struct pcre2_real_code_8;        // pcre2_code from <pcre2.h>, kept out of this header
struct pcre2_real_match_data_8;  // pcre2_match_data

namespace offgen {

class Pcre2Regex {
 public:
  struct Match {
    std::size_t begin;
    std::size_t end;
  };

  // Compiles `pattern` with PCRE2 compile `options` (PCRE2_UTF | PCRE2_UCP and the like).
  // Throws offgen::Error "<what>: PCRE2 cannot compile ... at offset N: <why>".
  Pcre2Regex(std::string_view pattern, std::uint32_t options, bool use_jit, std::string_view what);
  ~Pcre2Regex();
  Pcre2Regex(const Pcre2Regex&) = delete;
  Pcre2Regex& operator=(const Pcre2Regex&) = delete;

  bool jit() const { return jit_; }

  // Finds matches in one subject; holds the match data, so keep it on one thread.
  class Matcher {
   public:
    explicit Matcher(const Pcre2Regex& regex);
    ~Matcher();
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;
    // The first match in `text` that starts at or after `start` (a character boundary), looking
    // behind `start` as lookbehinds and \b need. `text` must be valid UTF-8: it is not checked.
    std::optional<Match> find(std::string_view text, std::size_t start);

   private:
    const Pcre2Regex& regex_;
    pcre2_real_match_data_8* data_;
  };

 private:
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
  std::string what_;
};

}  // namespace offgen
