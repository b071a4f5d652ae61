#include "engine/cli/signals.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

namespace offgen::cli {
namespace {

// The first stop signal's number; only ever touched through lock-free atomic operations, which
// are async-signal-safe.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
// StopSignals alive (a job's inner guard inside an outer one keeps a signal the outer caught).
int g_depth = 0;

constexpr char kStopping[] =
    "\noffgen: stopping: the work in flight (a batch's unfinished requests, a bench row, a "
    "compare cell) is dropped, every finished result is kept (a second signal quits at once)\n";

extern "C" void on_stop_signal(int signal) {
  int none = 0;
  if (g_stop_signal.compare_exchange_strong(none, signal)) {
    // write(2) is async-signal-safe; there is nothing to do if stderr is gone.
    [[maybe_unused]] const ssize_t written =
        ::write(STDERR_FILENO, kStopping, sizeof kStopping - 1);
    return;
  }
  // A second signal: the default action (terminate). The signal is blocked while its handler
  // runs, so it is delivered as soon as this returns.
  struct sigaction fallback = {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  ::sigaction(signal, &fallback, nullptr);
  ::raise(signal);
}

}  // namespace

StopSignals::StopSignals() {
  if (g_depth++ == 0) g_stop_signal.store(0);
  for (int i = 0; i < 3; ++i) {
    struct sigaction current = {};
    if (::sigaction(kSignals[i], nullptr, &current) != 0) continue;
    if (current.sa_handler == SIG_IGN) continue;  // nohup and background jobs keep ignoring it
    struct sigaction handler = {};
    handler.sa_handler = on_stop_signal;
    sigemptyset(&handler.sa_mask);
    handler.sa_flags = SA_RESTART;  // a write interrupted by the signal goes on
    installed_[i] = ::sigaction(kSignals[i], &handler, &previous_[i]) == 0;
  }
}

StopSignals::~StopSignals() {
  --g_depth;
  for (int i = 0; i < 3; ++i) {
    if (installed_[i]) ::sigaction(kSignals[i], &previous_[i], nullptr);
  }
}

bool StopSignals::requested() {
  return g_stop_signal.load() != 0;
}

int StopSignals::signal_number() {
  return g_stop_signal.load();
}

const char* StopSignals::signal_name(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

}  // namespace offgen::cli
