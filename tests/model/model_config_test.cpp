// ModelConfig: parsing real Hugging Face config.json files, every rejection, the built-in table.
#include "engine/model/model_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

// facebook/opt-125m's config.json as released.
constexpr const char* kOpt125mJson = R"({
  "_name_or_path": "facebook/opt-125m",
  "_remove_final_layer_norm": false,
  "activation_dropout": 0.0,
  "activation_function": "relu",
  "architectures": ["OPTForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 2,
  "do_layer_norm_before": true,
  "dropout": 0.1,
  "eos_token_id": 2,
  "ffn_dim": 3072,
  "hidden_size": 768,
  "init_std": 0.02,
  "layerdrop": 0.0,
  "max_position_embeddings": 2048,
  "model_type": "opt",
  "num_attention_heads": 12,
  "num_hidden_layers": 12,
  "pad_token_id": 1,
  "prefix": "</s>",
  "torch_dtype": "float16",
  "transformers_version": "4.21.0.dev0",
  "use_cache": true,
  "vocab_size": 50272,
  "word_embed_proj_dim": 768
})";

// facebook/opt-350m's config.json: post-LN, 512-wide embeddings projected to 1024.
constexpr const char* kOpt350mJson = R"({
  "_name_or_path": "facebook/opt-350m",
  "activation_dropout": 0.0,
  "activation_function": "relu",
  "architectures": ["OPTForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 2,
  "hidden_size": 1024,
  "do_layer_norm_before": false,
  "dropout": 0.1,
  "eos_token_id": 2,
  "ffn_dim": 4096,
  "init_std": 0.02,
  "layerdrop": 0.0,
  "max_position_embeddings": 2048,
  "model_type": "opt",
  "num_attention_heads": 16,
  "num_hidden_layers": 24,
  "pad_token_id": 1,
  "prefix": "</s>",
  "torch_dtype": "float16",
  "transformers_version": "4.20.0.dev0",
  "use_cache": true,
  "vocab_size": 50272,
  "word_embed_proj_dim": 512
})";

// opt-125m's config with `edit` applied (a null value removes the field).
std::string edited_125m(const nlohmann::json& edit) {
  nlohmann::json json = nlohmann::json::parse(kOpt125mJson);
  json.merge_patch(edit);
  return json.dump(2);
}

// The message of the offgen::Error that parsing `text` throws ("" if it parses).
std::string parse_error(const std::string& text) {
  try {
    ModelConfig::from_json_text(text, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, ParsesOpt125mConfigJson) {
  const ModelConfig c = ModelConfig::from_json_text(kOpt125mJson, "config.json");
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.num_layers, 12);
  EXPECT_EQ(c.num_heads, 12);
  EXPECT_EQ(c.head_dim(), 64);
  EXPECT_EQ(c.ffn_dim, 3072);
  EXPECT_EQ(c.vocab_size, 50272);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.word_embed_proj_dim, 768);
  EXPECT_TRUE(c.do_layer_norm_before);
  EXPECT_FALSE(c.remove_final_layer_norm);
  EXPECT_TRUE(c.enable_bias);
  EXPECT_TRUE(c.layer_norm_elementwise_affine);
  EXPECT_EQ(c.activation_function, "relu");
  EXPECT_EQ(c.bos_token_id, 2);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.pad_token_id, 1);
  EXPECT_FALSE(c.has_projections());
  EXPECT_TRUE(c.has_final_layer_norm());
  EXPECT_EQ(c.name, "opt-125m");  // from _name_or_path
  EXPECT_EQ(c.num_parameters(), ModelConfig::from_name("opt-125m")->num_parameters());
}

TEST(ModelConfig, ParsesOpt350mConfigJson) {
  const ModelConfig c = ModelConfig::from_json_text(kOpt350mJson, "config.json");
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.num_layers, 24);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_EQ(c.word_embed_proj_dim, 512);
  EXPECT_FALSE(c.do_layer_norm_before);
  EXPECT_TRUE(c.has_projections());
  EXPECT_FALSE(c.has_final_layer_norm());  // post-LN: no final layer norm
  EXPECT_EQ(c.num_parameters(), ModelConfig::from_name("opt-350m")->num_parameters());
}

