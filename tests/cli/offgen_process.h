// Running the real offgen binary from a test: to signal it midway, to limit its file sizes, or to
// see its exit code and what it prints.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace offgen::test {

struct ChildOptions {
  std::filesystem::path log;     // stdout and stderr go here
  std::uint64_t file_limit = 0;  // > 0: RLIMIT_FSIZE, with SIGXFSZ ignored (writes fail: EFBIG)
};

// Starts the offgen binary with `args` in a child whose stop signals have their default action
// (whatever the test runner ignores) and none blocked.
pid_t start_offgen(const std::vector<std::string>& args, const ChildOptions& options);
// The same for any program: command[0] is its path (mpirun, to start offgen on several ranks).
pid_t start_program(const std::vector<std::string>& command, const ChildOptions& options);

// Waits for the child; a generous deadline (a loaded machine is slow), then it is killed.
// Returns the wait status.
int wait_for(pid_t pid);

// The exit code of a wait status (-1 when the child did not exit).
int exit_code(int status);

// Complete lines in `path` (0 when it does not exist).
std::size_t count_lines(const std::filesystem::path& path);

// Waits until `path` has at least `lines` complete lines or the child ends; true in the first case.
bool wait_for_lines(pid_t pid, const std::filesystem::path& path, std::size_t lines);

// Polls `path`, a file the child replaces whole as it works, until `enough(value)` (or 300 s) and
// returns the last value read (null if none). Every read of the file must parse as JSON: a torn
// file is a test failure.
nlohmann::json wait_for_json(const std::filesystem::path& path,
                             const std::function<bool(const nlohmann::json&)>& enough);

// Runs offgen to the end: its exit code and all it printed (stdout and stderr), logged in `log`.
struct Finished {
  int code = -1;
  std::string output;
};
Finished run_offgen(const std::vector<std::string>& args, const std::filesystem::path& log);
Finished run_program(const std::vector<std::string>& command, const std::filesystem::path& log);

}  // namespace offgen::test
