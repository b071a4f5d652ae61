// Progress of a batch job on stderr: a bar redrawn in place when stderr is a terminal (requests
// and tokens done, tokens/s, ETA), a log line every few seconds otherwise (a file, CI). Tokens
// count as the engine produces them, step by step (Engine::set_job_progress), so the rate and
// the ETA are right from the first step, not only once whole requests finish.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace offgen::cli {

class Progress {
 public:
  // total: requests the job will answer; expected_tokens: the most tokens it will process (the
  // base of the ETA); terminal: draw a bar (default: stderr is a tty).
  Progress(std::size_t total, std::uint64_t expected_tokens, bool terminal);
  Progress(std::size_t total, std::uint64_t expected_tokens);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // More requests answered (one by default; another rank's, under MPI).
  void add(std::size_t count = 1);
  // More tokens to expect: another rank's share, once it has planned it.
  void expect(std::uint64_t tokens);
  // Tokens the engine processed since the last call (generated, or scored).
  void tokens(std::uint64_t count);
  // Ends the bar's line (also done by the destructor).
  void finish();
  // The status text the bar or log line shows.
  std::string status() const;

 private:
  using Clock = std::chrono::steady_clock;
  void report(bool force);

  std::size_t total_;
  std::uint64_t expected_tokens_;
  bool terminal_;
  std::size_t done_ = 0;
  std::uint64_t tokens_ = 0;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_report_ = Clock::now();
  bool drawn_ = false;
  bool finished_ = false;
};

}  // namespace offgen::cli