TEST(ModelConfig, OptionalFieldsTakeTransformersDefaults) {
  const ModelConfig c = ModelConfig::from_json_text(
      R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "ffn_dim": 256,
          "vocab_size": 100, "max_position_embeddings": 32, "word_embed_proj_dim": null})",
      "config.json");
  EXPECT_EQ(c.word_embed_proj_dim, 64);  // null and absent both mean hidden_size
  EXPECT_TRUE(c.do_layer_norm_before);
  EXPECT_FALSE(c.remove_final_layer_norm);
  EXPECT_TRUE(c.enable_bias);
  EXPECT_TRUE(c.layer_norm_elementwise_affine);
  EXPECT_EQ(c.activation_function, "relu");
  EXPECT_EQ(c.bos_token_id, 2);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.pad_token_id, 1);
  EXPECT_FLOAT_EQ(c.layer_norm_eps, 1e-5f);
  EXPECT_TRUE(c.name.empty());
}

TEST(ModelConfig, ReadsOptionalFlags) {
  const ModelConfig c =
      ModelConfig::from_json_text(edited_125m({{"enable_bias", false},
                                               {"layer_norm_elementwise_affine", false},
                                               {"_remove_final_layer_norm", true},
                                               {"bos_token_id", 0},
                                               {"eos_token_id", 5},
                                               {"pad_token_id", 7}}),
                                  "config.json");
  EXPECT_FALSE(c.enable_bias);
  EXPECT_FALSE(c.layer_norm_elementwise_affine);
  EXPECT_TRUE(c.remove_final_layer_norm);
  EXPECT_FALSE(c.has_final_layer_norm());
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_id, 5);
  EXPECT_EQ(c.pad_token_id, 7);
}

TEST(ModelConfig, MissingRequiredFieldIsNamed) {
  for (const char* field : {"hidden_size", "num_hidden_layers", "num_attention_heads", "ffn_dim",
                            "vocab_size", "max_position_embeddings"}) {
    EXPECT_EQ(parse_error(edited_125m({{field, nullptr}})),
              fmt::format("config.json: field '{}' is missing", field));
  }
}

TEST(ModelConfig, NonPositiveOrNonIntegerSizesAreRejected) {
  const nlohmann::json bad_values[] = {
      0, -768, 768.5, "768", true, nlohmann::json::array(), 4294967296LL};
  for (const nlohmann::json& bad : bad_values) {
    const std::string message = parse_error(edited_125m({{"hidden_size", bad}}));
    EXPECT_NE(message.find("config.json: field 'hidden_size' must be a positive integer"),
              std::string::npos)
        << bad.dump() << ": " << message;
  }
  EXPECT_NE(parse_error(edited_125m({{"ffn_dim", 0}}))
                .find("field 'ffn_dim' must be a positive integer, got 0"),
            std::string::npos);
  EXPECT_NE(parse_error(edited_125m({{"word_embed_proj_dim", -1}}))
                .find("field 'word_embed_proj_dim' must be a positive integer"),
            std::string::npos);
}

TEST(ModelConfig, WrongTypesForOptionalFieldsAreRejected) {
  EXPECT_NE(parse_error(edited_125m({{"do_layer_norm_before", "yes"}}))
                .find("config.json: field 'do_layer_norm_before' must be true or false"),
            std::string::npos);
  EXPECT_NE(parse_error(edited_125m({{"enable_bias", 1}}))
                .find("field 'enable_bias' must be true or false"),
            std::string::npos);
  EXPECT_NE(parse_error(edited_125m({{"pad_token_id", -1}}))
                .find("field 'pad_token_id' must be a non-negative integer"),
            std::string::npos);
  EXPECT_NE(parse_error(edited_125m({{"activation_function", 3}}))
                .find("field 'activation_function' must be a string"),
            std::string::npos);
}

// Sizes each valid alone but together beyond any machine are refused before any count wraps;
// OPT-175B's sizes pass.
TEST(ModelConfig, AModelTooLargeToCountIsRejected) {
  for (const nlohmann::json& edit :
       {nlohmann::json{{"num_hidden_layers", 2147483647}, {"ffn_dim", 2147483647}},
        nlohmann::json{{"hidden_size", 2147483520},
                       {"num_attention_heads", 1},
                       {"word_embed_proj_dim", 2147483520},
                       {"num_hidden_layers", 2147483647}}}) {
    const std::string message = parse_error(edited_125m(edit));
    EXPECT_NE(message.find("parameters, beyond"), std::string::npos) << edit.dump() << message;
  }
  const auto opt175b = ModelConfig::from_name("opt-175b");
  ASSERT_TRUE(opt175b.has_value());
  EXPECT_NO_THROW(opt175b->validate());
}

