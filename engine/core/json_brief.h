// A JSON value as an error message quotes it: short, so a hostile or huge field cannot flood the
// message, and safe for strings that are not UTF-8 (dump() would throw on them).
#pragma once

#include <string>

namespace offgen {

// Json: nlohmann::json or nlohmann::ordered_json.
template <typename Json>
std::string json_brief(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

}  // namespace offgen
