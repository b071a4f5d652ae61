#include "tests/cli/offgen_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "tests/support/test_support.h"

namespace offgen::test {

pid_t start_offgen(const std::vector<std::string>& args, const ChildOptions& options) {
  std::vector<std::string> all = {OFFGEN_CLI_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  return start_program(all, options);
}

pid_t start_program(const std::vector<std::string>& command, const ChildOptions& options) {
  std::vector<std::string> all = command;
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log = ::open(options.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  EXPECT_GE(log, 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGXFSZ}) ::signal(s, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (options.file_limit > 0) {
      const rlimit limit = {options.file_limit, options.file_limit};
      ::setrlimit(RLIMIT_FSIZE, &limit);
      ::signal(SIGXFSZ, SIG_IGN);  // an ignored signal stays ignored across exec
    }
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log);
  return pid;
}

int wait_for(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "offgen did not finish in time";
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status;
}

int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::size_t count_lines(const std::filesystem::path& path) {
  const std::string text = read_file(path);
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

bool wait_for_lines(pid_t pid, const std::filesystem::path& path, std::size_t lines) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (std::chrono::steady_clock::now() < deadline) {
    if (count_lines(path) >= lines) return true;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      ADD_FAILURE() << "offgen ended before writing " << lines << " lines";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

nlohmann::json wait_for_json(const std::filesystem::path& path,
                             const std::function<bool(const nlohmann::json&)>& enough) {
  nlohmann::json value;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = read_file(path);
    if (!text.empty()) {
      value = nlohmann::json::parse(text, nullptr, false);
      if (value.is_discarded()) {
        ADD_FAILURE() << path << " is not whole JSON: " << text;
        return nullptr;
      }
      if (enough(value)) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return value;
}

Finished run_offgen(const std::vector<std::string>& args, const std::filesystem::path& log) {
  Finished finished;
  finished.code = exit_code(wait_for(start_offgen(args, {log})));
  finished.output = read_file(log);
  return finished;
}

Finished run_program(const std::vector<std::string>& command, const std::filesystem::path& log) {
  Finished finished;
  finished.code = exit_code(wait_for(start_program(command, {log})));
  finished.output = read_file(log);
  return finished;
}

}  // namespace offgen::test
