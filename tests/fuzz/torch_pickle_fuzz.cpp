// Fuzzes the restricted unpickler with a data.pkl's bytes: opcodes, memo, marks, globals, the
// state dict's shape. An accepted pickle describes only tensors whose storage it described, with as
// many strides as sizes; anything else must fail with offgen::Error (never a crash, a hang or an
// unbounded allocation).
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/core/error.h"
#include "engine/model/torch_pickle.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  offgen::PickledStateDict dict;
  try {
    dict = offgen::read_state_dict_pickle(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz");
  } catch (const offgen::Error&) {
    return 0;
  }
  for (const offgen::PickledTensor& tensor : dict.tensors) {
    OFFGEN_FUZZ_EXPECT(dict.storages.contains(tensor.storage_key), tensor.name);
    OFFGEN_FUZZ_EXPECT(tensor.shape.size() == tensor.strides.size(), tensor.name);
    for (const std::int64_t dim : tensor.shape) OFFGEN_FUZZ_EXPECT(dim >= 0, tensor.name);
  }
  return 0;
}
