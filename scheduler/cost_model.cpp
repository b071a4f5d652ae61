#include "scheduler/cost_model.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/json_integer.h"
#include "engine/core/parameter_error.h"
#include "kernels/page_selection_args.h"
#include "scheduler/kv_cache_layout.h"
#include "scheduler/weight_layout.h"

namespace offgen {
namespace {

double measurement(const nlohmann::json& profile, const std::filesystem::path& path,
                   const char* name, double scale, bool required = true) {
  const auto& values = profile.at("measurements");
  if (!values.contains(name)) {
    OFFGEN_CHECK(!required, "profile {} has no '{}' measurement; run `offgen calibrate` again",
                 path.string(), name);
    return 0;
  }
  const double value = values.at(name).at("value").get<double>();
  OFFGEN_CHECK(value > 0, "profile {}: '{}' must be positive (got {})", path.string(), name, value);
  return value * scale;
}

}  // namespace

double gemm_seconds(const MachineProfile& p, double rows, double params, kernels::PrefillMath math,
                    Storage weights) {
  if (weights == Storage::int8) {
    OFFGEN_CHECK(p.gemm_int8_one > 0 && p.gemm_int8_small > 0 && p.gemm_int8_mid > 0 &&
                     p.gemm_int8_large > 0,
                 "the profile has no int8 GEMM measurement, so int8 weights cannot be predicted "
                 "(run `offgen calibrate` again with --device cpu: it measures int8 there)");
    MachineProfile int8 = p;
    int8.gemm_one = p.gemm_int8_one;
    int8.gemm_small = p.gemm_int8_small;
    int8.gemm_mid = p.gemm_int8_mid;
    int8.gemm_large = p.gemm_int8_large;
    return gemm_seconds(int8, rows, params);
  }
  const bool bf16 = math == kernels::PrefillMath::bf16;
  OFFGEN_CHECK(!bf16 || (p.gemm_bf16_mid > 0 && p.gemm_bf16_large > 0),
               "the profile has no bf16 GEMM measurement, so bf16 prefill cannot be predicted "
               "(run `offgen calibrate` again on this CPU: it measures bf16 where the CPU has "
               "AVX512-BF16)");
  // Seconds per weight at each measured row count.
  const double at32 = 2 * 32 / p.gemm_small;
  const double at512 = 2 * 512 / (bf16 ? p.gemm_bf16_large : p.gemm_large);
  const double at1 = p.gemm_one > 0 ? 2 / p.gemm_one : at32;
  const double mid = bf16 ? p.gemm_bf16_mid : p.gemm_mid;
  const double at128 = mid > 0 ? 2 * 128 / mid : std::max(at32, at512 / 4);
  const std::array<std::pair<double, double>, 4> points = {
      {{1, at1}, {32, at32}, {128, at128}, {512, at512}}};
  if (rows <= 1) return at1 * params;
  if (rows >= 512) return at512 * rows / 512 * params;
  for (std::size_t i = 1; i < points.size(); ++i) {
    const auto [r0, t0] = points[i - 1];
    const auto [r1, t1] = points[i];
    if (rows <= r1) return (t0 + (t1 - t0) * (rows - r0) / (r1 - r0)) * params;
  }
  return at512 * params;  // not reached
}

MachineProfile MachineProfile::load(const std::filesystem::path& path) {
  std::ifstream in(path);
  OFFGEN_CHECK(in.good(), "cannot read the profile {} (make one with `offgen calibrate`)",
               path.string());
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("profile {} is not a calibrate profile: {}", path.string(), e.what());
  }
  return from_json(json, path);
}

