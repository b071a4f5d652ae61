// A run's placement, as one value (FlexGen's Policy): how many sequences a GPU batch holds, how a
// block of them splits into GPU batches and where their KV and hidden states live (BlockShape),
// and where each layer's weight bytes live. The planner chooses one (planner.h), the CLI makes
// one from flags or reads one from a plan file, and the engine runs the one it is given.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

#include "scheduler/block_shape.h"

namespace offgen {

// Where each layer's weight bytes live: the first `gpu` share on the gpu tier, the next `pinned`
// share in pinned host memory, the rest on the disk tier (split by bytes, not whole tensors).
struct WeightPlacement {
  double gpu = 1.0;
  double pinned = 0.0;

  double disk() const { return std::max(0.0, 1.0 - gpu - pinned); }
  bool operator==(const WeightPlacement&) const = default;
};

struct Placement {
  int gpu_batch = 8;  // sequences per GPU batch
  BlockShape block;
  WeightPlacement weights;

  // Sequences run together: gpu_batch x num_gpu_batches.
  int block_size() const { return gpu_batch * block.num_gpu_batches; }
  double weights_disk() const { return weights.disk(); }
  // Everything on the gpu tier, in one GPU batch.
  bool all_resident() const;
  // "8 x 4 GPU batches, weights 40/60/0% gpu/cpu/disk, KV 50% on the gpu tier (cpu attention),
  // activations on the gpu": for logs (Plan::describe puts the block and prediction around it).
  std::string describe() const;
  // Throws ParameterError naming the first parameter out of range (gpu_batch and
  // num_gpu_batches >= 1; shares in [0, 1]; the weights' gpu + pinned shares at most 1).
  void validate() const;

  bool operator==(const Placement&) const = default;
};

// The placement as a plan file holds it (`offgen plan --output`), in percent: batch_size,
// num_gpu_batches, weights_gpu_percent, weights_cpu_percent, weights_disk_percent,
// kv_gpu_percent, cpu_attention, activations_cpu.
nlohmann::ordered_json placement_json(const Placement& placement);

// Reads those fields of a plan file. A field it lacks (files from older versions) keeps the
// default Placement's value; a file with the gpu share but not the pinned one keeps the rest of
// the weights in pinned memory. A field of the wrong type or out of range is an offgen::Error
// naming the field ("'batch_size' must be an integer >= 1 (got 0)"); weights_disk_percent is
// derived, so it is not read.
Placement placement_from_json(const nlohmann::json& file);

}  // namespace offgen
