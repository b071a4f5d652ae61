// Writes what torch.save writes, for the torch.save readers' tests: pickles built opcode by
// opcode (PickleWriter), the pickle of a state dict as torch.save emits it, and the zip archive
// around it (data.pkl, byteorder, data/<key> per storage, version).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace offgen::test {

class PickleWriter {
 public:
  PickleWriter& proto(int version = 2);
  PickleWriter& op(char opcode);  // an opcode without operands: '(' MARK, 't' TUPLE, 'R' REDUCE...
  PickleWriter& global(std::string_view module, std::string_view name);  // GLOBAL
  PickleWriter& string(std::string_view text);                           // BINUNICODE
  PickleWriter& integer(std::int64_t value);  // BININT1, BININT or LONG1, as pickle picks
  PickleWriter& put(std::uint32_t index);     // BINPUT / LONG_BINPUT
  PickleWriter& get(std::uint32_t index);     // BINGET / LONG_BINGET
  PickleWriter& raw(std::string_view bytes);
  PickleWriter& stop() { return op('.'); }
  const std::string& bytes() const { return bytes_; }

 private:
  PickleWriter& memo(char short_opcode, char long_opcode, std::uint32_t index);

  std::string bytes_;
};

struct TorchTensorSpec {
  std::string name;
  std::string key;                           // its storage: the entry data/<key>
  std::string storage_type = "HalfStorage";  // torch.<type>
  std::uint64_t storage_numel = 0;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides = {};  // empty: contiguous row-major
  std::uint64_t offset = 0;                // elements into the storage
};

// torch.save's pickle of an OrderedDict of these tensors (with its _metadata, as state_dict()
// has), through _rebuild_tensor_v2 and ('storage', type, key, 'cpu', numel) persistent ids.
std::string torch_state_dict_pickle(const std::vector<TorchTensorSpec>& tensors);

struct TorchArchiveOptions {
  std::string folder = "archive";
  std::string byte_order = "little";  // empty: no byteorder record (torch < 1.10)
  bool zip64 = false;
};

// The archive: <folder>/data.pkl, <folder>/byteorder, <folder>/data/<key> for each storage (its
// raw bytes), <folder>/version.
std::string torch_archive_bytes(const std::string& pickle,
                                const std::vector<std::pair<std::string, std::string>>& storages,
                                const TorchArchiveOptions& options = {});

}  // namespace offgen::test
