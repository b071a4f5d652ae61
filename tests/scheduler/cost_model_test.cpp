// The cost model of the block schedule: each resource's time per layer from hand-computable
// numbers, and the trade-offs the planner relies on.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/core/error.h"
#include "scheduler/cost_model.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

MachineProfile pcie_like() {
  MachineProfile p;
  p.h2d = 25e9;
  p.d2h = 20e9;
  p.disk_read = 2e9;
  p.gemm_small = 90e12;
  p.gemm_large = 500e12;
  p.attention = 2e12;
  p.cpu_attention = 80e9;
  return p;
}

// A profile of the required measurements plus `name` with the JSON value `value`.
void write_profile_with(const std::filesystem::path& path, const std::string& name,
                        const std::string& value) {
  test::write_file(path, R"({"device": "x", "measurements": {
      "h2d_pinned": {"value": 20}, "gemm_fc1_m32": {"value": 50}, "gemm_fc1_m512": {"value": 300},
      "decode_attention_device": {"value": 1500}, ")" +
                             name + R"(": {"value": )" + value + "}}}");
}

RunShape opt_run(int batch) {
  RunShape run;
  run.batch = batch;
  run.prompt_len = 512;
  run.gen_len = 32;
  run.kv_capacity = 512 + 31;
  return run;
}

TEST(CostModel, StreamingWeightsCostsTheirTransferAndH2oCutsAttention) {
  const ModelConfig model = ModelConfig::from_name("opt-30b").value();
  RunShape run = opt_run(64);
  const Prediction resident = predict(model, pcie_like(), run);
  EXPECT_EQ(resident.decode.weights_in, 0.0);
  EXPECT_EQ(resident.decode.kv_load, 0.0);
  run.weights = {0.0, 1.0};
  const Prediction streamed = predict(model, pcie_like(), run);
  // A layer of opt-30b is 2 (4h² + 2hf) = 1.23 GB: at 25 GB/s, 49 ms per layer.
  const double h = model.hidden_size, f = model.ffn_dim;
  EXPECT_NEAR(streamed.decode.weights_in, 2 * (4 * h * h + 2 * h * f) / 25e9, 1e-6);
  EXPECT_LT(streamed.tokens_per_second, resident.tokens_per_second);
  run.weights = {1.0, 0.0};
  run.kv_capacity = 206;
  const Prediction h2o = predict(model, pcie_like(), run);
  EXPECT_LT(h2o.decode.attention, resident.decode.attention);
}

TEST(CostModel, EachResourceCostsItsBytesOverItsBandwidth) {
  const ModelConfig model = ModelConfig::from_name("opt-6.7b").value();
  RunShape run = opt_run(8);
  run.gen_len = 2;  // one decode step, attending prompt + 1 slots
  run.kv_capacity = 600;
  run.weights = {0.5, 0.25};    // a quarter on disk
  run.block = {2, 0.5, false};  // 2 GPU batches of 4, 2 of each on the host
  const MachineProfile p = pcie_like();
  const Prediction got = predict(model, p, run);
  const double h = model.hidden_size, f = model.ffn_dim;
  const double layer = 2 * (4 * h * h + 2 * h * f);
  const double row = h;  // heads x head_dim
  EXPECT_NEAR(got.decode.weights_in, 0.5 * layer / p.h2d, 1e-9);
  EXPECT_NEAR(got.decode.disk, 0.25 * layer / p.disk_read, 1e-9);
  // Four host sequences stage in K and V of every slot, and send their q, k, v rows back.
  EXPECT_NEAR(got.decode.kv_load, 4 * 2 * row * 600 * 2 / p.h2d, 1e-9);
  EXPECT_NEAR(got.decode.kv_store, 4 * (3 * row * 2 + model.num_heads * 4) / p.d2h, 1e-9);
  // Eight sequences attend 513 slots on the device; two GEMM passes of 4 rows each.
  EXPECT_NEAR(got.decode.attention, 8 * 2 * row * 513 * 2 / p.attention, 1e-9);
  EXPECT_NEAR(got.decode.gemm, 2 * 2 * 32 * (layer / 2) / p.gemm_small, 1e-9);
  EXPECT_EQ(got.decode.cpu_attention, 0.0);
  const double busiest = std::max({got.decode.h2d(), got.decode.kv_store, got.decode.disk,
                                   got.decode.gpu(), got.decode.cpu_attention});
  EXPECT_DOUBLE_EQ(got.decode_layer, busiest);
  // The prefill copies the host sequences' whole cache out.
  EXPECT_NEAR(got.prefill.kv_store, 4 * 2 * row * 600 * 2 / p.d2h, 1e-9);
}

