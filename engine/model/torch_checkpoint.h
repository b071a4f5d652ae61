// Reader for one torch.save file — pytorch_model.bin or one of its shards — in the zip format
// torch.save writes since torch 1.6: <archive>/data.pkl (the state dict, read by the restricted
// unpickler of torch_pickle.h), <archive>/data/<key> (each storage's raw bytes, little-endian),
// <archive>/byteorder, <archive>/version. The file is memory-mapped; each tensor points at its
// storage's bytes in place (tied tensors at the same bytes). Accepted: fp16, bf16 and fp32
// tensors, contiguous row-major at any storage offset. Everything is validated when the file is
// opened: a truncated or corrupt file is an offgen::Error naming the file and the problem.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "engine/model/tensor_file.h"

namespace offgen {

class TorchCheckpointFile final : public TensorFile {
 public:
  static std::unique_ptr<TorchCheckpointFile> open(const std::filesystem::path& path);
  // The same for a file's bytes held in memory (copied; `name` stands for the path in messages).
  static std::unique_ptr<TorchCheckpointFile> from_bytes(std::span<const std::byte> bytes,
                                                         const std::string& name);

 private:
  using TensorFile::TensorFile;
  static std::unique_ptr<TorchCheckpointFile> parse(MappedFile file);
};

}  // namespace offgen
