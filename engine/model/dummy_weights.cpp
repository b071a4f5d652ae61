#include "engine/model/dummy_weights.h"

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <numbers>

#include "engine/core/error.h"
#include "engine/model/model_tensors.h"
#include "engine/model/tensor_shape.h"

namespace offgen {
namespace {

std::uint64_t fnv1a64(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const char ch : text) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// value = offset + scale * u, u uniform in [-1, 1).
struct Distribution {
  float offset;
  float scale;
};

// Mimics OPT's initialisation closely enough that activations stay in a sane fp16 range.
Distribution distribution_for(std::string_view name) {
  // A uniform on [-a, a] has std a / sqrt(3); OPT initialises with std 0.02.
  constexpr float kStd002 = 0.02f * std::numbers::sqrt3_v<float>;
  // OPT's layer_norm, LLaMA's input_layernorm, post_attention_layernorm and norm.
  if (name.ends_with("norm.weight")) return {1.0f, 0.05f};
  if (name.ends_with("norm.bias")) return {0.0f, 0.05f};
  if (name.ends_with(".bias")) return {0.0f, 0.01f};
  return {0.0f, kStd002};  // linear weights and both embeddings
}

}  // namespace

DummyWeights::DummyWeights(ModelConfig config, std::uint64_t seed)
    : config_(std::move(config)), seed_(seed) {
  config_.validate();
  for (TensorSpec& spec : model_tensor_specs(config_)) {
    shapes_.emplace(std::move(spec.name), std::move(spec.shape));
  }
}

bool DummyWeights::contains(const std::string& name) const {
  return shapes_.contains(std::string(canonical_tensor_name(name)));
}

void DummyWeights::read_f16(const std::string& name, std::span<const std::int64_t> shape,
                            Half* dst) const {
  const std::string canonical(canonical_tensor_name(name));
  const auto it = shapes_.find(canonical);
  if (it == shapes_.end()) fail("{} has no tensor '{}'", describe(), name);
  check_tensor_shape(name, describe(), it->second, shape);

  const auto numel = static_cast<std::size_t>(*shape_numel(it->second));
  const Distribution dist = distribution_for(canonical);
  // One SplitMix64 stream per (seed, tensor). Output g feeds elements 4g..4g+3, 16 bits each —
  // far finer than fp16 needs (steps of ~1e-6 against fp16's ~1.5e-5 at 0.02) and a quarter of
  // the hashing. Work is split by group, and each value depends only on its index, so any split
  // across threads gives the same bits.
  const std::uint64_t stream = splitmix64(splitmix64(seed_) ^ fnv1a64(canonical));
  const auto fill = [&](std::size_t group_begin, std::size_t group_end) {
    constexpr std::size_t kGroupsPerChunk = 512;
    alignas(64) float buffer[4 * kGroupsPerChunk];
    for (std::size_t first = group_begin; first < group_end; first += kGroupsPerChunk) {
      const std::size_t last = std::min(first + kGroupsPerChunk, group_end);
      for (std::size_t group = first; group < last; ++group) {
        const std::uint64_t bits = splitmix64(stream + group * 0x9e3779b97f4a7c15ull);
        for (std::size_t lane = 0; lane < 4; ++lane) {
          const auto sample = static_cast<std::int32_t>((bits >> (16 * lane)) & 0xffffu);
          const float unit = static_cast<float>(sample) * 0x1p-16f;  // [0, 1)
          buffer[4 * (group - first) + lane] = dist.offset + dist.scale * (2.0f * unit - 1.0f);
        }
      }
      const std::size_t begin = 4 * first;
      float_to_half(buffer, dst + begin, std::min(4 * last, numel) - begin);
    }
  };
  const std::size_t groups = (numel + 3) / 4;
  tbb::parallel_for(
      tbb::blocked_range<std::size_t>(0, groups, std::size_t{1} << 13),
      [&](const tbb::blocked_range<std::size_t>& range) { fill(range.begin(), range.end()); });
}

std::string DummyWeights::describe() const {
  return fmt::format("{} (dummy weights, seed {})",
                     config_.name.empty() ? config_.model_type : config_.name, seed_);
}

}  // namespace offgen