TEST(CostModel, QuestGathersOnlyTheChosenPagesOfHostCachesOnTheComputeStream) {
  const ModelConfig model = ModelConfig::from_name("opt-6.7b").value();
  RunShape run = opt_run(8);
  run.gen_len = 2;  // one decode step over 513 slots: 33 pages of 16
  run.kv_capacity = 600;
  run.block = {1, 0.0, false};  // every sequence's KV on the host, attended on the gpu tier
  const MachineProfile p = pcie_like();
  const Prediction full = predict(model, p, run);
  run.page_size = 16;
  run.pages_per_step = 8;  // 7 whole pages and the newest's one slot: 113 attended
  run.dense_layers = 0;
  const Prediction quest = predict(model, p, run);
  const double row = model.hidden_size, head_dim = model.head_dim(), heads = model.num_heads;
  EXPECT_EQ(quest.decode.kv_load, 0.0);  // nothing prefetched: the choice needs the query
  const double attend = 8 * 2 * row * 113 * 2 / p.attention;
  const double summaries = 8 * heads * 2 * head_dim * 33 * 2 / p.attention;
  const double gather = 8 * 2 * row * 112 * 2 / p.h2d;  // all but the new token's row
  EXPECT_NEAR(quest.decode.attention, attend + summaries + gather, 1e-12);
  EXPECT_NEAR(full.decode.kv_load, 8 * 2 * row * 600 * 2 / p.h2d, 1e-12);
  EXPECT_GT(quest.tokens_per_second, full.tokens_per_second);

  // Half the layers dense: the mean of a full layer and a choosing one, but that the compact
  // staging (8 pages of 16 slots for each of 8 sequences: one whole cache of 600 at a time)
  // brings a dense layer's caches in chunk by chunk, two slots deep: the copies of all but the
  // first two sequences wait on compute. So does a prefill's copy out.
  run.dense_layers = model.num_layers / 2;
  const Prediction half = predict(model, p, run);
  const double serial_chunks = full.decode.kv_load * 6 / 8;
  EXPECT_NEAR(half.prefill.kv_store, full.prefill.kv_store * 2 / 8, 1e-12);
  EXPECT_NEAR(half.prefill.attention - full.prefill.attention, full.prefill.kv_store * 6 / 8,
              1e-12);
  EXPECT_NEAR(half.decode.kv_load, (full.decode.kv_load - serial_chunks) / 2, 1e-12);
  EXPECT_NEAR(half.decode.attention,
              (full.decode.attention + serial_chunks + quest.decode.attention) / 2, 1e-12);
  // Guessed a layer ahead (every choosing layer has one below): the pages cross on the h2d queue,
  // a tenth after the choice, and the guess costs a q projection of the 8 host rows and a
  // second read of their summaries.
  run.dense_layers = 0;
  const Prediction all_choose = predict(model, p, run);
  run.dense_layers = 1;
  const Prediction one_dense = predict(model, p, run);
  run.block.speculative_pages = true;
  const Prediction guessed = predict(model, p, run);
  const double layers = model.num_layers;
  const auto choosing_share = [&](double x_full, double x_quest) {  // of 1 dense, L - 1 choosing
    return (x_full + (layers - 1) * x_quest) / layers;
  };
  EXPECT_NEAR(one_dense.decode.attention,
              choosing_share(full.decode.attention + serial_chunks, all_choose.decode.attention),
              1e-12);
  EXPECT_NEAR(guessed.decode.kv_load, choosing_share(full.decode.kv_load, gather), 1e-12);
  EXPECT_NEAR(guessed.decode.attention,
              choosing_share(full.decode.attention, attend + summaries + 0.1 * gather + summaries),
              1e-12);
  EXPECT_NEAR(
      guessed.decode.gemm - one_dense.decode.gemm,
      (layers - 1) / layers *
          gemm_seconds(p, 8, double(model.num_heads) * model.head_dim() * model.hidden_size),
      1e-12);
  run.dense_layers = 0;  // the first layer has none below: it gathers after its choice
  const Prediction first_unguessed = predict(model, p, run);
  EXPECT_NEAR(first_unguessed.decode.kv_load, (layers - 1) / layers * gather, 1e-12);
  run.block.num_gpu_batches = 2;  // the next task is the other batch's: nothing is guessed
  EXPECT_EQ(predict(model, p, run).decode.kv_load, 0.0);
  run.block.num_gpu_batches = 1;

  run.pages_per_step = 1;
  EXPECT_THROW(predict(model, p, run), Error);
}

