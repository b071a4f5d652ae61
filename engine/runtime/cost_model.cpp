#include "engine/runtime/cost_model.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "engine/core/error.h"

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

// fp16 weights of one decoder layer and its GEMM parameters (q, k, v, out, fc1, fc2).
double layer_params(const OptConfig& m) {
  const double h = m.hidden_size;
  const double f = m.ffn_dim;
  return 4 * h * h + 2 * h * f;
}

// A GEMM of `rows` rows over `params` weights: at small row counts the weights' bandwidth bounds
// it (measured at 32 rows), at large ones the FLOP rate.
double gemm_seconds(const MachineProfile& p, double rows, double params) {
  return std::max(2 * 32 * params / p.gemm_small, 2 * rows * params / p.gemm_large);
}

}  // namespace

MachineProfile MachineProfile::load(const std::filesystem::path& path) {
  std::ifstream in(path);
  OFFGEN_CHECK(in.good(), "cannot read the profile {} (make one with `offgen calibrate`)",
               path.string());
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
    MachineProfile p;
    p.device = json.value("device", "");
    p.h2d = measurement(json, path, "h2d_pinned", 1e9);
    p.disk_read = measurement(json, path, "disk_read", 1e9, false);
    p.gemm_small = measurement(json, path, "gemm_fc1_m32", 1e12);
    p.gemm_large = measurement(json, path, "gemm_fc1_m512", 1e12);
    p.attention = measurement(json, path, "decode_attention_device", 1e9);
    return p;
  } catch (const nlohmann::json::exception& e) {
    fail("profile {} is not a calibrate profile: {}", path.string(), e.what());
  }
}

double LayerCost::total() const {
  return std::max(transfer, gemm + attention);
}

Prediction predict(const OptConfig& m, const MachineProfile& p, const RunShape& r) {
  OFFGEN_CHECK(r.batch > 0 && r.prompt_len > 0 && r.gen_len > 0 && r.kv_capacity > 0,
               "cost model: batch, lengths and KV capacity must be positive");
  const double params = layer_params(m);
  const double layer_bytes = params * 2;
  const double batch = r.batch;
  const double heads = m.num_heads;
  const double dim = m.head_dim();
  const double off_gpu = std::max(0.0, 1.0 - r.weights_gpu);
  LayerCost weights_in;
  // Pinned and disk parts both cross PCIe; the disk part is also read from disk, pipelined with
  // the copies (the slowest stage sets the pace).
  weights_in.transfer = off_gpu * layer_bytes / p.h2d;
  if (r.weights_disk > 0) {
    OFFGEN_CHECK(p.disk_read > 0, "the profile has no disk measurement (calibrate with --disk)");
    weights_in.transfer = std::max(weights_in.transfer, r.weights_disk * layer_bytes / p.disk_read);
  }

  Prediction out;
  out.prefill = weights_in;
  const double tokens = batch * r.prompt_len;
  out.prefill.gemm = gemm_seconds(p, tokens, params);
  // Causal attention: q·k and p·v over half of the P x P scores per head.
  const double attention_flops = 2.0 * batch * heads * r.prompt_len * r.prompt_len * dim;
  out.prefill.attention = attention_flops / p.gemm_large;

  double decode_total = 0;
  double attention_total = 0;
  const int steps = r.gen_len - 1;
  out.decode = weights_in;
  out.decode.gemm = gemm_seconds(p, batch, params);
  for (int step = 0; step < steps; ++step) {
    const double attended = std::min(r.prompt_len + step + 1, r.kv_capacity);
    LayerCost layer = out.decode;
    layer.attention = batch * heads * attended * dim * 2 * 2 / p.attention;
    attention_total += layer.attention;
    decode_total += layer.total();
  }
  if (steps > 0) out.decode.attention = attention_total / steps;
  // The tied LM head: vocab x dim weights, every step's newest rows.
  out.head_per_step = gemm_seconds(p, batch, double(m.vocab_size) * m.word_embed_proj_dim);
  out.seconds = m.num_layers * (out.prefill.total() + decode_total) + r.gen_len * out.head_per_step;
  out.tokens_per_second = batch * r.gen_len / out.seconds;
  return out;
}

}  // namespace offgen
