// The cost model (design sections 6 and 7): predicted time of a run from the machine's measured
// constants (`offgen calibrate`'s profile). Per layer, the transfers that bring its weights in
// and its compute overlap, so a layer costs the slower of the two; a run costs its prefill and
// every decode step over all layers, plus the LM head.
#pragma once

#include <filesystem>
#include <string>

#include "engine/model/opt_config.h"

namespace offgen {

// The measured constants the model uses, in bytes/s and FLOP/s.
struct MachineProfile {
  double h2d = 0;         // pinned host -> gpu tier
  double disk_read = 0;   // 0: no disk measured
  double gemm_small = 0;  // FLOP/s at 32 rows (weight-bandwidth bound)
  double gemm_large = 0;  // FLOP/s at 512 rows (compute bound)
  double attention = 0;   // decode attention, K+V bytes/s on the device
  std::string device;

  // Reads calibrate's JSON; throws offgen::Error naming the file and the missing measurement.
  static MachineProfile load(const std::filesystem::path& path);
};

// What runs: batch, lengths, KV slots per (layer, sequence, head), where weights live.
struct RunShape {
  int batch = 1;
  int prompt_len = 512;
  int gen_len = 32;
  int kv_capacity = 0;     // slots attended at most (budget + 1)
  double weights_gpu = 1;  // shares of each layer's weight bytes
  double weights_disk = 0;
};

// Seconds per layer for each resource, and the layer's cost (max of transfer and compute).
struct LayerCost {
  double transfer = 0;  // weights in: pinned and disk parts
  double gemm = 0;
  double attention = 0;
  double total() const;
};

struct Prediction {
  LayerCost prefill;             // per layer
  LayerCost decode;              // per layer, averaged over the decode steps
  double head_per_step = 0;      // LM head GEMM
  double seconds = 0;            // the whole run
  double tokens_per_second = 0;  // generated tokens / seconds (FlexGen's metric)
};

Prediction predict(const OptConfig& model, const MachineProfile& profile, const RunShape& run);

}  // namespace offgen
