#include "engine/cli/commands.h"

#include <spdlog/spdlog.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "engine/cli/flag_names.h"
#include "engine/cli/ranks.h"
#include "engine/core/error.h"
#include "engine/core/json_integer.h"
#include "engine/core/units.h"
#include "policies/kv_budget.h"
#include "policies/kv_policy.h"

namespace offgen::cli {

namespace {

// A validator that parses the whole text as a number (integer or not) and checks `accepts`.
template <typename Accepts>
CLI::Validator number_validator(bool integer, Accepts accepts, std::string what, std::string name) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        std::size_t used = 0;
        try {
          const double value =
              integer ? static_cast<double>(std::stoll(text, &used)) : std::stod(text, &used);
          if (used == text.size() && accepts(value)) return {};
        } catch (const std::exception&) {
        }
        return "must be " + what + " (got '" + text + "')";
      },
      std::move(name));
}

}  // namespace

const CLI::Validator kPositiveInteger = number_validator(
    true, [](double v) { return v >= 1.0; }, "a positive integer", "POSITIVE");
const CLI::Validator kNonNegativeNumber = number_validator(
    false, [](double v) { return v >= 0.0; }, "a number >= 0", ">=0");
const CLI::Validator kProbability = number_validator(
    false, [](double v) { return v > 0.0 && v <= 1.0; }, "a number in (0, 1]", "(0,1]");

ModelConfig model_config(const std::string& model) {
  return resolve_model_name(model, BareConfigName::refused).config();
}

nlohmann::ordered_json plan_model_config(const ModelConfig& config) {
  nlohmann::ordered_json json = {{"num_hidden_layers", config.num_layers},
                                 {"hidden_size", config.hidden_size},
                                 {"num_attention_heads", config.num_heads},
                                 {"ffn_dim", config.ffn_dim},
                                 {"vocab_size", config.vocab_size},
                                 {"max_position_embeddings", config.max_position_embeddings},
                                 {"word_embed_proj_dim", config.word_embed_proj_dim}};
  // OPT plans keep the fields they always had; other families say what else sizes them.
  if (config.family != ModelFamily::opt) {
    json["model_type"] = config.model_type;
    json["num_key_value_heads"] = config.kv_heads();
    json["tie_word_embeddings"] = config.tie_word_embeddings;
  }
  return json;
}

CommonOptions CommonOptions::measuring() {
  CommonOptions options;
  options.model = "opt-125m";
  options.bare_config_name = BareConfigName::dummy_weights;
  return options;
}

ModelName CommonOptions::model_name() const {
  if (dummy && !model.starts_with(kDummyPrefix)) {
    OFFGEN_CHECK(ModelConfig::from_name(model).has_value(),
                 "--dummy takes a config name as --model ({}), not '{}'",
                 fmt::join(ModelConfig::known_names(), ", "), model);
    return resolve_model_name(std::string(kDummyPrefix) + model, bare_config_name);
  }
  return resolve_model_name(model, bare_config_name);
}

