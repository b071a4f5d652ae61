// Assertions on error messages, shared by the tests that check what a refusal says.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace offgen::test {

// Success when `message` holds `part`; the failure quotes both.
inline ::testing::AssertionResult Contains(const std::string& message, const std::string& part) {
  if (message.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << part << "\"";
}

}  // namespace offgen::test