TEST(CostModel, CpuAttentionBeatsStagingWhenPcieIsSlow) {
  const ModelConfig model = ModelConfig::from_name("opt-30b").value();
  RunShape run = opt_run(64);
  run.weights = {0.3, 0.7};
  run.block = {4, 0.0, false};
  MachineProfile slow = pcie_like();
  slow.h2d = slow.d2h = 4e9;
  const Prediction staged = predict(model, slow, run);
  run.block.cpu_attention = true;
  const Prediction on_cpu = predict(model, slow, run);
  EXPECT_GT(on_cpu.decode.cpu_attention, 0.0);
  EXPECT_EQ(on_cpu.decode.attention, 0.0);                        // nothing attended on the device
  EXPECT_LT(on_cpu.decode.kv_load, staged.decode.kv_load / 100);  // only outputs come up
  EXPECT_GT(on_cpu.tokens_per_second, staged.tokens_per_second);

  // A fast link and a slow CPU turn it around.
  MachineProfile fast = pcie_like();
  fast.h2d = fast.d2h = 200e9;
  fast.cpu_attention = 2e9;
  run.block.cpu_attention = false;
  const Prediction fast_staged = predict(model, fast, run);
  run.block.cpu_attention = true;
  EXPECT_LT(predict(model, fast, run).tokens_per_second, fast_staged.tokens_per_second);

  MachineProfile unmeasured = pcie_like();
  unmeasured.cpu_attention = 0;
  EXPECT_THROW(predict(model, unmeasured, run), Error);
}

TEST(CostModel, MoreGpuBatchesAmortizeTheWeightLoads) {
  // GPU batches of 8 with every weight streamed: each block loads a layer once for all of them.
  const ModelConfig model = ModelConfig::from_name("opt-30b").value();
  double previous = 0;
  for (const int batches : {1, 2, 4, 8}) {
    RunShape run = opt_run(8 * batches);
    run.weights = {0.0, 1.0};
    run.block = {batches, 0.0, true};
    const Prediction p = predict(model, pcie_like(), run);
    EXPECT_GT(p.tokens_per_second, previous * 1.5) << batches << " GPU batches";
    previous = p.tokens_per_second;
  }
}

// A GEMM's time goes through the measured points: exact at 1, 32, 128 and 512 rows, linear in the
// rows between them, in proportion to them past 512. A CPU-like profile's time grows from one row
// on; a GPU-like one's stays flat (weight-bandwidth bound) where its rates say so.
TEST(CostModel, GemmTimeFollowsTheMeasuredPoints) {
  MachineProfile cpu;
  cpu.gemm_one = 0.004e12;
  cpu.gemm_small = 0.05e12;
  cpu.gemm_mid = 0.1e12;
  cpu.gemm_large = 0.12e12;
  const double params = 7e6;
  EXPECT_DOUBLE_EQ(gemm_seconds(cpu, 1, params), 2 * 1 * params / cpu.gemm_one);
  EXPECT_DOUBLE_EQ(gemm_seconds(cpu, 32, params), 2 * 32 * params / cpu.gemm_small);
  EXPECT_DOUBLE_EQ(gemm_seconds(cpu, 128, params), 2 * 128 * params / cpu.gemm_mid);
  EXPECT_DOUBLE_EQ(gemm_seconds(cpu, 512, params), 2 * 512 * params / cpu.gemm_large);
  EXPECT_DOUBLE_EQ(gemm_seconds(cpu, 1024, params), 2 * gemm_seconds(cpu, 512, params));
  const double at4 = gemm_seconds(cpu, 4, params);
  EXPECT_DOUBLE_EQ(at4,
                   gemm_seconds(cpu, 1, params) +
                       3.0 / 31 * (gemm_seconds(cpu, 32, params) - gemm_seconds(cpu, 1, params)));
  double previous = 0;
  for (int rows = 1; rows <= 2048; ++rows) {
    const double t = gemm_seconds(cpu, rows, params);
    EXPECT_GE(t, previous) << rows;
    previous = t;
  }
  EXPECT_LT(at4, 0.5 * gemm_seconds(cpu, 32, params));

  // A profile from before the 1- and 128-row points: flat up to 32 rows, then the larger of that
  // and the 512-row rate.
  const MachineProfile old = pcie_like();
  EXPECT_DOUBLE_EQ(gemm_seconds(old, 4, params), gemm_seconds(old, 32, params));
  EXPECT_DOUBLE_EQ(gemm_seconds(old, 128, params),
                   std::max(2 * 32 * params / old.gemm_small, 2 * 128 * params / old.gemm_large));
}

