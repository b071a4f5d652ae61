// Shape helpers shared by the weight sources: element counts with overflow checks, and the
// "[128, 64]" spelling every shape error message uses.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace offgen {

// "[128, 64]"; "[]" for a scalar.
std::string format_shape(std::span<const std::int64_t> shape);

// Product of the dims (1 for a scalar); nullopt when a dim is negative or the product overflows.
std::optional<std::int64_t> shape_numel(std::span<const std::int64_t> shape);

// Throws "tensor 'NAME' in WHERE has shape [a, b] but the config needs [c, d]" unless equal.
void check_tensor_shape(std::string_view name, std::string_view where,
                        std::span<const std::int64_t> actual, std::span<const std::int64_t> wanted);

}  // namespace offgen
