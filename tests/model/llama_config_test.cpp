// ModelConfig for the LLaMA family: config.json files as published (LLaMA 2, LLaMA 3.1, Mistral,
// Qwen2, TinyLlama), the built-in sizes with their published parameter counts, rotary frequencies
// and every rejection.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numbers>

#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"
#include "engine/model/model_tensors.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using Json = nlohmann::json;

// meta-llama/Llama-2-7b-hf's config.json as released.
constexpr const char* kLlama2_7b = R"({
  "architectures": ["LlamaForCausalLM"],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 11008,
  "max_position_embeddings": 4096,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 32,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "tie_word_embeddings": false,
  "torch_dtype": "float16",
  "transformers_version": "4.31.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
})";

// meta-llama/Llama-3.1-8B's config.json as released.
constexpr const char* kLlama31_8b = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
})";

// mistralai/Mistral-7B-v0.1's config.json as released.
constexpr const char* kMistral7b = R"({
  "architectures": ["MistralForCausalLM"],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mistral",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "sliding_window": 4096,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.34.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
})";

// Qwen/Qwen2-0.5B's config.json as released.
constexpr const char* kQwen2_05b = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 131072,
  "max_window_layers": 24,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 131072,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

ModelConfig parse(const std::string& text) {
  return ModelConfig::from_json_text(text, "config.json");
}

std::string edited(const char* base, const Json& changes) {
  Json json = Json::parse(base);
  for (const auto& [key, value] : changes.items()) json[key] = value;
  return json.dump();
}

std::string llama_parse_error(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LlamaConfig, Llama2AsPublished) {
  const ModelConfig c = parse(kLlama2_7b);
  EXPECT_EQ(c.family, ModelFamily::llama);
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.kv_heads(), 32);
  EXPECT_EQ(c.ffn_dim, 11008);
  EXPECT_EQ(c.ffn_in_rows(), 2 * 11008);
  EXPECT_EQ(c.qkv_dim(), 3 * 4096);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.position_offset, 0);
  EXPECT_FLOAT_EQ(c.layer_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::none);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.out_bias);
  EXPECT_TRUE(c.rotary() && c.rms_norm() && c.gated_mlp());
  EXPECT_FALSE(c.learned_positions());
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.max_positions(), 4096);
  // The published parameter count of Llama-2-7b.
  EXPECT_EQ(c.num_parameters(), 6'738'415'616);
}

TEST(LlamaConfig, Llama31WithGroupedQueriesScalingAndSeveralEos) {
  const ModelConfig c = parse(kLlama31_8b);
  EXPECT_EQ(c.kv_heads(), 8);
  EXPECT_EQ(c.kv_dim(), 8 * 128);
  EXPECT_EQ(c.qkv_dim(), 4096 + 2 * 1024);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::llama3);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.eos_token_id, 128001);
  EXPECT_EQ(c.more_eos_token_ids, (std::vector<int>{128008, 128009}));
  EXPECT_TRUE(c.is_eos(128009));
  EXPECT_FALSE(c.is_eos(128000));
  EXPECT_EQ(c.num_parameters(), 8'030'261'248);
}

TEST(LlamaConfig, MistralSlidingWindowLimitsPositions) {
  const ModelConfig c = parse(kMistral7b);
  EXPECT_EQ(c.model_type, "mistral");
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.max_positions(), 4096);
  EXPECT_EQ(c.num_parameters(), 7'241'732'096);
}

TEST(LlamaConfig, Qwen2HasQkvBiasesAndATiedHead) {
  const ModelConfig c = parse(kQwen2_05b);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.out_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim(), 64);
  EXPECT_EQ(c.kv_heads(), 2);
  // use_sliding_window false: the window field is ignored, as transformers does.
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.max_positions(), 131072);
  // Qwen2-0.5B's published count (494M), its head tied to the embedding.
  EXPECT_EQ(c.num_parameters(), 494'032'768);
  bool lists_head = false;
  for (const TensorSpec& spec : model_tensor_specs(c)) lists_head |= spec.name == "lm_head.weight";
  EXPECT_FALSE(lists_head);
}

