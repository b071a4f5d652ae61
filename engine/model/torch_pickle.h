// A restricted unpickler for the data.pkl of a torch.save'd state dict ({name: tensor}). It reads
// the pickle opcodes torch.save emits (protocol 2; protocol 4's FRAME, MEMOIZE, STACK_GLOBAL and
// short strings too) into plain values and never runs anything: the only globals it accepts are
// collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_tensor / _rebuild_parameter
// and the torch.*Storage classes, each interpreted by this reader. Any other global is an error
// naming it, so a pickle that would call os.system or eval when Python loads it is refused.
// Tensor data is not in the pickle: each tensor names a storage (the archive's data/<key> entry).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/core/dtype.h"

namespace offgen {

struct PickledStorage {
  std::string key;             // the archive entry data/<key> holds its bytes
  std::string type;            // "torch.HalfStorage"
  std::optional<DType> dtype;  // none for storage types offgen does not read (torch.LongStorage)
  std::uint64_t numel = 0;     // elements
};

struct PickledTensor {
  std::string name;
  std::string storage_key;
  std::uint64_t storage_offset = 0;  // elements
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // elements
};

struct PickledStateDict {
  std::vector<PickledTensor> tensors;              // in the pickle's order
  std::map<std::string, PickledStorage> storages;  // by key; tied tensors share one
};

// Reads the pickle. Throws offgen::Error naming `where`, the problem and its byte offset: a
// forbidden global, an unknown opcode, a truncated pickle, a value of the wrong kind, a top-level
// object that is not a dict of tensors, or a storage described two ways.
PickledStateDict read_state_dict_pickle(std::span<const std::byte> pickle,
                                        const std::string& where);

}  // namespace offgen
