#include "offload/weight_store.h"

#include <spdlog/spdlog.h>
#include <tbb/parallel_for.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/parameter_error.h"
#include "engine/model/weight_blocks.h"
#include "kernels/cpu/linear_int8.h"
#include "kernels/cpu/quantize.h"

namespace offgen {

std::string int8_weights_need_the_cpu(ParameterNamer name) {
  return fmt::format(
      "{} is for the cpu device, which multiplies int8 weights as they are; the cuda device "
      "takes fp16 or {} weights",
      name(Parameter::int8_weights), name(Parameter::compress_weights));
}

WeightStore::WeightStore(Device& device, const ModelConfig& config, const WeightSource& source,
                         const WeightPlacement& placement, const std::filesystem::path& disk_folder,
                         Storage storage, Ops* ops)
    : device_(device), ops_(ops) {
  OFFGEN_CHECK(storage != Storage::int4 || ops != nullptr,
               "weight store: int4 weights need the device's ops to expand layers with");
  OFFGEN_CHECK_NAMING(storage != Storage::int8 || device.kind() == DeviceKind::cpu,
                      [](ParameterNamer name) { return int8_weights_need_the_cpu(name); });
  const double gpu_fraction = placement.gpu;
  OFFGEN_CHECK_NAMING(gpu_fraction >= 0.0 && gpu_fraction <= 1.0, [=](ParameterNamer name) {
    return fmt::format("{} must be in [0, 1] (got {})", name(Parameter::weights_gpu_share),
                       gpu_fraction);
  });
  OFFGEN_CHECK_NAMING(placement.pinned >= 0.0 && gpu_fraction + placement.pinned <= 1.0 + 1e-9,
                      [=](ParameterNamer name) {
                        return fmt::format(
                            "the shares of weights on the gpu tier ({} {}) and in pinned memory "
                            "({} {}) must add up to at most 1",
                            name(Parameter::weights_gpu_share), gpu_fraction,
                            name(Parameter::weights_pinned_share), placement.pinned);
                      });
  const bool on_disk = placement.disk() > 1e-9;
  OFFGEN_CHECK_NAMING(!on_disk || !disk_folder.empty(), [=](ParameterNamer name) {
    return fmt::format("{:.0f}% of the weights would go to disk, but no {} folder was given",
                       100.0 * placement.disk(), name(Parameter::disk_folder));
  });
  if (on_disk) disk_ = std::make_unique<DiskFile>(disk_folder);
  layout_ = weight_layout(config, placement, storage);
  weights_.layers.resize(static_cast<std::size_t>(config.num_layers));
  std::vector<WeightBlock> blocks;
  blocks.push_back(global_weight_block(config, weights_));
  for (int i = 0; i < config.num_layers; ++i) {
    blocks.push_back(layer_weight_block(config, i, weights_.layers[static_cast<std::size_t>(i)]));
  }
  image_ = weight_image(blocks[1], storage);
  bytes_ = blocks[0].elements * sizeof(Half) +
           static_cast<std::uint64_t>(config.num_layers) * layout_.layer_bytes;
  // Each layer's first resident elements stay on the gpu tier, the rest in pinned memory and on
  // disk (weight_layout.h). The globals (embeddings, final norm) are always resident: every step
  // reads them at both ends.
  streamed_ = layout_.streamed;
  layers_.resize(static_cast<std::size_t>(config.num_layers));

  // Two staging buffers: block i converts into one while block i-1 copies out of the other.
  Stream& copies = device.stream(StreamRole::h2d_weights);
  std::vector<Buffer> staging = layout_.loading.allocate_all(device, "load staging");
  std::vector<Buffer> packing = layout_.loading.allocate_all(device, "load packing");
  // The gaps between an image's aligned parts are copied (and written to disk) too: zeros, not
  // whatever the memory held.
  for (Buffer& buffer : packing) {
    if (buffer) std::memset(buffer.data(), 0, buffer.bytes());
  }
  if (expands()) expanded_ = layout_.held.allocate(device, "expanded layer");
  std::unique_ptr<Event> copied[2] = {device.create_event(), device.create_event()};

  // A failure mid-load (a missing tensor) must not free staging memory a queued copy still reads.
  struct DrainOnExit {
    Stream& stream;
    ~DrainOnExit() {
      try {
        stream.synchronize();
      } catch (const std::exception& e) {
        spdlog::warn("weight load: copy stream failed while unwinding: {}", e.what());
      }
    }
  } drain{copies};

  const Allocation& resident_part = layout_.held.at("resident layer weights");
  const Allocation& pinned_part = layout_.held.at("pinned layer weights");
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const WeightBlock& layout = blocks[i];
    const std::size_t slot = i % 2;
    copied[slot]->synchronize();  // the copy that last read this staging buffer has finished
    Half* host = staging[slot].as<Half>();
    // Every piece's failure is kept and the first in layout order is rethrown, so a checkpoint
    // that disagrees with its config always names the same tensor, whichever thread saw it first.
    std::vector<std::exception_ptr> failures(layout.pieces.size());
    tbb::parallel_for(std::size_t{0}, layout.pieces.size(), [&](std::size_t p) {
      const WeightBlock::Piece& piece = layout.pieces[p];
      try {
        source.read_f16(piece.name, piece.shape, host + piece.offset);
      } catch (...) {
        failures[p] = std::current_exception();
      }
    });
    for (const std::exception_ptr& failure : failures) {
      if (failure) std::rethrow_exception(failure);
    }
    if (i == 0) {
      if (expands()) round_globals_through_int4(layout, host);
      globals_ = layout_.held.allocate(device, "global weights");
      device.copy_async(globals_.data(), host, layout.elements * sizeof(Half), copies);
      copied[slot]->record(copies);
      layout.bind(globals_.as<Half>());
      continue;
    }
    // The layer's image: the block itself, or packed beside it.
    const auto* image = reinterpret_cast<const std::byte*>(host);
    if (packs()) {
      pack_layer(host, packing[slot].as<std::byte>());
      image = packing[slot].as<std::byte>();
    }
    LayerBlock& layer = layers_[i - 1];
    layer.block = layout;
    layer.resident_bytes = layout_.resident_bytes;
    layer.pinned_bytes = layout_.pinned_bytes;
    layer.disk_bytes = layout_.disk_layer_bytes;
    const std::uint64_t host_end = layer.resident_bytes + layer.pinned_bytes;
    if (layer.resident_bytes > 0) {
      layer.resident = device.allocate(resident_part.tier, resident_part.bytes);
      device.copy_async(layer.resident.data(), image, layer.resident_bytes, copies);
    }
    if (layer.pinned_bytes > 0) {
      layer.offloaded = device.allocate(pinned_part.tier, pinned_part.bytes);
      device.copy_async(layer.offloaded.data(), image + layer.resident_bytes, layer.pinned_bytes,
                        copies);
    }
    if (layer.disk_bytes > 0) {
      // The staging buffer holds the converted weights until the copies above are done with it;
      // the file write reads it now, on this thread.
      layer.disk_offset = disk_->append(image + host_end, layer.disk_bytes);
    }
    if (!streamed_) {
      // Nothing streams: the kernels read the resident image where it lies (an int4 one is
      // expanded by the streamer before each pass instead).
      if (!expands()) bind_layer(static_cast<int>(i - 1), layer.resident.as<std::byte>());
    }
    copied[slot]->record(copies);
  }
  copies.synchronize();
  if (layout_.disk_layer_bytes > 0) {
    // Direct reads need block-aligned memory: room to align inside each pinned buffer.
    std::vector<Buffer> disk_staging = layout_.held.allocate_all(device, "disk read staging");
    for (int k = 0; k < 2; ++k) {
      disk_staging_[k] = std::move(disk_staging[static_cast<std::size_t>(k)]);
      disk_staging_free_[k] = device.create_event();
      disk_read_done_[k] = device.create_event();
    }
  }
  spdlog::debug("loaded {} weight bytes from {} ({:.0f}% on the gpu tier, {:.0f}% on disk)", bytes_,
                source.describe(), 100.0 * gpu_fraction, 100.0 * placement.disk());
}

