// Errors: every failure a user can cause or meet becomes an offgen::Error whose message says what
// went wrong and, where it can, which file / line / tensor and what to do about it.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace offgen {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A device tier ran out of its byte budget. Distinct so callers can report "does not fit".
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace offgen

// Checks an invariant that bad input can break; throws offgen::Error with the formatted message.
#define OFFGEN_CHECK(cond, ...)               \
  do {                                        \
    if (!(cond)) ::offgen::fail(__VA_ARGS__); \
  } while (0)