MachineProfile MachineProfile::from_json(const nlohmann::json& json,
                                         const std::filesystem::path& path) {
  try {
    MachineProfile p;
    p.device = json.value("device", "");
    if (const auto hidden = json.find("hidden_size"); hidden != json.end()) {
      p.hidden_size = json_integer<int>(*hidden).value_or(0);
    }
    p.h2d = measurement(json, path, "h2d_pinned", 1e9);
    p.d2h = measurement(json, path, "d2h_pinned", 1e9, false);
    if (p.d2h == 0) p.d2h = p.h2d;
    p.disk_read = measurement(json, path, "disk_read", 1e9, false);
    // A decoder layer's four GEMMs with cold weights; profiles from before that measured fc1's
    // alone, its weights hot in the cache ("gemm_fc1_m*").
    p.layer_gemms = json.at("measurements").contains("gemm_layer_m32");
    const char* gemm = p.layer_gemms ? "layer" : "fc1";
    const auto rate = [&](int rows, bool required) {
      return measurement(json, path, fmt::format("gemm_{}_m{}", gemm, rows).c_str(), 1e12,
                         required);
    };
    p.gemm_one = rate(1, false);
    p.gemm_small = rate(32, true);
    p.gemm_mid = rate(128, false);
    p.gemm_large = rate(512, true);
    p.gemm_bf16_mid = measurement(json, path, "gemm_layer_bf16_m128", 1e12, false);
    p.gemm_bf16_large = measurement(json, path, "gemm_layer_bf16_m512", 1e12, false);
    p.gemm_int8_one = measurement(json, path, "gemm_layer_int8_m1", 1e12, false);
    p.gemm_int8_small = measurement(json, path, "gemm_layer_int8_m32", 1e12, false);
    p.gemm_int8_mid = measurement(json, path, "gemm_layer_int8_m128", 1e12, false);
    p.gemm_int8_large = measurement(json, path, "gemm_layer_int8_m512", 1e12, false);
    p.prefill_attention = measurement(json, path, "prefill_attention", 1e12, false);
    p.prefill_attention_bf16 = measurement(json, path, "prefill_attention_bf16", 1e12, false);
    p.attention = measurement(json, path, "decode_attention_device", 1e9);
    p.cpu_attention = measurement(json, path, "decode_attention_cpu", 1e9, false);
    p.dequantize = measurement(json, path, "dequantize_device", 1e9, false);
    p.dequantize_kv = measurement(json, path, "dequantize_kv_device", 1e9, false);
    p.cpu_dequantize_kv = measurement(json, path, "dequantize_kv_cpu", 1e9, false);
    const auto& values = json.at("measurements");
    if (values.contains("copy_compute_overlap")) {
      p.overlap = values.at("copy_compute_overlap").at("value").get<double>();
      OFFGEN_CHECK(p.overlap >= 0 && p.overlap <= 1,
                   "profile {}: 'copy_compute_overlap' must be in [0, 1] (got {})", path.string(),
                   p.overlap);
    }
    if (values.contains("other_processes_load")) {
      p.others_load = values.at("other_processes_load").at("value").get<double>();
    }
    if (values.contains("copy_cpu_attention_overlap")) {
      p.host_overlap = values.at("copy_cpu_attention_overlap").at("value").get<double>();
      OFFGEN_CHECK(p.host_overlap >= 0 && p.host_overlap <= 1,
                   "profile {}: 'copy_cpu_attention_overlap' must be in [0, 1] (got {})",
                   path.string(), p.host_overlap);
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    fail("profile {} is not a calibrate profile: {}", path.string(), e.what());
  }
}

double LayerCost::total() const {
  if (host_overlap < 0 || cpu_attention <= 0) {
    const double busiest = std::max({h2d(), d2h(), disk, gpu(), cpu_attention});
    const double all = h2d() + d2h() + disk + gpu() + cpu_attention;
    return busiest + (1 - overlap) * (all - busiest);
  }
  // The copies and the gpu among themselves by `overlap`; cpu attention against the copies by
  // host_overlap (both read host memory), and against the gpu's kernels fully.
  const auto combine = [this](std::initializer_list<double> parts) {
    const double busiest = std::max(parts);
    double all = 0;
    for (const double part : parts) all += part;
    return busiest + (1 - overlap) * (all - busiest);
  };
  const double device_side = combine({h2d(), d2h(), disk, gpu()});
  const double copies = combine({h2d(), d2h(), disk});
  const double host_side =
      std::max(copies, cpu_attention) + (1 - host_overlap) * std::min(copies, cpu_attention);
  return std::max(device_side, host_side);
}

// The share of a selecting layer's gathered bytes its speculative guess misses, measured on
// SmolLM2-135M at 0.2 of a 1,088-token sequence (README: 3.5 MiB of wrong guesses per step on
// 35.5 MiB gathered by its 28 selecting layers); a guess moves as many pages as the choice.
constexpr double kSpeculationMisses = 0.1;

Prediction predict(const ModelConfig& m, const MachineProfile& p, const RunShape& r) {
  OFFGEN_CHECK(r.batch > 0 && r.prompt_len > 0 && r.gen_len > 0 && r.kv_capacity > 0,
               "cost model: batch, lengths and KV capacity must be positive");
  const std::vector<GpuBatch> batches = split_block(r.batch, r.block);
  int offloaded = 0;
  for (const GpuBatch& g : batches) offloaded += g.offloaded();
  const bool cpu_attention = r.block.cpu_attention && offloaded > 0;
  OFFGEN_CHECK(!cpu_attention || p.cpu_attention > 0,
               "the profile has no cpu attention measurement (run `offgen calibrate` again)");
  // fp16 weights of one decoder layer: its GEMMs' (q, k, v, out, fc1 — gate and up when gated —
  // and fc2).
  const auto params = static_cast<double>(m.layer_gemm_params());
  const Storage weights = r.compression.weights;
  const bool int4_weights = weights == Storage::int4;
  const bool int4_kv = r.compression.kv == Storage::int4;
  // What a layer's weights move as: fp16, or the packed image (weight_image.h).
  const double layer_bytes =
      weights != Storage::fp16 ? double(weight_layout(m, {}, weights).layer_bytes) : params * 2;
  const double heads = m.kv_heads();  // of the cache; query heads only count in attention flops
  const double row = m.kv_dim();      // one token's k (or v) in one layer, elements
  const double capacity = r.kv_capacity;
  // K and V of one offloaded sequence's cache in one layer, every slot, as stored: what a
  // stage-in copies.
  const double cache_bytes = 2 * capacity * heads * double(kv_row_bytes(m, r.compression.kv));
  // Expanding int4 to fp16: fp16 bytes written / the rate (older profiles: the attention rate).
  const double dequantize = p.dequantize > 0 ? p.dequantize : p.attention;
  const double dequantize_kv = p.dequantize_kv > 0 ? p.dequantize_kv : dequantize;
  const double cpu_dequantize_kv = p.cpu_dequantize_kv > 0 ? p.cpu_dequantize_kv : p.cpu_attention;
  const double expand_weights = int4_weights ? params * 2 / dequantize : 0;
  // One sequence's whole cache of one layer in fp16, expanded before every attention over it.
  const double expanded_cache = int4_kv ? 2 * row * capacity * 2 : 0;
  const double host = offloaded;
  const double on_device = r.batch - (cpu_attention ? offloaded : 0);  // sequences gpu-attended

  LayerCost weights_in;
  weights_in.overlap = p.overlap;
  weights_in.host_overlap = p.host_overlap;
  // Pinned and disk parts both cross PCIe; the disk part is also read from disk by its own
  // stream, ahead of the copies.
  weights_in.weights_in = std::max(0.0, 1.0 - r.weights.gpu) * layer_bytes / p.h2d;
  if (r.weights.disk() > 0) {
    OFFGEN_CHECK_NAMING(p.disk_read > 0, [](ParameterNamer name) {
      return fmt::format("the profile has no disk measurement (calibrate with a {} folder)",
                         name(Parameter::disk_folder));
    });
    weights_in.disk = r.weights.disk() * layer_bytes / p.disk_read;
  }

  Prediction out;
  out.prefill = weights_in;
  out.prefill.gemm += expand_weights;
  out.decode.overlap = p.overlap;
  out.decode.host_overlap = p.host_overlap;
  // bf16 math runs the attention in bf16 (with int8 weights too: their GEMMs stay int8).
  const double attention_rate =
      r.prefill_math == kernels::PrefillMath::bf16 && p.prefill_attention_bf16 > 0
          ? p.prefill_attention_bf16
      : p.prefill_attention > 0 ? p.prefill_attention
                                : p.gemm_large;
  for (const GpuBatch& g : batches) {
    out.prefill.gemm +=
        gemm_seconds(p, double(g.size) * r.prompt_len, params, r.prefill_math, weights);
    // Causal attention: q·k and p·v over half of the P x P scores per head.
    out.prefill.attention +=
        2.0 * g.size * m.num_heads * r.prompt_len * r.prompt_len * m.head_dim() / attention_rate;
  }
  out.prefill.kv_store = host * cache_bytes / p.d2h;
  // Hidden states in pinned memory: every (layer, GPU batch) loads its rows and stores them back.
  // With one GPU batch the load waits for the store of the layer before, so neither overlaps the
  // compute: they add to the gpu's time instead.
  const auto add_activations = [&](LayerCost& layer, double rows_per_sequence) {
    if (!r.block.activations_on_host) return;
    const double bytes = double(r.batch) * rows_per_sequence * m.hidden_size * 2;
    const double in = bytes / p.h2d, out_time = bytes / p.d2h;
    if (batches.size() == 1) {
      layer.gemm += in + out_time;
    } else {
      layer.act_in = in;
      layer.act_out = out_time;
    }
  };
  add_activations(out.prefill, r.prompt_len);

  double gemm = expand_weights;
  for (const GpuBatch& g : batches) {
    gemm += gemm_seconds(p, g.size, params, kernels::PrefillMath::fp32, weights);
  }
  // Each offloaded sequence sends its new q, k, v rows and write slots down every step.
  const double rows_down = host * (m.qkv_dim() * 2.0 + heads * 4) / p.d2h;
  const int steps = r.gen_len - 1;
  const bool selection = r.page_size > 0;
  OFFGEN_CHECK(!selection || r.pages_per_step >= 2,
               "cost model: page selection needs at least 2 pages a step");
  // Layers that attend every slot, and those that choose pages.
  const int dense = selection ? std::clamp(r.dense_layers, 0, m.num_layers) : m.num_layers;
  // Speculative selection runs where BlockRunner guesses (idle_speculation), with some KV on the
  // host; int4 weights stream through the expansion slots, as offloaded ones do.
  const bool speculates =
      r.block.speculative_pages && offloaded > 0 &&
      idle_speculation(r.block, selection, r.weights.gpu < 1.0 || weights == Storage::int4) ==
          nullptr;
  // A compact staging (OffloadedKv::compact): the choosing layers expand only the attended
  // pages of int4 rows; a prefill's stores and the dense layers' loads pass whole caches through
  // the two slots a chunk at a time, so past each GPU batch's first two chunks (which overlap
  // the work before, as two slots always did) every chunk's copy waits for the chunk two before
  // it: serial with the compute.
  const int staged = offloaded > 0
                         ? compact_staged_capacity(r.kv_capacity, r.page_size, r.pages_per_step,
                                                   cpu_attention, speculates)
                         : 0;
  double serial_chunks = 0;  // offloaded sequences whose chunk's copy waits on compute
  if (staged > 0) {
    int most = 0;
    for (const GpuBatch& g : batches) most = std::max(most, g.offloaded());
    const int chunk = compact_chunk_sequences(most, r.kv_capacity, staged);
    for (const GpuBatch& g : batches) serial_chunks += std::max(0, g.offloaded() - 2 * chunk);
  }
  out.prefill.kv_store -= serial_chunks * cache_bytes / p.d2h;
  out.prefill.attention += serial_chunks * cache_bytes / p.d2h;
  const double compact_expanded = staged > 0 && int4_kv ? 2 * row * staged * 2 : expanded_cache;
  // A layer that attends every slot, one that chooses its pages, or one whose pages were also
  // guessed during the layer below.
  enum class Kind { every_slot, choosing, guessed };
  const auto decode_layer = [&](int step, Kind kind) {
    const bool selects = kind != Kind::every_slot;
    const double slots = std::min<double>(r.prompt_len + step + 1, capacity);
    const double attended =
        selects
            ? double(kernels::selected_slots(std::int64_t(slots), r.page_size, r.pages_per_step))
            : slots;
    const double kv_read = 2 * row * attended * 2;  // K and V bytes one sequence attends over
    LayerCost layer = weights_in;
    layer.gemm = gemm;
    layer.attention = on_device * (kv_read / p.attention + expanded_cache / dequantize_kv);
    layer.kv_store = rows_down;
    add_activations(layer, 1);
    double summaries = 0;
    if (selects) {
      // Every kv head's page summaries (min and max, fp16) are read to choose.
      const double pages = std::ceil(slots / r.page_size);
      summaries = heads * 2 * m.head_dim() * pages * 2;
      layer.attention += r.batch * summaries / p.attention;
    }
    if (cpu_attention) {
      layer.cpu_attention =
          host * (kv_read / p.cpu_attention + (int4_kv ? expanded_cache / cpu_dequantize_kv : 0));
      // The output, and the softmax rows of a policy that keeps attention scores.
      const double up = m.hidden_size * 2.0 + (r.keeps_attention_scores ? heads * capacity * 4 : 0);
      layer.kv_load = host * up / p.h2d;
    } else if (selects) {
      // The attended rows but the new token's, gathered by the compute stream after the choice.
      const double gathered =
          2 * (attended - 1) * heads * double(kv_row_bytes(m, r.compression.kv));
      // Expanded twice (before the append, after the gather): the staging's rows.
      layer.attention += host * (2 * compact_expanded - expanded_cache) / dequantize_kv;
      if (kind == Kind::guessed) {
        // Guessed during the layer below: as many pages cross on the copy stream beside it; the
        // share the guess missed is gathered after the choice; the guess is a q projection of
        // the offloaded rows with this layer's weights (int8 ones: the whole qkv) and a second
        // read of their summaries.
        layer.kv_load = host * gathered / p.h2d;
        layer.attention += host * (kSpeculationMisses * gathered / p.h2d + summaries / p.attention);
        const double guessed_rows =
            weights == Storage::int8 ? m.qkv_dim() : double(m.num_heads) * m.head_dim();
        layer.gemm += gemm_seconds(p, host, guessed_rows * m.hidden_size,
                                   kernels::PrefillMath::fp32, weights);
      } else {
        layer.attention += host * gathered / p.h2d;
      }
    } else {
      layer.kv_load = (host - serial_chunks) * cache_bytes / p.h2d;
      layer.attention += serial_chunks * cache_bytes / p.h2d;
    }
    return layer;
  };
  const double layers = m.num_layers;
  double decode_total = 0;
  for (int step = 0; step < steps; ++step) {
    // The layers' mean, each kind by its count (a first layer that chooses has no layer below
    // to guess its pages).
    const int guessed = speculates ? m.num_layers - dense - (dense == 0 ? 1 : 0) : 0;
    for (const auto& [kind, count] : {std::pair{Kind::every_slot, dense},
                                      std::pair{Kind::choosing, m.num_layers - dense - guessed},
                                      std::pair{Kind::guessed, guessed}}) {
      if (count == 0) continue;
      const LayerCost layer = decode_layer(step, kind);
      const double share = count / layers / steps;
      out.decode.kv_load += layer.kv_load * share;
      out.decode.kv_store += layer.kv_store * share;
      out.decode.attention += layer.attention * share;
      out.decode.cpu_attention += layer.cpu_attention * share;
      out.decode.gemm += layer.gemm * share;  // with the serial activation copies, if any
      out.decode.act_in += layer.act_in * share;
      out.decode.act_out += layer.act_out * share;
      decode_total += layer.total() * count / layers;
    }
  }
  if (steps > 0) {
    out.decode.weights_in = weights_in.weights_in;
    out.decode.disk = weights_in.disk;
    out.decode_layer = decode_total / steps;
  }
  // The LM head: vocab x dim weights over every sequence's newest row, in chunks of at least
  // 64 rows (or a GPU batch).
  const double head_params = double(m.vocab_size) * m.word_embed_proj_dim;
  const int chunk = std::max(gpu_batch_size(r.batch, r.block.num_gpu_batches), 64);
  for (int first = 0; first < r.batch; first += chunk) {
    out.head_per_step += gemm_seconds(p, std::min(chunk, r.batch - first), head_params);
  }
  out.seconds = m.num_layers * (out.prefill.total() + decode_total) + r.gen_len * out.head_per_step;
  out.tokens_per_second = double(r.batch) * r.gen_len / out.seconds;
  return out;
}

}  // namespace offgen
