// Stopping a job (generate, score, bench, compare) cleanly on SIGINT, SIGTERM or SIGHUP. While a
// StopSignals is alive the first such signal only sets a flag (async-signal-safe: an atomic,
// lock-free) and says on stderr that the job is stopping; the job checks the flag between batches
// and decode steps, keeps every result already written and exits with 128 + the signal's number.
// A second signal ends the process at once, as if no handler were installed (the output may then
// end in a torn line, which `--resume` cuts off). A signal that was ignored when the process
// started (nohup, a background job of a non-interactive shell) stays ignored.
#pragma once

#include <csignal>

namespace offgen::cli {

class StopSignals {
 public:
  // The outermost StopSignals clears the flag; one made inside another keeps it.
  StopSignals();
  ~StopSignals();  // restores the handlers it replaced
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Whether a stop signal has arrived since construction.
  static bool requested();
  // The first stop signal received (0 if none).
  static int signal_number();
  // "SIGINT", "SIGTERM", "SIGHUP" (or "signal N").
  static const char* signal_name(int signal);
  // The exit code of a job stopped by `signal`: 128 + its number (130 for SIGINT, 143 for
  // SIGTERM), as shells report a process the signal killed.
  static int exit_code(int signal) { return 128 + signal; }

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction previous_[3] = {};
  bool installed_[3] = {};
};

}  // namespace offgen::cli
