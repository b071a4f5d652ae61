// Fuzzes the config.json reader: an accepted config must pass validate(); anything else must fail
// with offgen::Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/core/error.h"
#include "engine/model/model_config.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  offgen::ModelConfig config;
  try {
    config = offgen::ModelConfig::from_json_text(text, "config.json");
  } catch (const offgen::Error&) {
    return 0;
  }
  config.validate();  // what from_json_text accepts is valid
  OFFGEN_FUZZ_EXPECT(config.head_dim() > 0, config.name);
  return 0;
}
