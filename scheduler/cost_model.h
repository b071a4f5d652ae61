// The cost model (design sections 6 and 7): predicted time of a run from the machine's measured
// constants (`offgen calibrate`'s profile), for the block schedule of block_shape.h.
//
// A pass (the prefill, or one decode step) goes layer by layer, and within a layer over the
// block's GPU batches. Every resource has its own queue and the schedule prefetches (layer j+1's
// weights during layer j, GPU batch k+1's host KV during batch k's compute), so a layer costs its
// busiest resource — FlexGen's model; pipeline fill and drain are not charged:
//
//   h2d   offloaded weights (the pinned and the disk part; once per layer, shared by every GPU
//         batch) + the host KV staged in for gpu attention (K and V, every slot of each offloaded
//         sequence, every step) + cpu attention's outputs (and an attention-score policy's softmax
//         rows), at the pinned host-to-device bandwidth
//   d2h   the new q, k, v rows and write slots of the offloaded sequences (decode); their whole
//         cache after the prefill; at the pinned device-to-host bandwidth
//   disk  the disk part of the weights at the disk's read bandwidth
//   gpu   per GPU batch: its GEMMs — max(weight-bandwidth time at 32 rows, FLOPs at the 512-row
//         rate), so small GPU batches each pay for reading the weights — and its attention over
//         the KV attended on the device (K + V bytes / the device's decode attention bandwidth);
//         with int4 storage, expanding the layer's weights once and each attended cache to fp16
//         (fp16 bytes / the dequantize rate). Bytes that cross PCIe are the stored (packed) ones.
//   cpu   decode attention over the host KV with --cpu-attention (K + V bytes / the CPU's)
//
// Page selection (quest) keeps the whole cache but, from its dense layers on, a decode step
// attends only the chosen pages: attention reads those rows and the page summaries, and gpu
// attention over a host cache gathers those rows alone (no prefetch: the choice needs the
// step's query), on the compute stream — gpu time at the h2d bandwidth; with int4 KV the staged
// cache is expanded twice (before the choice and after the gather). Dense layers cost as full's.
// With speculative selection the guessed pages cross on the h2d queue beside the layer below, a
// tenth of the bytes (the misses, as measured) is gathered after the choice, and the guess adds a
// q projection of the offloaded rows to the gemm time.
//
//   layer = max(h2d, d2h, disk, gpu, cpu)
//
// A run costs its prefill and every decode step over all layers, plus the LM head per step.
#pragma once

#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "engine/core/compression.h"
#include "engine/model/model_config.h"
#include "kernels/linear_args.h"
#include "scheduler/block_shape.h"
#include "scheduler/placement.h"

namespace offgen {

// The measured constants the model uses, in bytes/s and FLOP/s.
struct MachineProfile {
  double h2d = 0;        // pinned host -> gpu tier
  double d2h = 0;        // gpu tier -> pinned host
  double disk_read = 0;  // 0: no disk measured
  // GEMM FLOP/s at 1, 32, 128 and 512 rows (a decoder layer's four GEMMs, their weights read
  // from memory; older profiles: fc1's alone). A GPU is weight-bandwidth bound up to a few
  // hundred rows, so its time is flat there; a CPU is compute bound sooner and its time grows
  // with the rows from the first. 0 (profiles from before): 1 row takes the 32-row time, 128 rows
  // the larger of the 32-row time and a quarter of the 512-row time.
  double gemm_one = 0;
  double gemm_small = 0;
  double gemm_mid = 0;
  double gemm_large = 0;
  // The 128- and 512-row GEMM rates with bf16 prefill math (kernels/linear_args.h); 0: not
  // measured (a CPU without AVX512-BF16, a GPU, older profiles), and bf16 cannot be predicted.
  double gemm_bf16_mid = 0;
  double gemm_bf16_large = 0;
  // The 1-, 32-, 128- and 512-row rates (ops/s) over int8 weights (kernels/int8_matrix.h), every
  // row in int8; 0: not measured (a GPU, older profiles), and int8 weights cannot be predicted.
  double gemm_int8_one = 0;
  double gemm_int8_small = 0;
  double gemm_int8_mid = 0;
  double gemm_int8_large = 0;
  // Causal prefill attention FLOP/s (q·k and p·v over half the scores); 0 (older profiles): the
  // 512-row GEMM rate.
  double prefill_attention = 0;
  // The same in bf16 (--prefill-math bf16, the AVX512-BF16 or AMX kernel); 0 (a GPU, a CPU without
  // AVX512-BF16, older profiles): bf16 runs are predicted at the fp32 rate.
  double prefill_attention_bf16 = 0;
  // Whether the GEMM rates are a layer's four GEMMs with cold weights (false: an older profile's
  // fc1 alone, hot in the cache, which predicts CPU runs 1.2-1.7x too fast or too slow).
  bool layer_gemms = false;
  double attention = 0;      // decode attention, K+V bytes/s on the device
  double cpu_attention = 0;  // decode attention, K+V bytes/s on the CPU; 0: not measured
  // Expanding int4 to fp16, fp16 bytes written per second: weights on the device, a KV cache on
  // the device and on the CPU (cpu attention). 0 (older profiles): the weights' rate for the
  // device's KV, and the decode attention bandwidths (like memory-bound kernels) for the rest.
  double dequantize = 0;
  double dequantize_kv = 0;
  double cpu_dequantize_kv = 0;
  // How much a copy and compute running at once overlap: 1 when together they take as long as the
  // longer alone (a GPU's copy engines), 0 when as long as both in turn (the cpu device, whose
  // copies and kernels share the same cores). Profiles from before: 1.
  double overlap = 1;
  // How much a host -> gpu copy and cpu attention running at once overlap: both read host memory,
  // so on a GPU machine they can slow each other down whatever the copy engines do. Negative: not
  // measured (the cpu device, older profiles), and `overlap` stands in for it as before.
  double host_overlap = -1;
  std::string device;
  int hidden_size = 0;  // of the shapes measured at; 0: the profile does not say (older ones)
  // Cores' worth of CPU time other processes used while it was measured (a busy machine makes
  // every rate low); negative: not recorded (older profiles).
  double others_load = -1;