TEST(ModelConfig, IndivisibleHeadsAreRejected) {
  EXPECT_EQ(parse_error(edited_125m({{"hidden_size", 100}, {"num_attention_heads", 3}})),
            "config.json: hidden_size 100 is not divisible by num_attention_heads 3");
}

TEST(ModelConfig, OnlyReluIsSupported) {
  const std::string message = parse_error(edited_125m({{"activation_function", "gelu"}}));
  EXPECT_NE(message.find("config.json: activation_function 'gelu' is not supported"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("only 'relu'"), std::string::npos) << message;
}

TEST(ModelConfig, OtherModelTypesAreRejected) {
  const std::string message = parse_error(edited_125m({{"model_type", "gpt2"}}));
  EXPECT_NE(message.find("config.json: model_type is 'gpt2'"), std::string::npos) << message;
  EXPECT_NE(message.find("'opt'"), std::string::npos) << message;
  EXPECT_NE(message.find("'llama'"), std::string::npos) << message;
}

TEST(ModelConfig, TokenIdsMustBeInsideTheVocabulary) {
  EXPECT_EQ(parse_error(edited_125m({{"eos_token_id", 50272}})),
            "config.json: eos_token_id 50272 is outside the vocabulary (vocab_size 50272)");
}

TEST(ModelConfig, MalformedJsonReportsThePosition) {
  const std::string message = parse_error("{\n  \"hidden_size\": 768,\n  oops\n}");
  EXPECT_NE(message.find("config.json: malformed JSON"), std::string::npos) << message;
  EXPECT_NE(message.find("line 3"), std::string::npos) << message;
  EXPECT_NE(parse_error("").find("config.json: malformed JSON"), std::string::npos);
  EXPECT_NE(parse_error("[1, 2]").find("config.json: expected a JSON object"), std::string::npos);
}

// Found by tests/fuzz/config_fuzz: a number past double's range made nlohmann throw out_of_range,
// not parse_error, which escaped without the file's name. And (found reading the code) a value
// nested a million deep overflowed the stack when printed for the error message.
TEST(ModelConfig, HugeNumbersAndDeepNestingAreMalformedJson) {
  EXPECT_NE(parse_error(R"({"hidden_size": 0.01e400})").find("config.json: malformed JSON"),
            std::string::npos);
  const std::size_t depth = 1'000'000;
  const std::string deep =
      "{\"hidden_size\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
  EXPECT_EQ(parse_error(deep), "config.json: malformed JSON: nested more than 64 levels deep");
}

TEST(ModelConfig, FromJsonFileNamesTheDirectoryAndTheFile) {
  test::TempDir tmp;
  const auto path = tmp.path() / "my-opt" / "config.json";
  test::write_file(path, kOpt125mJson);
  EXPECT_EQ(ModelConfig::from_json_file(path).name, "my-opt");

  test::write_file(path, edited_125m({{"num_attention_heads", nullptr}}));
  try {
    ModelConfig::from_json_file(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path.string() + ": field 'num_attention_heads' is missing");
  }

  try {
    ModelConfig::from_json_file(tmp.path() / "absent" / "config.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent/config.json: does not exist"), std::string::npos)
        << e.what();
  }
}

TEST(ModelConfig, ValidateChecksConsistency) {
  ModelConfig c = *ModelConfig::from_name("opt-125m");
  EXPECT_NO_THROW(c.validate());
  c.num_heads = 5;
  try {
    c.validate();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "OPT config 'opt-125m': hidden_size 768 is not divisible by num_attention_heads 5");
  }
  c = *ModelConfig::from_name("opt-125m");
  c.num_layers = 0;
  EXPECT_THROW(c.validate(), Error);
  c = *ModelConfig::from_name("opt-125m");
  c.activation_function = "gelu";
  EXPECT_THROW(c.validate(), Error);
  EXPECT_THROW(ModelConfig().validate(), Error);
}

