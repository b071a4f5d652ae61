#include "engine/model/torch_pickle.h"

#include <fmt/format.h>

#include <deque>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "engine/core/error.h"
#include "engine/model/little_endian.h"

namespace offgen {
namespace {

// A real state dict's pickle is a few hundred KiB (about 100 bytes and a dozen objects per
// tensor); these bounds only stop a hostile file from making the reader allocate without limit.
constexpr std::size_t kMaxPickleBytes = std::size_t{64} << 20;
constexpr std::size_t kMaxObjects = std::size_t{1} << 21;
constexpr std::size_t kMaxGlobalNameBytes = 256;

// The opcodes read (Python's Lib/pickle.py names); every other one is an error.
enum Opcode : std::uint8_t {
  kMark = '(',
  kStop = '.',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNone = 'N',
  kBinPersId = 'Q',
  kReduce = 'R',
  kBinUnicode = 'X',
  kAppend = 'a',
  kBuild = 'b',
  kGlobal = 'c',
  kDict = 'd',
  kEmptyDict = '}',
  kAppends = 'e',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kList = 'l',
  kEmptyList = ']',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kEmptyTuple = ')',
  kSetItems = 'u',
  kProto = 0x80,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kStackGlobal = 0x93,
  kMemoize = 0x94,
  kFrame = 0x95,
};

enum class Kind { none, boolean, integer, string, tuple, list, dict, global, storage, tensor };

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::none:
      return "None";
    case Kind::boolean:
      return "bool";
    case Kind::integer:
      return "int";
    case Kind::string:
      return "str";
    case Kind::tuple:
      return "tuple";
    case Kind::list:
      return "list";
    case Kind::dict:
      return "dict";
    case Kind::global:
      return "global";
    case Kind::storage:
      return "storage";
    case Kind::tensor:
      return "tensor";
  }
  return "?";
}

// The globals a state dict needs; the reader interprets each itself.
enum class Callable { ordered_dict, rebuild_tensor, rebuild_tensor_v2, rebuild_parameter, storage };

struct KnownGlobal {
  std::string_view name;
  Callable callable;
  std::optional<DType> dtype;  // storages: the element type, if offgen reads it
};

constexpr KnownGlobal kKnownGlobals[] = {
    {"collections.OrderedDict", Callable::ordered_dict, std::nullopt},
    {"torch._utils._rebuild_tensor", Callable::rebuild_tensor, std::nullopt},
    {"torch._utils._rebuild_tensor_v2", Callable::rebuild_tensor_v2, std::nullopt},
    {"torch._utils._rebuild_parameter", Callable::rebuild_parameter, std::nullopt},
    {"torch.HalfStorage", Callable::storage, DType::f16},
    {"torch.BFloat16Storage", Callable::storage, DType::bf16},
    {"torch.FloatStorage", Callable::storage, DType::f32},
    // Known, so the error names the tensor and its type rather than calling the file hostile.
    {"torch.DoubleStorage", Callable::storage, std::nullopt},
    {"torch.LongStorage", Callable::storage, std::nullopt},
    {"torch.IntStorage", Callable::storage, std::nullopt},
    {"torch.ShortStorage", Callable::storage, std::nullopt},
    {"torch.CharStorage", Callable::storage, std::nullopt},
    {"torch.ByteStorage", Callable::storage, std::nullopt},
    {"torch.BoolStorage", Callable::storage, std::nullopt},
};

// A name from the file as messages show it: the file may hold a megabyte-long one.
std::string shown(std::string_view text) {
  return text.size() <= 100 ? std::string(text) : std::string(text.substr(0, 97)) + "...";
}

struct Value {
  Kind kind = Kind::none;
  std::int64_t integer = 0;                        // integer, boolean
  std::string text;                                // string; global: "module.name"
  const KnownGlobal* global = nullptr;             // global
  std::vector<Value*> items;                       // tuple, list
  std::vector<std::pair<Value*, Value*>> entries;  // dict
  const PickledStorage* storage = nullptr;         // storage; tensor: the one it views
  PickledTensor tensor;                            // tensor (name left empty)
};

class Unpickler {
 public:
  Unpickler(std::span<const std::byte> bytes, const std::string& where)
      : bytes_(bytes), where_(where) {}

  PickledStateDict run() {
    if (bytes_.size() > kMaxPickleBytes) {
      error("it is {} bytes; a state dict's pickle is far smaller (offgen reads up to {})",
            bytes_.size(), kMaxPickleBytes);
    }
    while (true) {
      op_start_ = pos_;
      if (pos_ == bytes_.size()) error("the pickle ends without STOP: is the file truncated?");
      const auto op = read<std::uint8_t>();
      if (op == kStop) return state_dict(*pop(op));
      step(op);
    }
  }

