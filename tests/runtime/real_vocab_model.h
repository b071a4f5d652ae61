// A small OPT checkpoint with OPT's real head size (50272 rows) beside a tokenizer of 1000
// entries, written into a test's directory: the shape of every published OPT (whose tokenizer has
// 50265 entries) at a size the cpu device runs in a moment.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/dummy_weights.h"
#include "engine/model/model_config.h"
#include "engine/model/model_tensors.h"
#include "engine/runtime/engine.h"
#include "tests/support/safetensors_writer.h"
#include "tests/support/test_support.h"

namespace offgen::test {

inline ModelConfig real_vocab_config() {
  ModelConfig c;
  c.name = "real-vocab";
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.ffn_dim = 64;
  c.vocab_size = 50272;
  c.max_position_embeddings = 256;
  c.word_embed_proj_dim = 32;
  return c;
}

// Writes config.json, model.safetensors (fp16 dummy weights) and the 1000-entry tokenizer of the
// golden tiny models into `dir`.
inline void write_real_vocab_model(const std::filesystem::path& dir, std::uint64_t seed = 3) {
  const ModelConfig c = real_vocab_config();
  const DummyWeights weights(c, seed);
  std::vector<SafetensorsEntry> tensors;
  for (const TensorSpec& spec : model_tensor_specs(c)) {
    std::vector<Half> values(static_cast<std::size_t>(spec.numel()));
    weights.read_f16(spec.name, spec.shape, values.data());
    tensors.push_back(
        {"model." + spec.name, "F16", spec.shape,
         std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(Half))});
  }
  write_safetensors(dir / "model.safetensors", tensors);
  write_file(dir / "config.json", R"({"model_type": "opt", "activation_function": "relu",
    "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "ffn_dim": 64,
    "vocab_size": 50272, "max_position_embeddings": 256, "word_embed_proj_dim": 32,
    "do_layer_norm_before": true, "enable_bias": true, "layer_norm_elementwise_affine": true,
    "bos_token_id": 2, "eos_token_id": 2, "pad_token_id": 1})");
  const auto tokenizer = data_dir() / "golden" / "tiny-preln";
  for (const char* name : {"vocab.json", "merges.txt"}) {
    std::filesystem::copy_file(tokenizer / name, dir / name);
  }
}

// The scoring path's log-probs of each request's prompt followed by what it generated: the
// truth generated tokens' own log-probs are checked against.
inline std::vector<ScoreResult> scores_of_generated(Engine& engine,
                                                    const std::vector<GenerationRequest>& requests,
                                                    const std::vector<GenerationResult>& results) {
  std::vector<ScoreRequest> scored;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ScoreRequest s;
    s.tokens = requests[i].prompt;
    s.tokens.insert(s.tokens.end(), results[i].tokens.begin(), results[i].tokens.end());
    scored.push_back(s);
  }
  return engine.score(scored);
}

}  // namespace offgen::test