TEST(LlamaConfig, TensorNamesAreTransformers) {
  ModelConfig c = parse(kLlama31_8b);
  c.num_layers = 1;
  std::vector<std::string> names;
  for (const TensorSpec& spec : model_tensor_specs(c)) names.push_back(spec.name);
  const std::vector<std::string> expected = {
      "embed_tokens.weight",
      "norm.weight",
      "lm_head.weight",
      "layers.0.input_layernorm.weight",
      "layers.0.self_attn.q_proj.weight",
      "layers.0.self_attn.k_proj.weight",
      "layers.0.self_attn.v_proj.weight",
      "layers.0.self_attn.o_proj.weight",
      "layers.0.post_attention_layernorm.weight",
      "layers.0.mlp.gate_proj.weight",
      "layers.0.mlp.up_proj.weight",
      "layers.0.mlp.down_proj.weight",
  };
  EXPECT_EQ(names, expected);
}

TEST(LlamaConfig, RotaryFrequenciesWithoutScaling) {
  const ModelConfig c = parse(kLlama2_7b);
  const std::vector<float> f = c.rope_inv_freq();
  ASSERT_EQ(f.size(), 64u);
  EXPECT_EQ(f[0], 1.0f);
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double expected = std::pow(10000.0, -2.0 * static_cast<double>(i) / 128.0);
    EXPECT_NEAR(f[i], expected, expected * 1e-6) << i;
  }
}

TEST(LlamaConfig, RotaryFrequenciesWithLlama3AndLinearScaling) {
  const ModelConfig plain = parse(edited(kLlama31_8b, {{"rope_scaling", nullptr}}));
  const ModelConfig llama3 = parse(kLlama31_8b);
  const std::vector<float> base = plain.rope_inv_freq();
  const std::vector<float> scaled = llama3.rope_inv_freq();
  ASSERT_EQ(base.size(), scaled.size());
  for (std::size_t i = 0; i < base.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / base[i];
    if (wavelen < 8192.0 / 4.0) {
      EXPECT_EQ(scaled[i], base[i]) << i;  // high frequencies are kept
    } else if (wavelen > 8192.0 / 1.0) {
      EXPECT_NEAR(scaled[i], base[i] / 8.0, base[i] * 1e-6) << i;  // low ones divided
    } else {
      // the band between is blended: between the two
      EXPECT_LE(scaled[i], base[i]) << i;
      EXPECT_GE(scaled[i], base[i] / 8.0f) << i;
    }
  }
  const ModelConfig linear =
      parse(edited(kLlama2_7b, {{"rope_scaling", {{"type", "linear"}, {"factor", 4.0}}}}));
  const std::vector<float> base2 = parse(kLlama2_7b).rope_inv_freq();
  const std::vector<float> linear_f = linear.rope_inv_freq();
  for (std::size_t i = 0; i < base2.size(); ++i) EXPECT_EQ(linear_f[i], base2[i] / 4.0f) << i;
  EXPECT_TRUE(ModelConfig::from_name("opt-125m")->rope_inv_freq().empty());
}

