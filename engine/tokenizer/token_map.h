// Token text -> id, looked up by std::string_view without building a std::string.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace offgen {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const {
    return std::hash<std::string_view>{}(text);
  }
};
using TokenMap = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

// Ids index dense tables; a vocabulary with ids past this is corrupt rather than big (the largest
// published ones, LLaMA 3 and Qwen2, have ~150k tokens).
constexpr std::int64_t kMaxTokenId = std::int64_t{1} << 24;

}  // namespace offgen