// Cpu attention shares host memory with the copies: where the profile measured how much the two
// overlap, cpu attention adds to the copies' time by that share (the copies and the gpu among
// themselves still by `overlap`, the gpu's kernels against cpu attention fully); where it did
// not, the one overlap covers all as before.
TEST(CostModel, CpuAttentionOverlapsTheCopiesByTheProfilesHostOverlap) {
  LayerCost layer;
  layer.weights_in = 3;
  layer.gemm = 1;
  layer.cpu_attention = 2;
  EXPECT_DOUBLE_EQ(layer.total(), 3);  // host overlap not measured: the busiest
  layer.host_overlap = 0;
  EXPECT_DOUBLE_EQ(layer.total(), 5);  // copies, then cpu attention
  layer.host_overlap = 0.5;
  EXPECT_DOUBLE_EQ(layer.total(), 3 + 0.5 * 2);
  layer.host_overlap = 1;
  EXPECT_DOUBLE_EQ(layer.total(), 3);
  layer.overlap = 0;  // the gpu no longer hides behind the copies either
  EXPECT_DOUBLE_EQ(layer.total(), 4);
  layer.overlap = 1;
  layer.host_overlap = 0;
  layer.gemm = 6;  // gpu-bound: cpu attention contends with the copies only
  EXPECT_DOUBLE_EQ(layer.total(), 6);
  layer.gemm = 1;
  layer.overlap = 0;
  layer.cpu_attention = 0;
  layer.host_overlap = 0;
  EXPECT_DOUBLE_EQ(layer.total(), 4);  // nothing on the CPU: host overlap plays no part

  // Offloaded KV attended on the CPU: a profile that measured no hiding predicts a slower run.
  const ModelConfig model = ModelConfig::from_name("opt-1.3b").value();
  RunShape run = opt_run(8);
  run.weights = {0.5, 0.5};
  run.block.kv_gpu_fraction = 0;
  run.block.cpu_attention = true;
  MachineProfile p = pcie_like();
  p.cpu_attention = 20e9;
  const Prediction unmeasured = predict(model, p, run);
  p.host_overlap = 1;
  EXPECT_DOUBLE_EQ(predict(model, p, run).seconds, unmeasured.seconds);  // as overlap 1 gives
  p.host_overlap = 0;
  const Prediction contended = predict(model, p, run);
  EXPECT_GT(contended.seconds, unmeasured.seconds);
  EXPECT_EQ(contended.decode.host_overlap, 0);

  test::TempDir dir;
  const auto path = dir.path() / "profile.json";
  for (const char* overlap : {"0.3", "1.2", "-0.5"}) {
    write_profile_with(path, "copy_cpu_attention_overlap", overlap);
    if (std::string(overlap) == "0.3") {
      EXPECT_DOUBLE_EQ(MachineProfile::load(path).host_overlap, 0.3);
    } else {
      EXPECT_THROW(MachineProfile::load(path), Error) << overlap;
    }
  }
}

// Resources that overlap fully cost the busiest; not at all, their sum; the profile's overlap
// sets where between, and it comes from the profile file (in [0, 1]; absent: 1).
TEST(CostModel, ALayerCostsBetweenItsBusiestResourceAndTheSumByTheOverlap) {
  LayerCost layer;
  layer.weights_in = 3;
  layer.kv_store = 1;
  layer.gemm = 6;
  layer.cpu_attention = 2;
  EXPECT_DOUBLE_EQ(layer.total(), 6);
  layer.overlap = 0;
  EXPECT_DOUBLE_EQ(layer.total(), 12);
  layer.overlap = 0.25;
  EXPECT_DOUBLE_EQ(layer.total(), 6 + 0.75 * 6);

  const ModelConfig model = ModelConfig::from_name("opt-1.3b").value();
  RunShape run = opt_run(8);
  run.weights = {0.5, 0.5};
  MachineProfile p = pcie_like();
  const Prediction overlapped = predict(model, p, run);
  p.overlap = 0;
  const Prediction serial = predict(model, p, run);
  EXPECT_NEAR(
      serial.decode_layer,
      serial.decode.h2d() + serial.decode.d2h() + serial.decode.gpu() + serial.decode.cpu_attention,
      1e-12);
  EXPECT_GT(serial.seconds, overlapped.seconds);

  test::TempDir dir;
  const auto path = dir.path() / "profile.json";
  for (const char* overlap : {"0.4", "1.5", "-0.1"}) {
    write_profile_with(path, "copy_compute_overlap", overlap);
    if (std::string(overlap) == "0.4") {
      EXPECT_DOUBLE_EQ(MachineProfile::load(path).overlap, 0.4);
    } else {
      EXPECT_THROW(MachineProfile::load(path), Error) << overlap;
    }
  }
}