// transformers 5 moves rope_theta and the scaling into one rope_parameters object; both layouts
// give the same frequencies, and a field offgen does not implement is refused, never dropped.
TEST(LlamaConfig, RopeParametersLayoutOfTransformers5) {
  Json v5 = Json::parse(kLlama31_8b);
  Json parameters = v5["rope_scaling"];
  parameters["rope_theta"] = v5["rope_theta"];
  v5.erase("rope_scaling");
  v5.erase("rope_theta");
  v5["rope_parameters"] = parameters;
  const ModelConfig old_layout = parse(kLlama31_8b);
  const ModelConfig new_layout = parse(v5.dump());
  EXPECT_EQ(new_layout.rope_theta, 500000.0f);
  EXPECT_EQ(new_layout.rope_scaling.kind, RopeScaling::Kind::llama3);
  EXPECT_EQ(new_layout.rope_inv_freq(), old_layout.rope_inv_freq());

  // SmolLM2's: only theta, with the default type.
  const ModelConfig smol = parse(edited(
      kLlama2_7b, {{"rope_theta", nullptr},
                   {"rope_parameters", {{"rope_theta", 100000.0}, {"rope_type", "default"}}}}));
  EXPECT_EQ(smol.rope_theta, 100000.0f);
  EXPECT_EQ(smol.rope_scaling.kind, RopeScaling::Kind::none);
  const ModelConfig linear = parse(edited(
      kLlama2_7b,
      {{"rope_parameters", {{"rope_theta", 10000.0}, {"rope_type", "linear"}, {"factor", 4.0}}}}));
  EXPECT_EQ(linear.rope_scaling.kind, RopeScaling::Kind::linear);
  EXPECT_EQ(linear.rope_scaling.factor, 4.0f);
  // Both layouts at once must agree.
  EXPECT_NO_THROW(parse(edited(
      kLlama2_7b, {{"rope_theta", 10000.0}, {"rope_parameters", {{"rope_theta", 10000.0}}}})));
  EXPECT_NE(llama_parse_error(edited(kLlama2_7b, {{"rope_theta", 10000.0},
                                                  {"rope_parameters", {{"rope_theta", 500000.0}}}}))
                .find("rope_theta 10000 disagrees with rope_parameters' rope_theta 500000"),
            std::string::npos);
  EXPECT_NE(
      llama_parse_error(
          edited(kLlama2_7b, {{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}},
                              {"rope_parameters", {{"rope_type", "linear"}, {"factor", 4.0}}}}))
          .find("rope_scaling disagrees with rope_parameters"),
      std::string::npos);
}

