// Deterministic dummy weights for any config, so benchmarks need no files. Each value depends only
// on (seed, tensor name, element index) — not on thread count or load order.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/weight_source.h"

namespace offgen {

class DummyWeights final : public WeightSource {
 public:
  DummyWeights(ModelConfig config, std::uint64_t seed);
  bool contains(const std::string& name) const override;
  void read_f16(const std::string& name, std::span<const std::int64_t> shape,
                Half* dst) const override;
  std::string describe() const override;

 private:
  ModelConfig config_;
  std::uint64_t seed_;
  std::map<std::string, std::vector<std::int64_t>> shapes_;  // canonical name -> shape
};

}  // namespace offgen