namespace {

// "layers 24, hidden 2048, ..." from a plan's model_config, for messages.
std::string describe_shape(const nlohmann::json& shape) {
  if (!shape.is_object()) return std::string(shape.type_name());
  std::vector<std::string> fields;
  for (const auto& [key, value] : shape.items()) {
    fields.push_back(key + " " + (value.is_primitive() ? value.dump() : value.type_name()));
  }
  return fmt::format("{}", fmt::join(fields, ", "));
}

// The plan was made for --model's shape: an error naming the model it was planned for otherwise.
void check_plan_model(const nlohmann::json& plan, const std::string& path,
                      const std::string& model) {
  if (!plan.contains("model_config")) {
    spdlog::warn(
        "--plan {} does not say which model it was planned for (written by hand or by an older "
        "offgen), so that is not checked; `offgen plan --output` writes one that does",
        path);
    return;
  }
  const nlohmann::json wanted = plan_model_config(model_config(model));
  if (plan.at("model_config") == wanted) return;
  const std::string planned_for = plan.contains("model") && plan.at("model").is_string()
                                      ? plan.at("model").get<std::string>()
                                      : std::string("another model");
  fail(
      "--plan {} was planned for --model {} ({}), not for this --model {} ({}): plan again with "
      "`offgen plan --model {} ... --output {}`",
      path, planned_for, describe_shape(plan.at("model_config")), model, describe_shape(wanted),
      model, path);
}

// The memory the plan needs fits the budgets given (--gpu-mem, --cpu-mem); budgets left to the
// device's defaults are checked when the model loads.
void check_plan_budgets(const nlohmann::json& plan, const std::string& path,
                        const DeviceBudgets& budgets) {
  struct Tier {
    const char* needed;
    const char* planned_under;
    std::uint64_t budget;
    const char* flag;
    const char* what;
  };
  for (const Tier& tier :
       {Tier{"gpu_bytes", "gpu_budget_bytes", budgets.gpu, "--gpu-mem", "on the gpu tier"},
        Tier{"pinned_bytes", "pinned_budget_bytes", budgets.pinned, "--cpu-mem",
             "of pinned memory"}}) {
    if (tier.budget == 0 || !plan.contains(tier.needed)) continue;
    const std::optional<std::uint64_t> needed = json_integer<std::uint64_t>(plan.at(tier.needed));
    OFFGEN_CHECK(needed.has_value(), "--plan {}: '{}' must be a byte count", path, tier.needed);
    if (*needed <= tier.budget) continue;
    const std::optional<std::uint64_t> under =
        plan.contains(tier.planned_under) ? json_integer<std::uint64_t>(plan.at(tier.planned_under))
                                          : std::nullopt;
    fail(
        "--plan {} needs {} {}{}, more than {} {} gives: plan again under this {} (`offgen plan "
        "... {} {} --output {}`), or raise {}",
        path, format_bytes(*needed), tier.what,
        under ? fmt::format(" (it was planned under {} {})", tier.flag, format_bytes(*under))
              : std::string(),
        tier.flag, format_bytes(tier.budget), tier.flag, tier.flag, tier.budget, path, tier.flag);
  }
}

// A plan's memory holds only for the storage it was planned with.
void check_plan_compression(const nlohmann::json& plan, const std::string& path,
                            const Compression& compression) {
  struct Setting {
    const char* key;
    const char* flag;
    bool given;
  };
  for (const Setting& s :
       {Setting{"compress_weights", "--compress-weights", compression.weights == Storage::int4},
        Setting{"int8_weights", "--int8-weights", compression.weights == Storage::int8},
        Setting{"compress_kv", "--compress-kv", compression.kv == Storage::int4}}) {
    if (!plan.contains(s.key)) continue;
    OFFGEN_CHECK(plan.at(s.key).is_boolean(), "--plan {}: '{}' must be true or false", path, s.key);
    const bool planned = plan.at(s.key).get<bool>();
    OFFGEN_CHECK(planned == s.given,
                 "--plan {} was planned {} {}, and this run is {} it: its memory would not be what "
                 "the plan says. Plan again {} {} (`offgen plan ... --output {}`), or {} {}",
                 path, planned ? "with" : "without", s.flag, s.given ? "given" : "not given",
                 s.given ? "with" : "without", s.flag, path, planned ? "give" : "drop", s.flag);
  }
}

}  // namespace

Placement read_plan_file(const std::string& path, const std::string& model,
                         const DeviceBudgets& budgets, const Compression& compression) {
  std::ifstream in(path);
  OFFGEN_CHECK(in.good(), "--plan {}: cannot read it (write one with `offgen plan --output`)",
               path);
  nlohmann::json plan;
  try {
    plan = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("--plan {}: not a plan file: {}", path, e.what());
  }
  OFFGEN_CHECK(plan.is_object(), "--plan {}: not a plan file (expected a JSON object)", path);
  // Files from `offgen plan` say what they are; older ones and hand-written ones at least carry
  // the batch size (a profile or a bench result passed as --plan has neither).
  if (plan.contains("kind")) {
    OFFGEN_CHECK(plan.at("kind") == kPlanKind,
                 "--plan {}: not a plan file: its 'kind' is {}, and `offgen plan --output` "
                 "writes \"{}\"",
                 path, plan.at("kind").is_string() ? plan.at("kind").dump() : "not a string",
                 kPlanKind);
  } else {
    OFFGEN_CHECK(plan.contains("batch_size"),
                 "--plan {}: not a plan file: it has neither 'kind' nor 'batch_size' (write one "
                 "with `offgen plan --output`; a machine profile goes to --profile)",
                 path);
  }
  check_plan_model(plan, path, model);
  check_plan_budgets(plan, path, budgets);
  check_plan_compression(plan, path, compression);
  try {
    return placement_from_json(plan);
  } catch (const Error& e) {
    fail("--plan {}: {}", path, e.what());
  }
}

