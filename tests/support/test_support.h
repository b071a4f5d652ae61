// Helpers shared by the test binaries.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace offgen::test {

// tests/data, where golden fixtures and small checkpoints live.
inline std::filesystem::path data_dir() {
  return OFFGEN_TEST_DATA_DIR;
}

// A fresh empty directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Sets an environment variable (or unsets it, for nullopt) for the object's lifetime, then puts
// the old value back. Not thread-safe, as setenv is not: for tests that run alone in a process.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Writes `contents` to `path` (binary), creating parent directories.
void write_file(const std::filesystem::path& path, const std::string& contents);

// The whole file, bytes as they are ("" when it cannot be read).
std::string read_file(const std::filesystem::path& path);

// The message of the offgen::Error `run` throws ("" when it throws none).
std::string error_of(const std::function<void()>& run);

// How many times `what` occurs in `text`.
std::size_t count_of(const std::string& text, const std::string& what);

}  // namespace offgen::test
