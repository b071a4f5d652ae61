#include "engine/model/tensor_shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "engine/core/error.h"

namespace offgen {

std::string format_shape(std::span<const std::int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::optional<std::int64_t> shape_numel(std::span<const std::int64_t> shape) {
  std::int64_t numel = 1;
  for (const std::int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(numel, dim, &numel)) return std::nullopt;
  }
  return numel;
}

void check_tensor_shape(std::string_view name, std::string_view where,
                        std::span<const std::int64_t> actual,
                        std::span<const std::int64_t> wanted) {
  if (std::ranges::equal(actual, wanted)) return;
  fail("tensor '{}' in {} has shape {} but the config needs {}", name, where, format_shape(actual),
       format_shape(wanted));
}

}  // namespace offgen