void add_output_mode_flags(CLI::App& cmd, bool& resume, bool& overwrite,
                           const std::string& resume_help) {
  CLI::Option* resume_flag = cmd.add_flag("--resume", resume, resume_help);
  cmd.add_flag("--overwrite", overwrite,
               "replace an --output that already holds results (without --resume or "
               "--overwrite, such a file is an error, so no finished work is lost)")
      ->excludes(resume_flag);
}

namespace {

// The placement flags but --batch-size, which places a run for generate and score only (bench's
// rows are blocks of their --batch).
const std::vector<std::string> kPlacementFlags = {"--num-gpu-batches", "--weights-gpu",
                                                  "--weights-cpu",     "--kv-gpu",
                                                  "--cpu-attention",   "--activations-cpu"};

// After parsing: a placement flag beside --plan is a usage error naming it (the plan would
// silently replace it). A plan sets --batch-size too.
void refuse_placement_beside_plan(const CLI::App& app) {
  if (app.count("--plan") == 0) return;
  std::vector<std::string> flags = {"--batch-size"};
  flags.insert(flags.end(), kPlacementFlags.begin(), kPlacementFlags.end());
  for (const std::string& flag : flags) {
    if (app.count(flag) == 0) continue;
    throw CLI::ValidationError(fmt::format(
        "{} cannot be given with --plan: the plan file sets the whole placement ({}). Drop {} to "
        "run the plan as it is, or drop --plan and place the run with flags",
        flag, fmt::join(flags, ", "), flag));
  }
}

}  // namespace

void plan_unless_placed(CLI::App& app, CommonOptions& options, std::vector<std::string> also) {
  std::vector<std::string> flags = {"--plan"};
  flags.insert(flags.end(), kPlacementFlags.begin(), kPlacementFlags.end());
  flags.insert(flags.end(), also.begin(), also.end());
  // Replaces add_common_options' callback, so it refuses what that one refuses.
  app.callback([&app, &options, flags] {
    refuse_placement_beside_plan(app);
    std::size_t given = 0;
    for (const std::string& flag : flags) given += app.count(flag);
    options.placement_source = given == 0 ? PlacementSource::planned : PlacementSource::as_given;
  });
}

Placement CommonOptions::flag_placement() const {
  Placement out;
  out.gpu_batch = batch_size;
  out.block.num_gpu_batches = num_gpu_batches;
  out.block.kv_gpu_fraction = kv_gpu_percent / 100.0;
  out.block.cpu_attention = cpu_attention;
  out.block.activations_on_host = activations_cpu;
  out.weights.gpu = weights_gpu_percent / 100.0;
  // Without --weights-cpu, the weights not on the gpu tier are all in pinned memory.
  out.weights.pinned =
      weights_cpu_percent >= 0.0 ? weights_cpu_percent / 100.0 : 1.0 - out.weights.gpu;
  return out;
}

EngineOptions CommonOptions::engine_options() const {
  return naming_flags([this] {
    EngineOptions out;
    out.model = model_name().spec();
    out.tokenizer = tokenizer;
    out.device = parse_device_choice(device);
    out.dummy_seed = dummy_seed;
    // Ranks of one MPI job on this machine take one GPU each and share its host memory.
    const RankInfo rank = job_ranks().info();
    out.gpu_slot = rank.local_rank;
    out.budgets.host_sharers = static_cast<std::uint32_t>(rank.local_size);
    if (!gpu_mem.empty()) out.budgets.gpu = parse_bytes(gpu_mem);
    if (!cpu_mem.empty()) {
      // One cap for host memory, pinned included: pinned is host memory the driver locked.
      out.budgets.host = parse_bytes(cpu_mem);
      out.budgets.pinned = out.budgets.host;
    }
    OFFGEN_CHECK(!(compress_weights && int8_weights),
                 "--compress-weights (int4) and --int8-weights are two storages of the same "
                 "weights: give one of them");
    out.compression.weights =
        compress_weights ? Storage::int4 : (int8_weights ? Storage::int8 : Storage::fp16);
    out.compression.kv = compress_kv ? Storage::int4 : Storage::fp16;
    out.prefill_math =
        prefill_math == "bf16" ? kernels::PrefillMath::bf16 : kernels::PrefillMath::fp32;
    out.placement = plan.empty() ? flag_placement()
                                 : read_plan_file(plan, out.model, out.budgets, out.compression);
    out.disk = disk;
    out.block_seconds = block_seconds;
    out.continuous_batching = continuous_batching;
    out.policy.kind = parse_policy(policy);
    out.policy.recent_fraction = recent_fraction;
    out.policy.sinks = sinks;
    out.policy.observation_window = observation_window;
    out.policy.pool_kernel = pool_kernel;
    out.policy.pyramid_beta = pyramid_beta;
    out.policy.page_size = page_size;
    out.policy.dense_layers = dense_layers;
    // Like --page-size, a quest option: the other policies choose no pages to guess.
    out.placement.block.speculative_pages = speculate_pages;
    OFFGEN_CHECK(kv_budget.empty() || out.policy.kind != PolicyKind::full,
                 "--kv-budget {} means nothing to --policy full, which keeps every token: drop "
                 "--kv-budget, or choose a policy that evicts (--policy h2o, local, streaming, "
                 "tova, snapkv, pyramidkv) or selects (--policy quest)",
                 kv_budget);
    if (!kv_budget.empty()) out.kv_budget = KvBudget::parse(kv_budget);
    validate_policy_budget(out.policy, out.kv_budget);  // before any planning or loading
    return out;
  });
}