 private:
  template <typename... Args>
  [[noreturn]] void error(fmt::format_string<Args...> format, Args&&... args) const {
    fail("{}: {} (pickle byte {})", where_, fmt::format(format, std::forward<Args>(args)...),
         op_start_);
  }

  std::span<const std::byte> take(std::uint64_t count) {
    if (count > bytes_.size() - pos_) error("the pickle ends inside an opcode: is it truncated?");
    const auto span = bytes_.subspan(pos_, static_cast<std::size_t>(count));
    pos_ += static_cast<std::size_t>(count);
    return span;
  }
  template <typename T>
  T read() {
    return load_little_endian<T>(take(sizeof(T)).data());
  }
  std::string read_string(std::uint64_t length) {
    const auto span = take(length);
    return {reinterpret_cast<const char*>(span.data()), span.size()};
  }
  // GLOBAL's operands: text up to a newline.
  std::string read_line() {
    std::string line;
    while (true) {
      const auto c = static_cast<char>(read<std::uint8_t>());
      if (c == '\n') return line;
      if (line.size() == kMaxGlobalNameBytes)
        error("a GLOBAL name runs past {} bytes", line.size());
      line.push_back(c);
    }
  }

  Value* make(Kind kind) {
    if (objects_.size() == kMaxObjects) {
      error("it holds more than {} objects; a state dict needs about a dozen per tensor",
            kMaxObjects);
    }
    Value& value = objects_.emplace_back();
    value.kind = kind;
    return &value;
  }
  Value* make_integer(std::int64_t integer, Kind kind = Kind::integer) {
    Value* value = make(kind);
    value->integer = integer;
    return value;
  }
  void push(Value* value) { stack_.push_back(value); }
  // The stack below the innermost MARK belongs to the enclosing frame, as in Python's unpickler.
  Value* pop(std::uint8_t op) {
    const std::size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) error("opcode 0x{:02x} finds no value on the stack", op);
    Value* value = stack_.back();
    stack_.pop_back();
    return value;
  }
  Value* top(std::uint8_t op) {
    Value* value = pop(op);
    push(value);
    return value;
  }
  std::vector<Value*> pop_to_mark(std::uint8_t op) {
    if (marks_.empty()) error("opcode 0x{:02x} finds no MARK", op);
    const std::size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<Value*> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }
  Value* expect(Value* value, Kind kind, std::string_view what) const {
    if (value->kind != kind)
      error("{} is a {}, not a {}", what, kind_name(value->kind), kind_name(kind));
    return value;
  }
  Value* sequence(Kind kind, std::vector<Value*> items) {
    Value* value = make(kind);
    value->items = std::move(items);
    return value;
  }
  void add_pairs(Value* dict, const std::vector<Value*>& items) {
    if (items.size() % 2 != 0)
      error("a dict is given {} keys and values, an odd count", items.size());
    for (std::size_t i = 0; i < items.size(); i += 2)
      dict->entries.emplace_back(items[i], items[i + 1]);
  }
  void memo_put(std::uint32_t index, std::uint8_t op) { memo_[index] = top(op); }
  void memo_get(std::uint32_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) error("memo entry {} is read before it is written", index);
    push(it->second);
  }

  void step(std::uint8_t op) {
    switch (op) {
      case kProto:
        if (const auto protocol = read<std::uint8_t>(); protocol > 5) {
          error("pickle protocol {} is newer than any Python writes (5)", protocol);
        }
        return;
      case kFrame:
        read<std::uint64_t>();  // a length hint only
        return;
      case kMark:
        marks_.push_back(stack_.size());
        return;
      case kEmptyDict:
        return push(make(Kind::dict));
      case kEmptyList:
        return push(make(Kind::list));
      case kEmptyTuple:
        return push(make(Kind::tuple));
      case kNone:
        return push(make(Kind::none));
      case kNewTrue:
        return push(make_integer(1, Kind::boolean));
      case kNewFalse:
        return push(make_integer(0, Kind::boolean));
      case kBinInt:
        return push(make_integer(static_cast<std::int32_t>(read<std::uint32_t>())));
      case kBinInt1:
        return push(make_integer(read<std::uint8_t>()));
      case kBinInt2:
        return push(make_integer(read<std::uint16_t>()));
      case kLong1:
        return push(make_integer(read_long1()));
      case kBinUnicode:
        return push_string(read<std::uint32_t>());
      case kShortBinUnicode:
        return push_string(read<std::uint8_t>());
      case kBinUnicode8:
        return push_string(read<std::uint64_t>());
      case kBinPut:
        return memo_put(read<std::uint8_t>(), op);
      case kLongBinPut:
        return memo_put(read<std::uint32_t>(), op);
      case kMemoize:
        return memo_put(static_cast<std::uint32_t>(memo_.size()), op);
      case kBinGet:
        return memo_get(read<std::uint8_t>());
      case kLongBinGet:
        return memo_get(read<std::uint32_t>());
      default:
        return step_structure(op);
    }
  }

  void step_structure(std::uint8_t op) {
    switch (op) {
      case kTuple:
        return push(sequence(Kind::tuple, pop_to_mark(op)));
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        std::vector<Value*> items(op - kTuple1 + 1);
        for (auto it = items.rbegin(); it != items.rend(); ++it) *it = pop(op);
        return push(sequence(Kind::tuple, std::move(items)));
      }
      case kList:
        return push(sequence(Kind::list, pop_to_mark(op)));
      case kDict: {
        const std::vector<Value*> items = pop_to_mark(op);
        Value* dict = make(Kind::dict);
        add_pairs(dict, items);
        return push(dict);
      }
      case kAppend: {
        Value* item = pop(op);
        expect(top(op), Kind::list, "APPEND's target")->items.push_back(item);
        return;
      }
      case kAppends: {
        const std::vector<Value*> items = pop_to_mark(op);
        Value* list = expect(top(op), Kind::list, "APPENDS's target");
        list->items.insert(list->items.end(), items.begin(), items.end());
        return;
      }
      case kSetItem: {
        Value* value = pop(op);
        Value* key = pop(op);
        add_pairs(expect(top(op), Kind::dict, "SETITEM's target"), {key, value});
        return;
      }
      case kSetItems: {
        const std::vector<Value*> items = pop_to_mark(op);
        add_pairs(expect(top(op), Kind::dict, "SETITEMS's target"), items);
        return;
      }
      case kGlobal: {
        std::string module = read_line();
        const std::string name = read_line();
        return push(global(module + "." + name));
      }
      case kStackGlobal: {
        const Value* name = expect(pop(op), Kind::string, "STACK_GLOBAL's name");
        const Value* module = expect(pop(op), Kind::string, "STACK_GLOBAL's module");
        return push(global(module->text + "." + name->text));
      }
      case kReduce: {
        Value* args = expect(pop(op), Kind::tuple, "REDUCE's arguments");
        Value* callable = expect(pop(op), Kind::global, "REDUCE's callable");
        return push(reduce(*callable->global, *args));
      }
      case kBuild:
        // OrderedDict's instance attributes (a state dict's _metadata): not needed.
        pop(op);
        expect(top(op), Kind::dict, "BUILD's target");
        return;
      case kBinPersId:
        return push(persistent_storage(*expect(pop(op), Kind::tuple, "a persistent id")));
      default:
        error("unsupported pickle opcode 0x{:02x}: torch.save does not write it", op);
    }
  }

  std::int64_t read_long1() {
    const auto length = read<std::uint8_t>();
    if (length > 8) error("an integer of {} bytes does not fit in 64 bits", length);
    const auto span = take(length);
    std::uint64_t value = 0;
    for (std::size_t i = length; i-- > 0;)
      value = (value << 8) | std::to_integer<std::uint64_t>(span[i]);
    if (length > 0 && length < 8 && (std::to_integer<std::uint8_t>(span[length - 1]) & 0x80) != 0) {
      value |= ~std::uint64_t{0} << (8 * length);  // sign-extend
    }
    return static_cast<std::int64_t>(value);
  }

  void push_string(std::uint64_t length) {
    Value* value = make(Kind::string);
    value->text = read_string(length);
    push(value);
  }

  Value* global(const std::string& name) {
    for (const KnownGlobal& known : kKnownGlobals) {
      if (known.name == name) {
        Value* value = make(Kind::global);
        value->text = name;
        value->global = &known;
        return value;
      }
    }
    error(
        "refusing global '{}': a state dict needs only collections.OrderedDict, "
        "torch._utils._rebuild_tensor_v2 and torch storage types, and Python would run this one "
        "when unpickling the file. offgen reads state dicts of tensors only and ran nothing",
        shown(name));
  }

  Value* reduce(const KnownGlobal& callable, const Value& args) {
    switch (callable.callable) {
      case Callable::ordered_dict:
        if (!args.items.empty())
          error("OrderedDict is called with {} arguments", args.items.size());
        return make(Kind::dict);
      case Callable::rebuild_tensor:
      case Callable::rebuild_tensor_v2: {
        // (storage, storage_offset, size, stride[, requires_grad, backward_hooks[, metadata]])
        const std::size_t most = callable.callable == Callable::rebuild_tensor ? 4 : 7;
        if (args.items.size() < 4 || args.items.size() > most) {
          error("{} is called with {} arguments", callable.name, args.items.size());
        }
        return rebuild_tensor(args);
      }
      case Callable::rebuild_parameter:
        // (data, requires_grad, backward_hooks): a Parameter is its data here.
        if (args.items.size() != 3) {
          error("{} is called with {} arguments", callable.name, args.items.size());
        }
        return expect(args.items[0], Kind::tensor, "a parameter's data");
      case Callable::storage:
        error("{} is called directly; torch.save refers to storages by persistent id",
              callable.name);
    }
    error("unknown callable");
  }

  std::vector<std::int64_t> integers(Value* tuple, std::string_view what) {
    std::vector<std::int64_t> out;
    for (const Value* item : expect(tuple, Kind::tuple, what)->items) {
      if (item->kind != Kind::integer || item->integer < 0) {
        error("{} holds a {} where a non-negative int belongs", what, kind_name(item->kind));
      }
      out.push_back(item->integer);
    }
    return out;
  }

  Value* rebuild_tensor(const Value& args) {
    Value* tensor = make(Kind::tensor);
    tensor->storage = expect(args.items[0], Kind::storage, "a tensor's storage")->storage;
    const Value* offset = expect(args.items[1], Kind::integer, "a tensor's storage offset");
    if (offset->integer < 0) error("a tensor's storage offset is negative ({})", offset->integer);
    tensor->tensor.storage_key = tensor->storage->key;
    tensor->tensor.storage_offset = static_cast<std::uint64_t>(offset->integer);
    tensor->tensor.shape = integers(args.items[2], "a tensor's size");
    tensor->tensor.strides = integers(args.items[3], "a tensor's stride");
    if (tensor->tensor.shape.size() != tensor->tensor.strides.size()) {
      error("a tensor has {} sizes but {} strides", tensor->tensor.shape.size(),
            tensor->tensor.strides.size());
    }
    return tensor;
  }

  // ('storage', storage type, key, location, numel): torch.save's reference to data/<key>.
  Value* persistent_storage(const Value& id) {
    const auto& items = id.items;
    if (items.size() != 5 || items[0]->kind != Kind::string || items[0]->text != "storage") {
      error("a persistent id is not ('storage', type, key, location, numel)");
    }
    const Value* type = expect(items[1], Kind::global, "a storage's type");
    if (type->global->callable != Callable::storage) {
      error("a storage's type is {}, not a torch storage type", type->text);
    }
    const std::string& key = expect(items[2], Kind::string, "a storage's key")->text;
    expect(items[3], Kind::string, "a storage's location");
    const Value* numel = expect(items[4], Kind::integer, "a storage's size");
    if (numel->integer < 0) error("storage '{}' has a negative size", shown(key));
    const PickledStorage storage{key, type->text, type->global->dtype,
                                 static_cast<std::uint64_t>(numel->integer)};
    const auto [it, inserted] = storages_.emplace(key, storage);
    if (!inserted && (it->second.type != storage.type || it->second.numel != storage.numel)) {
      error("storage '{}' is described twice: as {} of {} elements and as {} of {}", shown(key),
            it->second.type, it->second.numel, storage.type, storage.numel);
    }
    Value* value = make(Kind::storage);
    value->storage = &it->second;
    return value;
  }

  PickledStateDict state_dict(const Value& result) {
    if (result.kind != Kind::dict) {
      error("the pickled object is a {}, not a state dict ({{name: tensor}})",
            kind_name(result.kind));
    }
    PickledStateDict out;
    std::map<std::string_view, bool> seen;
    for (const auto& [key, value] : result.entries) {
      if (key->kind != Kind::string)
        error("a state dict key is a {}, not a str", kind_name(key->kind));
      if (value->kind != Kind::tensor) {
        error(
            "entry '{}' is a {}, not a tensor: offgen reads state dicts ({{name: tensor}}) as "
            "save_pretrained writes them, not training checkpoints",
            shown(key->text), kind_name(value->kind));
      }
      if (!seen.emplace(key->text, true).second)
        error("tensor '{}' appears twice", shown(key->text));
      PickledTensor tensor = value->tensor;
      tensor.name = key->text;
      out.tensors.push_back(std::move(tensor));
    }
    for (const PickledTensor& tensor : out.tensors) {
      out.storages.emplace(tensor.storage_key, storages_.at(tensor.storage_key));
    }
    return out;
  }

  std::span<const std::byte> bytes_;
  const std::string& where_;
  std::size_t pos_ = 0;
  std::size_t op_start_ = 0;
  std::deque<Value> objects_;  // every value; the stack, memo and containers point into it
  std::vector<Value*> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint32_t, Value*> memo_;
  std::map<std::string, PickledStorage> storages_;
};

}  // namespace

PickledStateDict read_state_dict_pickle(std::span<const std::byte> pickle,
                                        const std::string& where) {
  return Unpickler(pickle, where).run();
}

}  // namespace offgen