TEST(LlamaConfig, RopeFieldsOffgenDoesNotImplementAreRefused) {
  EXPECT_NE(llama_parse_error(
                edited(kLlama2_7b, {{"rope_parameters", {{"rope_type", "yarn"}, {"factor", 4.0}}}}))
                .find("rope_parameters type 'yarn' is not supported"),
            std::string::npos);
  EXPECT_NE(llama_parse_error(edited(kLlama2_7b, {{"rope_parameters",
                                                   {{"rope_type", "default"}, {"mscale", 1.0}}}}))
                .find("rope_parameters field 'mscale' is not supported"),
            std::string::npos);
  EXPECT_NE(llama_parse_error(edited(kLlama2_7b, {{"partial_rotary_factor", 0.5}}))
                .find("partial_rotary_factor 0.5 is not supported"),
            std::string::npos);
  EXPECT_NE(llama_parse_error(
                edited(kLlama2_7b, {{"rope_parameters",
                                     {{"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}}}}))
                .find("partial_rotary_factor 0.25 in rope_parameters is not supported"),
            std::string::npos);
  // A factor of 1 is the whole head, which is what offgen does.
  EXPECT_NO_THROW(parse(edited(kLlama2_7b, {{"partial_rotary_factor", 1.0}})));
}

TEST(LlamaConfig, Rejections) {
  EXPECT_NE(llama_parse_error(edited(kLlama2_7b, {{"num_key_value_heads", 5}}))
                .find("num_attention_heads 32 is not a multiple of num_key_value_heads 5"),
            std::string::npos);
  EXPECT_NE(llama_parse_error(edited(kLlama2_7b, {{"hidden_act", "gelu"}}))
                .find("hidden_act 'gelu' is not supported"),
            std::string::npos);
  EXPECT_NE(llama_parse_error(edited(kLlama2_7b, {{"rope_scaling", {{"rope_type", "dynamic"}}}}))
                .find("rope_scaling type 'dynamic' is not supported"),
            std::string::npos);
  EXPECT_NE(llama_parse_error(edited(kLlama2_7b, {{"head_dim", 256}})).find("head_dim 256"),
            std::string::npos);
  Json without_ffn = Json::parse(kLlama2_7b);
  without_ffn.erase("intermediate_size");
  EXPECT_NE(llama_parse_error(without_ffn.dump()).find("field 'intermediate_size' is missing"),
            std::string::npos);
  EXPECT_NE(llama_parse_error(edited(kLlama2_7b, {{"eos_token_id", Json::array({2, 99999})}}))
                .find("eos_token_id 99999 is outside the vocabulary"),
            std::string::npos);
  EXPECT_NE(llama_parse_error(edited(kLlama2_7b, {{"rope_theta", -1.0}})).find("rope_theta"),
            std::string::npos);
  EXPECT_NE(llama_parse_error(edited(kLlama2_7b, {{"attention_bias", true}}))
                .find("attention_bias true with mlp_bias false"),
            std::string::npos);
}

// LLaMA 3 and Qwen2 name no pad token, and their id 0 is "!": padding takes the EOS id and no
// generated token is hidden as padding. Older conversions write -1 for none.
TEST(LlamaConfig, AMissingPadIsNone) {
  const ModelConfig llama3 = parse(kLlama31_8b);
  EXPECT_FALSE(llama3.has_pad_token);
  EXPECT_EQ(llama3.pad_token_id, 128001);
  const ModelConfig minus_one = parse(edited(kLlama2_7b, {{"pad_token_id", -1}}));
  EXPECT_FALSE(minus_one.has_pad_token);
  const ModelConfig own = parse(edited(kLlama2_7b, {{"pad_token_id", 0}}));
  EXPECT_TRUE(own.has_pad_token);
  EXPECT_EQ(own.pad_token_id, 0);
  EXPECT_TRUE(ModelConfig::from_name("opt-125m")->has_pad_token);
  EXPECT_FALSE(ModelConfig::from_name("llama-3-8b")->has_pad_token);
}

TEST(LlamaConfig, SlidingWindowDefaultsAreTransformers) {
  Json mistral = Json::parse(kMistral7b);
  mistral.erase("sliding_window");
  EXPECT_EQ(parse(mistral.dump()).sliding_window, 4096);  // MistralConfig's default
  // LlamaConfig has no window: a stray field limits nothing.
  EXPECT_EQ(parse(edited(kLlama2_7b, {{"sliding_window", 128}})).max_positions(), 4096);
  EXPECT_EQ(parse(edited(kQwen2_05b, {{"use_sliding_window", true}, {"sliding_window", 1024}}))
                .max_positions(),
            1024);
}

// Instruct models list their end-of-turn ids in generation_config.json; generation stops there.
TEST(LlamaConfig, GenerationConfigAddsEosIds) {
  const test::TempDir dir;
  std::ofstream(dir.path() / "config.json") << kLlama31_8b;
  std::ofstream(dir.path() / "generation_config.json")
      << R"({"bos_token_id": 128000, "eos_token_id": [128001, 128009, 128256], "do_sample": true})";
  try {
    Checkpoint::read_config(dir.path());
    ADD_FAILURE() << "an EOS id outside the vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json: eos_token_id 128256"),
              std::string::npos)
        << e.what();
  }
  std::ofstream(dir.path() / "generation_config.json")
      << R"({"eos_token_id": [128001, 128009, 128007]})";
  const ModelConfig c = Checkpoint::read_config(dir.path());
  EXPECT_EQ(c.eos_token_id, 128001);
  EXPECT_EQ(c.more_eos_token_ids, (std::vector<int>{128008, 128009, 128007}));
  EXPECT_TRUE(c.is_eos(128007));
}

// The built-in LLaMA-family sizes and their published parameter counts.
TEST(LlamaConfig, BuiltInSizes) {
  struct Expected {
    const char* name;
    std::int64_t parameters;
  };
  const Expected table[] = {
      {"tinyllama-1.1b", 1'100'048'384}, {"llama-2-7b", 6'738'415'616},
      {"llama-2-13b", 13'015'864'320},   {"llama-2-70b", 68'976'648'192},
      {"llama-3-8b", 8'030'261'248},     {"llama-3-70b", 70'553'706'496},
      {"mistral-7b", 7'241'732'096},     {"qwen2-7b", 7'615'616'512},
  };
  for (const Expected& e : table) {
    const auto c = ModelConfig::from_name(e.name);
    ASSERT_TRUE(c.has_value()) << e.name;
    EXPECT_EQ(c->family, ModelFamily::llama) << e.name;
    EXPECT_NO_THROW(c->validate()) << e.name;
    EXPECT_EQ(c->num_parameters(), e.parameters) << e.name;
  }
  EXPECT_EQ(ModelConfig::from_name("LLaMA-3-8B")->kv_heads(), 8);
}

}  // namespace
}  // namespace offgen
