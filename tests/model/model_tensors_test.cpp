// model_tensor_specs: the Hugging Face names and shapes for each config variant.
#include "engine/model/model_tensors.h"

#include <gtest/gtest.h>

#include <map>

namespace offgen {
namespace {

std::map<std::string, std::vector<std::int64_t>> spec_map(const ModelConfig& config) {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const TensorSpec& spec : model_tensor_specs(config)) {
    EXPECT_TRUE(out.emplace(spec.name, spec.shape).second) << "duplicate " << spec.name;
  }
  return out;
}

using Shape = std::vector<std::int64_t>;

TEST(OptTensors, PreLnModel) {
  const ModelConfig config = *ModelConfig::from_name("opt-125m");
  const auto specs = spec_map(config);
  EXPECT_EQ(specs.size(), 4u + 12u * 16u);  // embed, positions, final LN w/b; 16 per layer
  EXPECT_EQ(specs.at("decoder.embed_tokens.weight"), (Shape{50272, 768}));
  EXPECT_EQ(specs.at("decoder.embed_positions.weight"), (Shape{2050, 768}));
  EXPECT_EQ(specs.at("decoder.final_layer_norm.weight"), (Shape{768}));
  EXPECT_EQ(specs.at("decoder.final_layer_norm.bias"), (Shape{768}));
  EXPECT_FALSE(specs.contains("decoder.project_in.weight"));
  EXPECT_FALSE(specs.contains("lm_head.weight"));
  for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
    EXPECT_EQ(specs.at(std::string("decoder.layers.11.self_attn.") + proj + ".weight"),
              (Shape{768, 768}));
    EXPECT_EQ(specs.at(std::string("decoder.layers.11.self_attn.") + proj + ".bias"), (Shape{768}));
  }
  EXPECT_EQ(specs.at("decoder.layers.0.self_attn_layer_norm.weight"), (Shape{768}));
  EXPECT_EQ(specs.at("decoder.layers.0.fc1.weight"), (Shape{3072, 768}));
  EXPECT_EQ(specs.at("decoder.layers.0.fc1.bias"), (Shape{3072}));
  EXPECT_EQ(specs.at("decoder.layers.0.fc2.weight"), (Shape{768, 3072}));
  EXPECT_EQ(specs.at("decoder.layers.0.fc2.bias"), (Shape{768}));
  EXPECT_EQ(specs.at("decoder.layers.0.final_layer_norm.bias"), (Shape{768}));
  EXPECT_FALSE(specs.contains("decoder.layers.12.fc1.weight"));
}

TEST(OptTensors, PostLnModelWithProjections) {
  const auto specs = spec_map(*ModelConfig::from_name("opt-350m"));
  EXPECT_EQ(specs.at("decoder.embed_tokens.weight"), (Shape{50272, 512}));
  EXPECT_EQ(specs.at("decoder.embed_positions.weight"), (Shape{2050, 1024}));
  EXPECT_EQ(specs.at("decoder.project_in.weight"), (Shape{1024, 512}));
  EXPECT_EQ(specs.at("decoder.project_out.weight"), (Shape{512, 1024}));
  EXPECT_FALSE(specs.contains("decoder.project_in.bias"));
  EXPECT_FALSE(specs.contains("decoder.final_layer_norm.weight"));
  EXPECT_TRUE(specs.contains("decoder.layers.23.final_layer_norm.weight"));
}

TEST(OptTensors, NoBiasNoAffineNoFinalNorm) {
  ModelConfig config = *ModelConfig::from_name("opt-125m");
  config.enable_bias = false;
  config.layer_norm_elementwise_affine = false;
  for (const auto& [name, shape] : spec_map(config)) {
    EXPECT_FALSE(name.ends_with(".bias")) << name;
    EXPECT_EQ(name.find("layer_norm"), std::string::npos) << name;
  }
  config = *ModelConfig::from_name("opt-125m");
  config.remove_final_layer_norm = true;
  EXPECT_FALSE(spec_map(config).contains("decoder.final_layer_norm.weight"));
}

TEST(OptTensors, CanonicalNames) {
  EXPECT_EQ(canonical_tensor_name("model.decoder.layers.0.fc1.weight"),
            "decoder.layers.0.fc1.weight");
  EXPECT_EQ(canonical_tensor_name("decoder.layers.0.fc1.weight"), "decoder.layers.0.fc1.weight");
  EXPECT_EQ(canonical_tensor_name("lm_head.weight"), "lm_head.weight");
}

}  // namespace
}  // namespace offgen
