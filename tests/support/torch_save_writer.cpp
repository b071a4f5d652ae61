#include "tests/support/torch_save_writer.h"

#include "tests/support/zip_writer.h"

namespace offgen::test {

PickleWriter& PickleWriter::proto(int version) {
  bytes_.push_back('\x80');
  bytes_.push_back(static_cast<char>(version));
  return *this;
}

PickleWriter& PickleWriter::op(char opcode) {
  bytes_.push_back(opcode);
  return *this;
}

PickleWriter& PickleWriter::global(std::string_view module, std::string_view name) {
  bytes_ += 'c';
  bytes_ += module;
  bytes_ += '\n';
  bytes_ += name;
  bytes_ += '\n';
  return *this;
}

PickleWriter& PickleWriter::string(std::string_view text) {
  bytes_ += 'X';
  append_little_endian<std::uint32_t>(bytes_, static_cast<std::uint32_t>(text.size()));
  bytes_ += text;
  return *this;
}

PickleWriter& PickleWriter::integer(std::int64_t value) {
  if (value >= 0 && value < 256) {
    bytes_ += 'K';
    append_little_endian<std::uint8_t>(bytes_, static_cast<std::uint8_t>(value));
  } else if (value >= INT32_MIN && value <= INT32_MAX) {
    bytes_ += 'J';
    append_little_endian<std::int32_t>(bytes_, static_cast<std::int32_t>(value));
  } else {
    bytes_ += '\x8a';
    bytes_ += '\x08';
    append_little_endian<std::int64_t>(bytes_, value);
  }
  return *this;
}

PickleWriter& PickleWriter::put(std::uint32_t index) {
  return memo('q', 'r', index);
}

PickleWriter& PickleWriter::get(std::uint32_t index) {
  return memo('h', 'j', index);
}

// BINPUT / BINGET take a one-byte index, LONG_BINPUT / LONG_BINGET four bytes.
PickleWriter& PickleWriter::memo(char short_opcode, char long_opcode, std::uint32_t index) {
  if (index < 256) {
    bytes_ += short_opcode;
    append_little_endian<std::uint8_t>(bytes_, static_cast<std::uint8_t>(index));
  } else {
    bytes_ += long_opcode;
    append_little_endian<std::uint32_t>(bytes_, index);
  }
  return *this;
}

PickleWriter& PickleWriter::raw(std::string_view bytes) {
  bytes_ += bytes;
  return *this;
}

std::string torch_state_dict_pickle(const std::vector<TorchTensorSpec>& tensors) {
  PickleWriter w;
  w.proto(2).global("collections", "OrderedDict").put(0).op(')').op('R').put(1).op('(');
  std::uint32_t memo = 2;
  for (const TorchTensorSpec& t : tensors) {
    std::vector<std::int64_t> strides = t.strides;
    if (strides.empty()) {
      std::int64_t step = 1;
      strides.resize(t.shape.size());
      for (std::size_t d = t.shape.size(); d-- > 0;) {
        strides[d] = step;
        step *= t.shape[d];
      }
    }
    w.string(t.name).put(memo++);
    w.global("torch._utils", "_rebuild_tensor_v2").op('(');
    w.op('(').string("storage").global("torch", t.storage_type).string(t.key).string("cpu");
    w.integer(static_cast<std::int64_t>(t.storage_numel)).op('t').op('Q');
    w.integer(static_cast<std::int64_t>(t.offset));
    w.op('(');
    for (const std::int64_t dim : t.shape) w.integer(dim);
    w.op('t').op('(');
    for (const std::int64_t stride : strides) w.integer(stride);
    w.op('t').op('\x89');              // requires_grad = False
    w.get(0).op(')').op('R').op('t');  // backward_hooks = OrderedDict()
    w.op('R').put(memo++);
  }
  w.op('u');
  // state_dict()'s _metadata attribute, restored through BUILD.
  w.op('}').string("_metadata").get(0).op(')').op('R').string("").op('}');
  w.string("version").integer(1).op('s').op('s').op('s').op('b');
  return w.stop().bytes();
}

std::string torch_archive_bytes(const std::string& pickle,
                                const std::vector<std::pair<std::string, std::string>>& storages,
                                const TorchArchiveOptions& options) {
  const std::string folder = options.folder + "/";
  std::vector<ZipEntrySpec> entries = {{folder + "data.pkl", pickle}};
  if (!options.byte_order.empty()) entries.push_back({folder + "byteorder", options.byte_order});
  for (const auto& [key, data] : storages) entries.push_back({folder + "data/" + key, data});
  entries.push_back({folder + "version", "3\n"});
  return zip_bytes(entries, {.zip64 = options.zip64});
}

}  // namespace offgen::test
