// Progress of a batch job on stderr: a bar redrawn in place when stderr is a terminal (requests
// and tokens done, tokens/s, ETA), a log line every few seconds otherwise (a file, CI).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace offgen::cli {

class Progress {
 public:
  // total: requests the job will answer; terminal: draw a bar (default: stderr is a tty).
  explicit Progress(std::size_t total, bool terminal);
  explicit Progress(std::size_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // One more request answered, with the tokens it generated.
  void add(std::uint64_t tokens);
  // Ends the bar's line (also done by the destructor).
  void finish();
  // The status text the bar or log line shows.
  std::string status() const;

 private:
  using Clock = std::chrono::steady_clock;
  void report(bool force);

  std::size_t total_;
  bool terminal_;
  std::size_t done_ = 0;
  std::uint64_t tokens_ = 0;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_report_ = Clock::now();
  bool drawn_ = false;
  bool finished_ = false;
};

}  // namespace offgen::cli