WeightStore::~WeightStore() {
  // Queued reads may still write, and queued copies read, the disk staging buffers and the file.
  // Each read is followed by its copy, and a read_done signal runs even after a stream error
  // (which skips a copy's wait): both are awaited.
  for (int k = 0; k < 2; ++k) {
    for (auto* event : {disk_read_done_[k].get(), disk_staging_free_[k].get()}) {
      if (event == nullptr) continue;
      try {
        event->synchronize();
      } catch (const std::exception& e) {
        spdlog::warn("weight store: a disk staging read or copy failed while shutting down: {}",
                     e.what());
      }
    }
  }
}

void WeightStore::ReadFailure::set(const std::string& what) {
  const std::lock_guard lock(mutex);
  if (message.empty()) message = what.empty() ? "a disk read failed" : what;
}

std::string WeightStore::ReadFailure::get() {
  const std::lock_guard lock(mutex);
  return message;
}

void WeightStore::rethrow_read_failure() const {
  const std::string message = read_failure_->get();
  if (!message.empty()) fail("weight store: {}", message);
}

void WeightStore::check_disk_reads(Stream& stream) {
  if (!disk_) return;
  device_.enqueue_host(stream, [failure = read_failure_] {
    const std::string message = failure->get();
    if (!message.empty()) fail("weight store: {}", message);
  });
}

