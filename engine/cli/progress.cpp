#include "engine/cli/progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace offgen::cli {
namespace {

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

Progress::Progress(std::size_t total, std::uint64_t expected_tokens, bool terminal)
    : total_(total), expected_tokens_(expected_tokens), terminal_(terminal) {}

Progress::Progress(std::size_t total, std::uint64_t expected_tokens)
    : Progress(total, expected_tokens, isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() {
  finish();
}

std::string Progress::status() const {
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  const double rate = seconds > 0 ? static_cast<double>(tokens_) / seconds : 0.0;
  // By tokens: requests finish in bursts (a block at a time), tokens flow every step. The
  // expected tokens are an upper bound (stops end requests early), so the ETA errs long.
  std::string eta = "?";
  if (done_ >= total_) {
    eta = clock_text(0);
  } else if (rate > 0 && expected_tokens_ > 0) {
    const auto left = static_cast<double>(expected_tokens_ - std::min(tokens_, expected_tokens_));
    eta = clock_text(left / rate);
  }
  return fmt::format("{}/{} requests, {} tokens, {:.1f} tokens/s, elapsed {}, ETA {}", done_,
                     total_, tokens_, rate, clock_text(seconds), eta);
}

void Progress::add(std::size_t count) {
  done_ += count;
  report(done_ == total_);
}

void Progress::expect(std::uint64_t tokens) {
  expected_tokens_ += tokens;
}

void Progress::tokens(std::uint64_t count) {
  tokens_ += count;
  report(false);
}

void Progress::report(bool force) {
  const auto now = Clock::now();
  const auto every = terminal_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(10000);
  if (!force && now - last_report_ < every) return;
  last_report_ = now;
  if (!terminal_) {
    spdlog::info("progress: {}", status());
    return;
  }
  constexpr int kWidth = 30;
  const int filled =
      total_ > 0
          ? static_cast<int>(kWidth * static_cast<double>(done_) / static_cast<double>(total_))
          : kWidth;
  std::fprintf(
      stderr, "\r[%s%s] %s\x1b[K", std::string(static_cast<std::size_t>(filled), '#').c_str(),
      std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), status().c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (drawn_) std::fputc('\n', stderr);
}

}  // namespace offgen::cli
