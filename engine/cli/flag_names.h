// The CLI's words for the parameters that errors below it name (engine/core/parameter_error.h):
// each parameter is the flag that sets it, so a user reads "--kv-budget 3 cannot hold ..." where
// the engine's own message says "kv_budget 3 cannot hold ...".
#pragma once

#include <string>

#include "engine/core/error.h"
#include "engine/core/parameter_error.h"

namespace offgen::cli {

// "--batch-size", "--weights-cpu", "--gpu-mem", ...
std::string flag_name(Parameter parameter);

// The message of `e` with flag names where it names parameters; else e.what().
std::string flag_message(const Error& e);

// Runs `f`; an error naming parameters is rethrown as its own type (Error, OutOfMemoryError)
// with flag names.
template <typename F>
decltype(auto) naming_flags(F&& f) {
  try {
    return f();
  } catch (const ParameterError<OutOfMemoryError>& e) {
    e.rethrow_naming(flag_name);
  } catch (const ParameterError<Error>& e) {
    e.rethrow_naming(flag_name);
  }
}

}  // namespace offgen::cli