std::uint64_t WeightStore::disk_bytes() const {
  std::uint64_t total = 0;
  for (const LayerBlock& layer : layers_) total += layer.disk_bytes;
  return total;
}

std::uint64_t WeightStore::offloaded_bytes() const {
  std::uint64_t total = 0;
  for (std::size_t l = 0; l < layers_.size(); ++l) total += offloaded_bytes(static_cast<int>(l));
  return total;
}

std::uint64_t WeightStore::offloaded_bytes(int layer) const {
  const LayerBlock& block = layers_[static_cast<std::size_t>(layer)];
  return block.pinned_bytes + block.disk_bytes;
}

std::uint64_t WeightStore::gpu_bytes() const {
  std::uint64_t total = globals_.bytes() + expanded_.bytes();
  for (const LayerBlock& layer : layers_) total += layer.resident.bytes();
  return total;
}

void WeightStore::load_layer(int layer, std::byte* dst, Stream& stream) {
  rethrow_read_failure();
  const LayerBlock& block = layers_[static_cast<std::size_t>(layer)];
  if (block.resident_bytes > 0) {
    device_.copy_async(dst, block.resident.data(), block.resident_bytes, stream);
  }
  if (block.pinned_bytes > 0) {
    device_.copy_async(dst + block.resident_bytes, block.offloaded.data(), block.pinned_bytes,
                       stream);
  }
  if (block.disk_bytes > 0) {
    // disk_read:  wait staging_free[k] -> read into staging k -> record read_done[k]
    // `stream`:   wait read_done[k]    -> copy staging k -> dst -> record staging_free[k]
    // The read of the next layer with a disk part uses the other buffer, so it runs while this
    // one copies (and while the layers before it compute).
    const int k = next_staging_;
    next_staging_ ^= 1;
    auto* base = static_cast<std::byte*>(disk_staging_[k].data());
    const auto misalignment = reinterpret_cast<std::uintptr_t>(base) % DiskFile::kAlignment;
    std::byte* aligned = base + (misalignment ? DiskFile::kAlignment - misalignment : 0);
    const std::uint64_t bytes = block.disk_bytes;
    Stream& reads = device_.stream(StreamRole::disk_read);
    disk_staging_free_[k]->wait_on(reads);  // the copy that last read this buffer has run
    device_.enqueue_host(reads, [disk = disk_.get(), failure = read_failure_,
                                 offset = block.disk_offset, aligned, bytes] {
      try {
        disk->read(offset, aligned, bytes);
      } catch (const std::exception& e) {
        failure->set(e.what());
        throw;
      } catch (...) {
        failure->set("");
        throw;
      }
    });
    disk_read_done_[k]->record(reads);
    disk_read_done_[k]->wait_on(stream);
    device_.copy_async(dst + block.resident_bytes + block.pinned_bytes, aligned, bytes, stream);
    disk_staging_free_[k]->record(stream);
  }
}

