// A value inside a parsed JSON file together with where it is ("dir/tokenizer.json:
// pre_tokenizer.pretokenizers[0]"), so that every error names the file and the place. Refers to
// the parsed json, which must outlive it.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "engine/core/error.h"

namespace offgen {

class JsonNode {
 public:
  // `file` names the file; `path` is the place in it ("" for the root).
  JsonNode(const nlohmann::json& value, std::string file, std::string path = "")
      : value_(&value), file_(std::move(file)), path_(std::move(path)) {}

  const nlohmann::json& value() const { return *value_; }
  // "file: path", or "file" at the root.
  std::string where() const { return path_.empty() ? file_ : file_ + ": " + path_; }

  // The member `key` of an object; an error if it is missing.
  JsonNode at(std::string_view key) const;
  // The member `key` of an object, or nullopt if it is missing or null.
  std::optional<JsonNode> find(std::string_view key) const;
  // Element `i` of an array.
  JsonNode operator[](std::size_t i) const;
  // Elements of an array; an error for anything else.
  std::size_t size() const;

  std::string string() const;
  bool boolean() const;
  double number() const;
  std::size_t size_value() const;  // a non-negative integer
  std::string type() const;        // the "type" member of an object

  template <typename... Args>
  [[noreturn]] void error(fmt::format_string<Args...> format, Args&&... args) const {
    fail("{}: {}", where(), fmt::format(format, std::forward<Args>(args)...));
  }
  [[noreturn]] void unsupported(std::string_view component, std::string_view type,
                                std::string_view supported) const;

 private:
  const nlohmann::json* value_;
  std::string file_;
  std::string path_;
};

}  // namespace offgen