  // Reads calibrate's JSON; throws offgen::Error naming the file and the missing measurement.
  // Profiles from before d2h and cpu attention were measured still load: d2h falls back to h2d,
  // and cpu attention stays unknown (0), so plans with it cannot be predicted.
  static MachineProfile load(const std::filesystem::path& path);
  // The same from calibrate's JSON in memory (a profile just measured); `path` names it in errors.
  static MachineProfile from_json(const nlohmann::json& json, const std::filesystem::path& path);
};

// Seconds of a GEMM of `rows` rows over `params` weights: through the profile's measured points
// (rows 1, 32, 128, 512) piecewise linear in the rows, and in proportion to them past 512.
// With bf16 prefill math the 128- and 512-row points are the bf16 ones; over int8 weights every
// point is the int8 one.
double gemm_seconds(const MachineProfile& profile, double rows, double params,
                    kernels::PrefillMath math = kernels::PrefillMath::fp32,
                    Storage weights = Storage::fp16);

// What runs: a block of `batch` sequences split by `block`, lengths, KV slots per (layer,
// sequence, head), where weights live.
struct RunShape {
  int batch = 1;  // sequences per block (all GPU batches together)
  int prompt_len = 512;
  int gen_len = 32;
  int kv_capacity = 0;  // slots attended at most (budget + 1)
  // The policy keeps attention scores (h2o): cpu attention also returns softmax rows.
  bool keeps_attention_scores = false;
  WeightPlacement weights;  // shares of each layer's weight bytes on each tier
  BlockShape block;         // GPU batches, the KV share on the gpu tier, cpu attention, activations
  // int4 weights: each layer's packed image crosses PCIe and is expanded once per pass (its fp16
  // bytes written at the dequantize rate, counted as gpu time); int8 weights: the packed image
  // crosses PCIe and the GEMMs run at the profile's int8 rates, nothing expanded; int4 KV: the
  // packed cache crosses PCIe and every attended cache is expanded before attention reads it in
  // fp16.
  Compression compression{};
  // How the prefill's GEMMs are multiplied (the cpu device's bf16 runs at the profile's bf16
  // rates; decode is exact either way).
  kernels::PrefillMath prefill_math = kernels::PrefillMath::fp32;
  // Page selection (quest): page_size 0 for a policy that attends every cached slot; else the
  // layers from dense_layers on attend pages_per_step pages a step.
  int page_size = 0;
  int pages_per_step = 0;
  int dense_layers = 0;
};

// Seconds per layer (one pass, the whole block) of each resource. The layer costs the busiest
// when they overlap fully, their sum when not at all, and in between by the profile's overlap.
struct LayerCost {
  double weights_in = 0;     // h2d: offloaded weights (pinned and disk parts)
  double kv_load = 0;        // h2d: host KV staged in, or cpu attention's outputs
  double kv_store = 0;       // d2h
  double act_in = 0;         // h2d: hidden states loaded (activations in pinned memory)
  double act_out = 0;        // d2h: hidden states stored back
  double disk = 0;           // disk reads of weights
  double gemm = 0;           // gpu
  double attention = 0;      // gpu
  double cpu_attention = 0;  // cpu
  double overlap = 1;        // the profile's
  double host_overlap = -1;  // the profile's: copies against cpu attention; < 0: `overlap`
  double h2d() const { return weights_in + kv_load + act_in; }
  double d2h() const { return kv_store + act_out; }
  double gpu() const { return gemm + attention; }
  double total() const;
};

struct Prediction {
  LayerCost prefill;             // per layer
  LayerCost decode;              // per layer, each field averaged over the decode steps
  double decode_layer = 0;       // per layer: the average over the decode steps of total()
  double head_per_step = 0;      // LM head GEMM
  double seconds = 0;            // the whole run
  double tokens_per_second = 0;  // generated tokens / seconds (FlexGen's metric)
};

// Throws offgen::Error for a shape it cannot predict: non-positive sizes, weights on disk without
// a disk measurement, cpu attention without a cpu attention measurement.
Prediction predict(const ModelConfig& model, const MachineProfile& profile, const RunShape& run);

}  // namespace offgen