const std::byte* WeightStore::resident_image(int layer) const {
  const LayerBlock& block = layers_[static_cast<std::size_t>(layer)];
  OFFGEN_CHECK(block.resident_bytes == layout_.layer_bytes,
               "weight store: layer {} streams; it has no resident image", layer);
  return block.resident.as<const std::byte>();
}

void WeightStore::bind_layer(int layer, const std::byte* image) {
  const LayerBlock& block = layers_[static_cast<std::size_t>(layer)];
  if (layout_.storage == Storage::fp16) {
    block.block.bind(reinterpret_cast<const Half*>(image));
    return;
  }
  if (layout_.storage == Storage::int8) {
    bind_int8(block.block, image);
    return;
  }
  Half* expanded = expanded_.as<Half>();
  for (const WeightImage::Part& part : image_.parts) {
    if (!part.packed) continue;
    ops_->dequantize({.data = reinterpret_cast<const std::uint8_t*>(image + part.offset),
                      .params = reinterpret_cast<const Half*>(image + part.params_offset),
                      .x = expanded + part.element_offset,
                      .shape = part.shape});
  }
  for (const WeightBlock::Binder& b : block.block.binders) {
    const WeightImage::Part& part = image_.parts[b.piece];
    *b.slot = part.packed ? expanded + part.element_offset
                          : reinterpret_cast<const Half*>(image + part.offset);
  }
}

void WeightStore::bind_int8(const WeightBlock& block, const std::byte* image) const {
  for (const WeightBlock::Binder& b : block.binders) {
    const WeightImage::Part& part = image_.parts[b.piece];
    if (part.int8) {
      *b.slot = nullptr;
      *b.int8_slot = part.int8_shape.view(image + part.offset);
    } else {
      *b.slot = reinterpret_cast<const Half*>(image + part.offset);
    }
  }
}

void WeightStore::round_globals_through_int4(const WeightBlock& globals, Half* host) const {
  std::vector<std::uint8_t> data;
  std::vector<Half> params;
  for (const WeightBlock::Piece& piece : globals.pieces) {
    if (piece.shape.size() != 2) continue;
    const kernels::QuantShape shape{.outer = 1, .dim = piece.shape[0], .inner = piece.shape[1]};
    data.resize(shape.data_bytes());
    params.resize(shape.param_count());
    Half* values = host + piece.offset;
    kernels::cpu::quantize({.x = values,
                            .data = data.data(),
                            .params = params.data(),
                            .shape = shape,
                            .recipe = kernels::QuantRecipe::fp32_ops});
    kernels::cpu::dequantize(
        {.data = data.data(), .params = params.data(), .x = values, .shape = shape});
  }
}

void WeightStore::pack_layer(const Half* host, std::byte* image) const {
  for (const WeightImage::Part& part : image_.parts) {
    if (part.within) continue;  // packed with the matrix it is fused into
    if (part.int8) {
      kernels::cpu::pack_int8_matrix(host + part.element_offset, part.int8_shape.rows,
                                     part.int8_shape.cols, image + part.offset);
    } else if (part.packed) {
      kernels::cpu::quantize({.x = host + part.element_offset,
                              .data = reinterpret_cast<std::uint8_t*>(image + part.offset),
                              .params = reinterpret_cast<Half*>(image + part.params_offset),
                              .shape = part.shape,
                              .recipe = kernels::QuantRecipe::fp32_ops});
    } else {
      std::memcpy(image + part.offset, host + part.element_offset, part.elements * sizeof(Half));
    }
  }
}

}  // namespace offgen
