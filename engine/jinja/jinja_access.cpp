// See jinja_access.h. The order of the two lookups is jinja2's (Environment.getattr tries the
// attribute first, getitem the item first), which is why `message.content` reads the key but
// `message.items` is the dict method.
#include "engine/jinja/jinja_access.h"

#include <algorithm>
#include <array>

#include "engine/jinja/jinja_error.h"
#include "engine/jinja/jinja_number.h"
#include "engine/jinja/jinja_operators.h"
#include "engine/jinja/jinja_text.h"

namespace offgen::jinja {

namespace {

// How jinja2 names an object in "has no attribute" messages.
std::string describe(const Value& object) {
  if (object.is_none()) return "None";
  return fmt::format("'{} object'", type_name(object));
}

Value missing_attribute(const Value& object, std::string_view name) {
  return Value::undefined(fmt::format("{} has no attribute '{}'", describe(object), name));
}

// Python attributes of numbers that offgen does not model (x.real, x.is_integer(), ...).
void refuse_number_attribute(const Value& object, std::string_view name) {
  static constexpr std::array<std::string_view, 12> kNames = {
      "real",      "imag",     "numerator",  "denominator",      "conjugate", "bit_length",
      "bit_count", "to_bytes", "is_integer", "as_integer_ratio", "hex",       "from_bytes"};
  if (std::find(kNames.begin(), kNames.end(), name) != kNames.end()) {
    render_fail("the attribute '{}' of {} is not supported", name, describe(object));
  }
}

// An index into a sequence of `size` items (negative counts from the end), or nullopt.
std::optional<std::size_t> python_index(std::int64_t index, std::size_t size) {
  const auto n = static_cast<std::int64_t>(size);
  if (index < 0) index += n;
  if (index < 0 || index >= n) return std::nullopt;
  return static_cast<std::size_t>(index);
}

// Python's PySlice_AdjustIndices: the start and stop indices of a slice of `size` items.
struct SliceBounds {
  std::int64_t first;
  std::int64_t last;
};

SliceBounds adjust_slice(std::size_t size, const Value& start, const Value& stop,
                         std::int64_t step) {
  const auto n = static_cast<std::int64_t>(size);
  const auto adjust = [&](const Value& bound, std::int64_t omitted) {
    if (bound.is_none()) return omitted;
    std::int64_t i = bound.as_integral();
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  return {adjust(start, step < 0 ? n - 1 : 0), adjust(stop, step < 0 ? -1 : n)};
}

// The indices a slice visits.
std::vector<std::size_t> slice_indices(std::size_t size, const Value& start, const Value& stop,
                                       std::int64_t step) {
  const SliceBounds b = adjust_slice(size, start, stop, step);
  std::vector<std::size_t> indices;
  for (std::int64_t i = b.first; step > 0 ? i < b.last : i > b.last; i += step) {
    indices.push_back(static_cast<std::size_t>(i));
  }
  return indices;
}

bool is_int_or_none(const Value& v) {
  return v.is_none() || v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool;
}

}  // namespace

Value get_attribute(const Value& object, std::string_view name) {
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      fail_undefined(object);
    case Value::Kind::kDict:
      if (auto method = find_method(object, name)) return *method;
      if (const Value* v = object.as_dict().find(name)) return *v;
      return missing_attribute(object, name);
    case Value::Kind::kString:
    case Value::Kind::kSequence:
      if (auto method = find_method(object, name)) return *method;
      return missing_attribute(object, name);
    case Value::Kind::kObject:
      if (const Value* v = object.as_object().attributes.find(name)) return *v;
      return missing_attribute(object, name);
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
      refuse_number_attribute(object, name);
      return missing_attribute(object, name);
    case Value::Kind::kNone:
    case Value::Kind::kIterator:
    case Value::Kind::kFunction:
      return missing_attribute(object, name);
  }
  return missing_attribute(object, name);
}

Value get_item(const Value& object, const Value& key) {
  const bool int_key = key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool;
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      fail_undefined(object);
    case Value::Kind::kDict:
      if (hashable(key)) {
        if (const Value* v = object.as_dict().find(key)) return *v;
      }
      break;
    case Value::Kind::kSequence: {
      const Sequence& s = object.as_sequence();
      const bool subscriptable = s.kind == SequenceKind::kList || s.kind == SequenceKind::kTuple ||
                                 s.kind == SequenceKind::kRange;
      if (subscriptable && int_key) {
        if (const auto i = python_index(key.as_integral(), s.items.size())) return s.items[*i];
        return Value::undefined(
            fmt::format("{} object has no element {}", type_name(object), key.as_integral()));
      }
      break;
    }
    case Value::Kind::kString:
      if (int_key) {
        const std::u32string u = text::decode(object.as_string());
        if (const auto i = python_index(key.as_integral(), u.size())) {
          std::string one = text::encode(std::u32string_view(u).substr(*i, 1));
          return object.is_markup() ? Value::markup(std::move(one)) : Value::string(std::move(one));
        }
        return Value::undefined(fmt::format("str object has no element {}", key.as_integral()));
      }
      break;
    case Value::Kind::kObject:
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kIterator:
    case Value::Kind::kFunction:
      break;
  }
  // The item is missing: jinja2 falls back to the attribute of that name.
  if (key.is_string()) return get_attribute(object, key.as_string());
  return Value::undefined(fmt::format("{} has no element {}", describe(object), repr(key)));
}

Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (object.is_undefined()) fail_undefined(object);
  const bool sliceable =
      object.is_string() || (object.kind() == Value::Kind::kSequence &&
                             (object.as_sequence().kind == SequenceKind::kList ||
                              object.as_sequence().kind == SequenceKind::kTuple ||
                              object.as_sequence().kind == SequenceKind::kRange));
  // jinja2 compiles a slice to Python's own subscript, not environment.getitem: failures are
  // Python's TypeErrors, not an Undefined.
  if (!sliceable) render_fail("'{}' object is not subscriptable by a slice", type_name(object));
  if (!is_int_or_none(start) || !is_int_or_none(stop) || !is_int_or_none(step)) {
    render_fail("slice indices must be integers or None or have an __index__ method");
  }
  const std::int64_t stride = step.is_none() ? 1 : step.as_integral();
  if (stride == 0) render_fail("slice step cannot be zero");
  if (object.is_string()) {
    const std::u32string u = text::decode(object.as_string());
    std::u32string out;
    for (const std::size_t i : slice_indices(u.size(), start, stop, stride)) out.push_back(u[i]);
    return object.is_markup() ? Value::markup(text::encode(out)) : Value::string(text::encode(out));
  }
  const Sequence& s = object.as_sequence();
  Sequence out{s.kind, {}};
  if (s.kind == SequenceKind::kRange) {
    // A slice of a range is a range: range(start + first * step, start + last * step, step * k).
    const SliceBounds b = adjust_slice(s.items.size(), start, stop, stride);
    out.range_start = checked_add(s.range_start, checked_mul(b.first, s.range_step));
    out.range_stop = checked_add(s.range_start, checked_mul(b.last, s.range_step));
    out.range_step = checked_mul(s.range_step, stride);
  }
  for (const std::size_t i : slice_indices(s.items.size(), start, stop, stride)) {
    out.items.push_back(s.items[i]);
  }
  return Value::sequence(std::move(out));
}

}  // namespace offgen::jinja
