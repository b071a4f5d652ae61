// What a --model text names, resolved without loading anything:
//   dummy:NAME  deterministic dummy weights of the config NAME (opt-125m ... opt-175b,
//               tinyllama-1.1b, llama-2-7b ... qwen2-7b)
//   a directory a Hugging Face checkpoint directory of OPT or the LLaMA family (config.json and
//               weights; checkpoint.h), or a GGUF file / a folder holding one
//   org/name    that model's snapshot in the local Hugging Face cache (hf_cache.h), e.g.
//               facebook/opt-1.3b; not there is an error saying how to download it
//   NAME        a bare config name (opt-125m): dummy weights only where the caller allows it
//               (bench, plan, calibrate); elsewhere an error saying how to ask for either kind
// An existing directory wins over a config name or a Hugging Face name, so a folder named
// opt-125m or facebook/opt-1.3b is read as a checkpoint.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "engine/model/model_config.h"

namespace offgen {

// What a bare config name means to the caller.
enum class BareConfigName { dummy_weights, refused };

struct ModelName {
  enum class Kind { checkpoint, dummy };
  Kind kind = Kind::checkpoint;
  std::filesystem::path dir;  // checkpoint: the directory (a cache snapshot for org/name)
  std::string config_name;    // dummy: the table's spelling, e.g. "opt-125m"

  // The checkpoint's config.json, or the table's config.
  ModelConfig config() const;
  // The explicit spelling that resolves to exactly this: the directory, or "dummy:NAME".
  std::string spec() const;
  // For messages and reports: the directory, or "opt-125m (dummy weights)".
  std::string describe() const;
};

inline constexpr std::string_view kDummyPrefix = "dummy:";

// Throws offgen::Error naming the text and what to pass instead: an unknown dummy:NAME or bare
// name (listing the known ones), a refused bare name, an org/name missing from the cache.
ModelName resolve_model_name(std::string_view text, BareConfigName bare);

}  // namespace offgen
