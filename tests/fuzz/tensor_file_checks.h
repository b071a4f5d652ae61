// Shared by the fuzz targets of the checkpoint readers: what every tensor of an accepted file must
// satisfy. Each is converted in full, so AddressSanitizer sees a read past the input's copy.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/core/half.h"
#include "engine/model/tensor_file.h"
#include "engine/model/tensor_shape.h"
#include "tests/fuzz/fuzz_support.h"

namespace offgen::fuzz {

// Whether tensors may share bytes: safetensors forbids it, torch.save ties tensors to one storage.
enum class SharedBytes { forbidden, allowed };

inline void expect_readable_tensors(const TensorFile& file, std::size_t input_size,
                                    SharedBytes shared) {
  std::size_t total = 0;
  for (const auto& [name, tensor] : file.tensors()) {
    OFFGEN_FUZZ_EXPECT(tensor.name == name, name);
    OFFGEN_FUZZ_EXPECT(file.find(name) == &tensor, name);
    const auto numel = shape_numel(tensor.shape);
    OFFGEN_FUZZ_EXPECT(numel.has_value(), name);
    OFFGEN_FUZZ_EXPECT(tensor.bytes == static_cast<std::size_t>(*numel) * dtype_size(tensor.dtype),
                       name);
    OFFGEN_FUZZ_EXPECT(tensor.bytes <= input_size, name);
    total += tensor.bytes;
    OFFGEN_FUZZ_EXPECT(shared == SharedBytes::allowed || total <= input_size,
                       "tensors hold more bytes than the file");
    std::vector<Half> values(static_cast<std::size_t>(*numel));
    convert_to_f16(tensor, values.data());
  }
}

}  // namespace offgen::fuzz