void add_block_seconds_flag(CLI::App& cmd, double& block_seconds) {
  cmd.add_option("--block-seconds", block_seconds,
                 "keep each block of requests (with continuous batching: each request's life) "
                 "near this many seconds of work, so results are written (and kept on an "
                 "interrupt) at least about this often; 0 = run the planned block")
      ->check(kNonNegativeNumber)
      ->capture_default_str();
}

void add_sampling_flags(CLI::App& cmd, float& temperature, int& top_k, float& top_p) {
  cmd.add_option("--temperature", temperature, "0 = greedy")
      ->check(kNonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--top-k", top_k, "0 = off")->check(kNonNegativeNumber)->capture_default_str();
  cmd.add_option("--top-p", top_p, "nucleus mass in (0, 1]; 1 = off")
      ->check(kProbability)
      ->capture_default_str();
}

void add_common_options(CLI::App& app, CommonOptions& options) {
  const bool bare_is_dummy = options.bare_config_name == BareConfigName::dummy_weights;
  CLI::Option* model = app.add_option(
      "--model", options.model,
      std::string(
          "a Hugging Face checkpoint directory (OPT or the LLaMA family); a llama.cpp GGUF "
          "file (LLaMA family, F16 / BF16 / F32 / Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q4_K / Q5_K "
          "/ Q6_K, dequantized to fp16 at load) or a folder holding one; a Hugging Face name "
          "(facebook/opt-1.3b) found in the local cache ($HF_HUB_CACHE, $HF_HOME/hub or "
          "~/.cache/huggingface/hub); or dummy:NAME for deterministic dummy weights of a "
          "config name (opt-125m ... opt-175b, llama-2-7b, ...)") +
          (bare_is_dummy ? ". A bare config name means dummy weights too" : ""));
  if (bare_is_dummy) {
    model->capture_default_str();
  } else {
    model->required();
  }
  app.add_flag("--dummy", options.dummy,
               "deterministic dummy (random) weights of the --model config name, the same as "
               "--model dummy:NAME: speed and memory are real, the text is noise");
  app.add_option("--tokenizer", options.tokenizer,
                 "directory with vocab.json + merges.txt or tokenizer.json, or a GGUF file "
                 "(default: the model's own)");
  app.add_option("--device", options.device, "auto, cuda or cpu")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str();
  app.add_option("--batch-size", options.batch_size, "sequences per GPU batch")
      ->check(kPositiveInteger)
      ->capture_default_str();
  app.add_option("--num-gpu-batches", options.num_gpu_batches,
                 "GPU batches per block: they share each layer's weight load, so streamed weights "
                 "cross PCIe once per block")
      ->check(kPositiveInteger)
      ->capture_default_str();
  app.add_option("--kv-gpu", options.kv_gpu_percent,
                 "percent of each GPU batch's sequences whose KV cache stays on the gpu tier; the "
                 "rest lives in pinned host memory")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  app.add_flag("--cpu-attention", options.cpu_attention,
               "attend the host-resident KV cache on the CPU (only q, the new k, v and the output "
               "cross PCIe) instead of copying it to the gpu");
  app.add_flag("--activations-cpu", options.activations_cpu,
               "keep the block's hidden states in pinned host memory: the gpu tier holds two GPU "
               "batches' worth, loaded and stored around each layer");
  app.add_option("--gpu-mem", options.gpu_mem,
                 "memory budget of the gpu tier, e.g. 16GiB (default: what the device has)");
  app.add_option("--cpu-mem", options.cpu_mem,
                 "memory budget of host memory (pinned and pageable each), e.g. 64GiB (default: "
                 "what the machine has, less a reserve)");
  app.add_option("--weights-gpu", options.weights_gpu_percent,
                 "percent of each layer's weights kept on the gpu tier; the rest stays in pinned "
                 "host memory and streams in layer by layer")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  app.add_option("--weights-cpu", options.weights_cpu_percent,
                 "percent of each layer's weights in pinned host memory (default: all that is not "
                 "on the gpu tier); what is left goes to --disk")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--disk", options.disk,
                 "folder for weights on the disk tier (read back with direct, aligned reads)");
  app.add_flag("--compress-weights", options.compress_weights,
               "keep and move the decoder layers' weights in FlexGen's 4-bit group-wise format "
               "(groups of 64, ~0.28x the bytes), each layer expanded to fp16 before its kernels; "
               "the embeddings are rounded through the same format");
  app.add_flag("--int8-weights", options.int8_weights,
               "keep, move and multiply the decoder layers' weights in int8, per output channel "
               "(~0.5x the bytes; activations quantized per 128 values of k; the cpu device, "
               "with AMX's tdpbusd or AVX512-VNNI dot products where the CPU has them); the "
               "embeddings and the LM head stay fp16")
      ->excludes("--compress-weights");
  app.add_flag(
      "--compress-kv", options.compress_kv,
      "keep and move the KV cache in FlexGen's 4-bit group-wise format (groups of 64 "
      "along head_dim: 0.28x the bytes for a head_dim of 64 or 128, 0.45x for 80); a new token "
      "attends in fp16 at its own step");
  app.add_option("--prefill-math", options.prefill_math,
                 "how the cpu device multiplies a prefill: fp32 (exact), or bf16 (operands "
                 "rounded to bf16, fp32 sums: twice the rate on a CPU with AVX512-BF16, AMX's "
                 "tile unit where it has AMX-BF16), for the GEMMs of fp16 weights and the "
                 "prefill's attention (with --int8-weights the GEMMs stay int8 and the attention "
                 "runs in bf16); decode steps are exact either way")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  app.add_option("--plan", options.plan,
                 "plan file written by `offgen plan --output`: it sets the placement, so "
                 "--batch-size, --num-gpu-batches, --weights-gpu, --weights-cpu, --kv-gpu, "
                 "--cpu-attention and --activations-cpu cannot be given with it; it must be "
                 "planned for this --model and fit --gpu-mem / --cpu-mem");
  app.add_option("--profile", options.profile,
                 "machine profile from `offgen calibrate` for the planner and predictions "
                 "(default: the profile calibrate cached for this device, else a quick "
                 "calibration, cached)");
  app.add_option("--dummy-seed", options.dummy_seed, "seed of dummy weights")
      ->capture_default_str();
  app.add_option("--policy", options.policy,
                 "KV policy: one that evicts, or quest, which keeps every token and attends to "
                 "the pages a step's query bounds highest")
      ->check(CLI::IsMember(policy_names()))
      ->capture_default_str();
  app.add_option("--kv-budget", options.kv_budget,
                 "cached tokens per (layer, sequence, head) (quest: tokens a decode step attends): "
                 "a fraction < 1 of prompt + generation length, or a token count >= 1 (needed by "
                 "every policy but full)");
  app.add_option("--recent-fraction", options.recent_fraction,
                 "h2o: share of the budget kept for the most recent tokens")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--sinks", options.sinks, "streaming: attention-sink tokens kept from the start")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--observation-window", options.observation_window,
                 "snapkv, pyramidkv: the last prompt queries whose attention scores the prompt, "
                 "kept whole")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--pool-kernel", options.pool_kernel,
                 "snapkv, pyramidkv: width (odd) of the average pooling of the prompt's scores")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--pyramid-beta", options.pyramid_beta,
                 "pyramidkv: the top layer keeps 1/beta of the average prefix budget, the bottom "
                 "layer the rest of twice it")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--page-size", options.page_size,
                 "quest: slots per page of the cache; a step attends to whole pages, at least the "
                 "first and the newest")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--dense-layers", options.dense_layers,
                 "quest: the first layers attend every token (Quest's choice: their attention is "
                 "too broad to choose pages from)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag(
      "--speculate-pages", options.speculate_pages,
      "quest, host KV attended on the gpu, every weight on the gpu: each layer guesses the "
      "next one's pages from its own input and copies them while it computes; the pages "
      "attended are still the exact choice. The gpu tier then stages whole caches (without "
      "it, only the pages a step attends)");
  // plan_unless_placed replaces this callback with one that refuses the same.
  app.callback([&app] { refuse_placement_beside_plan(app); });
}

}  // namespace offgen::cli
