// The usual visitor helper for std::visit over a std::variant: one lambda per alternative, so a
// new alternative that no lambda handles is a compile error.
#pragma once

namespace offgen {

template <typename... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <typename... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace offgen
