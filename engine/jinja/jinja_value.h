// The runtime value of the Jinja interpreter: what a Python object is to jinja2. Only the types a
// chat template meets exist: None, bool, int, float, str, the list-likes (list, tuple, dict views,
// range), dict, the attribute objects (namespace(), loop), generators (what select / map / unique
// return in jinja2: single-pass, always true, no len()), functions and jinja2's Undefined.
// Containers are shared and immutable once built (the sandbox forbids mutating them); only an
// Object (a namespace) changes in place, as `{% set ns.x = ... %}` needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace offgen::jinja {

class Value;

// The arguments of a call: Python's *args and **kwargs (keywords in the order written).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using NativeFunction = std::function<Value(CallArgs&)>;

enum class SequenceKind { kList, kTuple, kDictKeys, kDictValues, kDictItems, kRange };

struct Sequence {
  SequenceKind kind = SequenceKind::kList;
  std::vector<Value> items;
  // kRange only: what repr() prints, range(start, stop[, step]).
  std::int64_t range_start = 0;
  std::int64_t range_stop = 0;
  std::int64_t range_step = 1;
};

// A dict keeps insertion order, as Python's does; lookups are linear (template dicts are small).
struct Dict {
  std::vector<std::pair<Value, Value>> entries;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Replaces the value of an existing key or appends the pair.
  void set(Value key, Value value);
};

enum class ObjectKind { kNamespace, kLoop };

// An object whose attributes a template reads with `.name`: namespace() (whose attributes
// `{% set ns.x = ... %}` assigns) or a for loop's `loop`.
struct Object {
  ObjectKind kind = ObjectKind::kNamespace;
  Dict attributes;  // string keys
};

// A generator: eagerly computed items, consumed front to back.
struct Iterator {
  std::string type_name;  // what jinja2's generator is called, for messages
  std::vector<Value> items;
  std::size_t next = 0;
};

struct Function {
  std::string name;
  NativeFunction call;
};

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kSequence,
    kDict,
    kObject,
    kIterator,
    kFunction,
  };

  // Undefined with no explanation; undefined(hint) says why ("'x' is undefined") for the error
  // raised when the template does something with it other than print or test it.
  Value();
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(std::int64_t i);
  static Value floating(double d);
  static Value string(std::string s);
  // A markupsafe.Markup string, what |safe and |escape return: it prints as the string but its
  // repr is Markup('...'), and |escape leaves it alone.
  static Value markup(std::string s);
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value sequence(Sequence sequence);
  static Value dict(Dict dict);
  static Value object(ObjectKind kind, Dict attributes);
  static Value iterator(std::string type_name, std::vector<Value> items);
  static Value function(std::string name, NativeFunction call);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_markup() const { return markup_; }
  // int, float or bool: what Python's arithmetic accepts.
  bool is_number() const;

  const std::string& undefined_hint() const;
  bool as_bool() const { return std::get<bool>(data_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(data_); }
  double as_float() const { return std::get<double>(data_); }
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const Sequence& as_sequence() const { return *std::get<std::shared_ptr<const Sequence>>(data_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  Object& as_object() const { return *std::get<std::shared_ptr<Object>>(data_); }
  Iterator& as_iterator() const { return *std::get<std::shared_ptr<Iterator>>(data_); }
  const Function& as_function() const { return *std::get<std::shared_ptr<const Function>>(data_); }
  // int or bool as an integer (Python's bool is an int).
  std::int64_t as_integral() const;
  // Any number as a double.
  double as_double() const;
  // Whether two values are the same container (Python's `is` for shared containers).
  bool same_object(const Value& other) const;

 private:
  struct Undefined {
    std::string hint;
  };
  struct None {
    bool unused = false;  // not empty: GCC 12 warns about moving an empty alternative
  };
  using Data = std::variant<Undefined, None, bool, std::int64_t, double, std::string,
                            std::shared_ptr<const Sequence>, std::shared_ptr<const Dict>,
                            std::shared_ptr<Object>, std::shared_ptr<Iterator>,
                            std::shared_ptr<const Function>>;
  explicit Value(Data data) : data_(std::move(data)) {}

  Data data_;
  bool markup_ = false;  // a string from |safe / |escape
};

// Bounds the recursion of the operations that walk nested values (repr, ==, <, tojson, the
// context's conversion): a value nested deeper than Python would go, or one that holds itself (a
// namespace can), is a RenderError instead of a stack overflow. One count per thread.
class NestingGuard {
 public:
  NestingGuard();
  ~NestingGuard();
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;
};

// Python's type(x).__name__, for messages ("'int' object is not iterable").
std::string type_name(const Value& value);

// Python's bool(x). Undefined is false; a generator is always true.
bool truthy(const Value& value);

// Python's ==. Numbers compare by value across int / float / bool; Undefined equals Undefined.
bool equal(const Value& a, const Value& b);

// Python's < (a RenderError where Python raises TypeError).
bool less(const Value& a, const Value& b);

// Python's str(x), which `{{ x }}` prints; Undefined prints "".
std::string to_str(const Value& value);

// Python's repr(x), which str() of a container uses for its items.
std::string repr(const Value& value);

// Python's iter(x) drained into a vector: a list-like's items, a dict's keys, a string's
// characters, a generator's remaining items (consuming it); Undefined gives nothing. Anything
// else is a RenderError ("'int' object is not iterable").
std::vector<Value> iterate(const Value& value);

// Whether hash(x) works (dict keys, unique): containers other than tuples of hashables do not.
bool hashable(const Value& value);

}  // namespace offgen::jinja