TEST(CostModel, OldProfilesWithoutD2hOrCpuAttentionStillLoad) {
  test::TempDir dir;
  const auto path = dir.path() / "old.json";
  test::write_file(path,
                   R"({"device": "old", "measurements": {
                       "h2d_pinned": {"value": 20}, "gemm_fc1_m32": {"value": 50},
                       "gemm_fc1_m512": {"value": 300}, "decode_attention_device": {"value": 1500}}})");
  const MachineProfile p = MachineProfile::load(path);
  EXPECT_EQ(p.h2d, 20e9);
  EXPECT_EQ(p.d2h, 20e9);  // falls back to h2d
  EXPECT_EQ(p.cpu_attention, 0.0);
  EXPECT_EQ(p.disk_read, 0.0);
  EXPECT_EQ(p.device, "old");
  EXPECT_EQ(p.gemm_one, 0.0);
  EXPECT_EQ(p.gemm_mid, 0.0);
  EXPECT_EQ(p.overlap, 1.0);

  test::write_file(path,
                   R"({"device": "new", "measurements": {
                       "h2d_pinned": {"value": 20}, "gemm_fc1_m1": {"value": 2},
                       "gemm_fc1_m32": {"value": 50}, "gemm_fc1_m128": {"value": 150},
                       "gemm_fc1_m512": {"value": 300}, "decode_attention_device": {"value": 1500}}})");
  const MachineProfile q = MachineProfile::load(path);
  EXPECT_EQ(q.gemm_one, 2e12);
  EXPECT_EQ(q.gemm_mid, 150e12);
}

// Profiles since a layer's GEMMs were measured cold: those rates win over fc1's, and prefill
// attention has a rate of its own (older profiles: the 512-row GEMM's).
TEST(CostModel, LayerGemmsAndPrefillAttentionHaveTheirOwnRates) {
  test::TempDir dir;
  const auto path = dir.path() / "profile.json";
  test::write_file(path, R"({"device": "d", "measurements": {
      "h2d_pinned": {"value": 20}, "gemm_fc1_m32": {"value": 50}, "gemm_fc1_m512": {"value": 300},
      "gemm_layer_m1": {"value": 1}, "gemm_layer_m32": {"value": 25},
      "gemm_layer_m128": {"value": 100}, "gemm_layer_m512": {"value": 200},
      "prefill_attention": {"value": 40}, "decode_attention_device": {"value": 1500}}})");
  const MachineProfile p = MachineProfile::load(path);
  EXPECT_TRUE(p.layer_gemms);
  EXPECT_EQ(p.gemm_one, 1e12);
  EXPECT_EQ(p.gemm_small, 25e12);
  EXPECT_EQ(p.gemm_mid, 100e12);
  EXPECT_EQ(p.gemm_large, 200e12);
  EXPECT_EQ(p.prefill_attention, 40e12);

  const ModelConfig model = ModelConfig::from_name("opt-1.3b").value();
  RunShape run;
  run.batch = 4;
  run.prompt_len = 512;
  run.gen_len = 2;
  run.kv_capacity = 513;
  // Causal attention over the prompt: 2 x batch x heads x P^2 x head_dim FLOPs at 40 TFLOP/s.
  const double flops = 2.0 * 4 * model.num_heads * 512.0 * 512 * model.head_dim();
  EXPECT_NEAR(predict(model, p, run).prefill.attention, flops / 40e12, 1e-12);
  MachineProfile older = p;
  older.prefill_attention = 0;
  EXPECT_NEAR(predict(model, older, run).prefill.attention, flops / 200e12, 1e-12);
  // bf16 math: its own rate where the profile has one, else the fp32 attention's.
  run.prefill_math = kernels::PrefillMath::bf16;
  MachineProfile bf16 = p;
  bf16.gemm_bf16_mid = 150e12;
  bf16.gemm_bf16_large = 300e12;
  EXPECT_NEAR(predict(model, bf16, run).prefill.attention, flops / 40e12, 1e-12);
  bf16.prefill_attention_bf16 = 70e12;
  EXPECT_NEAR(predict(model, bf16, run).prefill.attention, flops / 70e12, 1e-12);
  run.prefill_math = kernels::PrefillMath::fp32;
  EXPECT_NEAR(predict(model, bf16, run).prefill.attention, flops / 40e12, 1e-12);
}

}  // namespace
}  // namespace offgen