TEST(ModelConfig, FromNameIsCaseInsensitive) {
  for (const char* name : {"opt-125m", "OPT-125M", "Opt-125m"}) {
    const auto c = ModelConfig::from_name(name);
    ASSERT_TRUE(c.has_value()) << name;
    EXPECT_EQ(c->name, "opt-125m");
    EXPECT_EQ(c->hidden_size, 768);
  }
  EXPECT_FALSE(ModelConfig::from_name("opt-7b").has_value());
  EXPECT_FALSE(ModelConfig::from_name("llama-7b").has_value());  // "llama-2-7b" is
  EXPECT_FALSE(ModelConfig::from_name("").has_value());
  // A hub name is a checkpoint to find, never a config name that would mean dummy weights.
  EXPECT_FALSE(ModelConfig::from_name("facebook/opt-125m").has_value());
}

TEST(ModelConfig, BuiltInTableMatchesTheReleasedModels) {
  struct Expected {
    const char* name;
    int layers, hidden, heads;
  };
  const Expected table[] = {
      {"opt-125m", 12, 768, 12},  {"opt-350m", 24, 1024, 16}, {"opt-1.3b", 24, 2048, 32},
      {"opt-2.7b", 32, 2560, 32}, {"opt-6.7b", 32, 4096, 32}, {"opt-13b", 40, 5120, 40},
      {"opt-30b", 48, 7168, 56},  {"opt-66b", 64, 9216, 72},  {"opt-175b", 96, 12288, 96}};
  std::vector<std::string> names;
  for (const Expected& e : table) {
    names.emplace_back(e.name);
    const auto c = ModelConfig::from_name(e.name);
    ASSERT_TRUE(c.has_value()) << e.name;
    EXPECT_EQ(c->num_layers, e.layers) << e.name;
    EXPECT_EQ(c->hidden_size, e.hidden) << e.name;
    EXPECT_EQ(c->num_heads, e.heads) << e.name;
    EXPECT_EQ(c->ffn_dim, 4 * e.hidden) << e.name;
    EXPECT_EQ(c->vocab_size, 50272) << e.name;
    EXPECT_EQ(c->max_position_embeddings, 2048) << e.name;
    const bool is_350m = std::string(e.name) == "opt-350m";
    EXPECT_EQ(c->do_layer_norm_before, !is_350m) << e.name;
    EXPECT_EQ(c->word_embed_proj_dim, is_350m ? 512 : e.hidden) << e.name;
    EXPECT_EQ(c->has_final_layer_norm(), !is_350m) << e.name;
    EXPECT_NO_THROW(c->validate()) << e.name;
  }
  // The OPT sizes first, then the LLaMA family's (llama_config_test.cpp).
  const std::vector<std::string> known = ModelConfig::known_names();
  ASSERT_GE(known.size(), names.size());
  EXPECT_EQ(std::vector<std::string>(known.begin(),
                                     known.begin() + static_cast<std::ptrdiff_t>(names.size())),
            names);
}

// Exact counts, worked out by hand from the HF module shapes (embeddings + (max_pos+2) positions
// + projections + 12h^2+13h per layer + final LN); lm_head is tied.
TEST(ModelConfig, ParameterCounts) {
  EXPECT_EQ(ModelConfig::from_name("opt-125m")->num_parameters(), 125'239'296);
  EXPECT_EQ(ModelConfig::from_name("opt-350m")->num_parameters(), 331'196'416);
  EXPECT_EQ(ModelConfig::from_name("opt-1.3b")->num_parameters(), 1'315'758'080);
  const std::int64_t p175b = ModelConfig::from_name("opt-175b")->num_parameters();
  EXPECT_GT(p175b, 174'000'000'000);
  EXPECT_LT(p175b, 176'000'000'000);

  ModelConfig no_bias = *ModelConfig::from_name("opt-125m");
  no_bias.enable_bias = false;
  // Per layer: 4 * 768 (q, k, v, out) + 3072 (fc1) + 768 (fc2) biases.
  EXPECT_EQ(no_bias.num_parameters(), 125'239'296 - 12 * (4 * 768 + 3072 + 768));
}

}  // namespace
}  // namespace offgen

namespace offgen {
namespace {

TEST(ModelConfigUntied, AnUntiedLmHeadIsRefused) {
  try {
    ModelConfig::from_json_text(
        R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "ffn_dim": 256,
            "vocab_size": 100, "max_position_embeddings": 32, "tie_word_embeddings": false})",
        "config.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tie_word_embeddings"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace offgen
