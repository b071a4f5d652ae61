#include "engine/model/torch_checkpoint.h"

#include <fmt/format.h>

#include <map>
#include <string_view>

#include "engine/core/error.h"
#include "engine/model/tensor_shape.h"
#include "engine/model/torch_pickle.h"
#include "engine/model/zip_archive.h"

namespace offgen {
namespace {

constexpr std::byte kPickleProto{0x80};

// The archive's one "<name>/data.pkl"; <name> is the folder every other record lives in.
const ZipArchive::Entry& find_pickle(const ZipArchive& archive) {
  const ZipArchive::Entry* found = nullptr;
  for (const ZipArchive::Entry& entry : archive.entries()) {
    const std::string_view name = entry.name;
    const std::size_t slash = name.find('/');
    if (slash == std::string_view::npos || name.substr(slash + 1) != "data.pkl") continue;
    if (found != nullptr) {
      fail("{}: holds two pickles ({} and {}); a torch.save archive has one", archive.where(),
           found->name, entry.name);
    }
    found = &entry;
  }
  if (found == nullptr) {
    fail("{}: a zip archive without <name>/data.pkl: not a torch.save file", archive.where());
  }
  return *found;
}

void check_byte_order(const ZipArchive& archive, const std::string& folder) {
  const ZipArchive::Entry* entry = archive.find(folder + "byteorder");
  if (entry == nullptr) return;  // written since torch 1.10; older files are little-endian
  const auto bytes = archive.data(*entry);
  const std::string_view order(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (order != "little") {
    fail("{}: {}byteorder says '{}'; offgen reads little-endian tensor data only", archive.where(),
         folder, order.substr(0, 16));
  }
}

// Each storage's bytes: its data/<key> entry, exactly numel x element size long.
std::map<std::string, std::span<const std::byte>> storage_bytes(const ZipArchive& archive,
                                                                const std::string& folder,
                                                                const PickledStateDict& dict) {
  std::map<std::string, std::string_view> user;  // a tensor to name for each storage
  for (const PickledTensor& tensor : dict.tensors) user.emplace(tensor.storage_key, tensor.name);
  std::map<std::string, std::span<const std::byte>> out;
  for (const auto& [key, storage] : dict.storages) {
    const std::string_view tensor = user.at(key);
    if (!storage.dtype) {
      fail("{}: tensor '{}' is stored as {}; offgen reads fp16, bf16 and fp32 tensors",
           archive.where(), tensor, storage.type);
    }
    const std::string name = folder + "data/" + key;
    const ZipArchive::Entry* entry = archive.find(name);
    if (entry == nullptr) {
      fail("{}: the storage of tensor '{}' should be the entry {}, which the archive lacks",
           archive.where(), tensor, name);
    }
    std::uint64_t needed = 0;
    const bool overflows =
        __builtin_mul_overflow(storage.numel, dtype_size(*storage.dtype), &needed);
    if (overflows || needed != entry->size) {
      fail("{}: entry {} (the storage of tensor '{}') is {} bytes, but {} elements of {} need {}",
           archive.where(), name, tensor, entry->size, storage.numel, dtype_name(*storage.dtype),
           overflows ? "more than 2^64" : fmt::to_string(needed));
    }
    out.emplace(key, archive.data(*entry));
  }
  return out;
}

// Row-major and dense: each stride is the product of the sizes after it (any stride goes for a
// dimension of size 1, which it never steps along).
bool contiguous(const PickledTensor& tensor) {
  std::int64_t expected = 1;
  for (std::size_t d = tensor.shape.size(); d-- > 0;) {
    if (tensor.shape[d] != 1 && tensor.strides[d] != expected) return false;
    expected *= tensor.shape[d];
  }
  return true;
}

StoredTensor stored_tensor(const std::string& where, const PickledTensor& tensor,
                           const PickledStorage& storage, std::span<const std::byte> bytes) {
  StoredTensor out;
  out.name = tensor.name;
  out.dtype = *storage.dtype;
  out.shape = tensor.shape;
  const auto numel = shape_numel(tensor.shape);
  if (!numel)
    fail("{}: tensor '{}': shape {} has too many elements", where, tensor.name,
         format_shape(tensor.shape));
  if (*numel == 0) return out;
  if (!contiguous(tensor)) {
    fail(
        "{}: tensor '{}' of shape {} has strides {}, not contiguous row-major; offgen reads "
        "contiguous tensors (save the state dict after .contiguous())",
        where, tensor.name, format_shape(tensor.shape), format_shape(tensor.strides));
  }
  const auto count = static_cast<std::uint64_t>(*numel);
  if (tensor.storage_offset > storage.numel || count > storage.numel - tensor.storage_offset) {
    fail("{}: tensor '{}' (elements {}..+{}) runs past the end of its storage ({} elements)", where,
         tensor.name, tensor.storage_offset, count, storage.numel);
  }
  const std::size_t element = dtype_size(out.dtype);
  out.data = bytes.data() + tensor.storage_offset * element;
  out.bytes = static_cast<std::size_t>(count) * element;
  return out;
}

}  // namespace

std::unique_ptr<TorchCheckpointFile> TorchCheckpointFile::open(const std::filesystem::path& path) {
  return parse(MappedFile::open(path));
}

std::unique_ptr<TorchCheckpointFile> TorchCheckpointFile::from_bytes(
    std::span<const std::byte> bytes, const std::string& name) {
  return parse(MappedFile::copy_of(bytes, name));
}

std::unique_ptr<TorchCheckpointFile> TorchCheckpointFile::parse(MappedFile file) {
  const std::string where = file.path().string();
  const std::span<const std::byte> bytes = file.bytes();
  if (!bytes.empty() && bytes[0] == kPickleProto) {
    fail(
        "{}: a torch.save file in the legacy format of torch < 1.6 (a bare pickle stream); offgen "
        "reads the zip format. Load it and save it again with torch >= 1.6",
        where);
  }
  const ZipArchive archive(bytes, where);
  const ZipArchive::Entry& pickle = find_pickle(archive);
  const std::string folder = pickle.name.substr(0, pickle.name.find('/') + 1);
  check_byte_order(archive, folder);
  const PickledStateDict dict =
      read_state_dict_pickle(archive.data(pickle), fmt::format("{}: {}", where, pickle.name));
  const auto storages = storage_bytes(archive, folder, dict);

  std::map<std::string, StoredTensor> tensors;
  for (const PickledTensor& tensor : dict.tensors) {
    tensors.emplace(tensor.name, stored_tensor(where, tensor, dict.storages.at(tensor.storage_key),
                                               storages.at(tensor.storage_key)));
  }
  return std::unique_ptr<TorchCheckpointFile>(
      new TorchCheckpointFile(std::move(file), std::move(tensors)));
}

}  // namespace offgen
