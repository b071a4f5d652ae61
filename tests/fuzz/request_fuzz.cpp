// Fuzzes what `offgen generate` does with an input file before any model runs: the input is a
// JSONL file, read with read_jsonl(), and each line is parsed with parse_generate_line() — plain
// lines and OpenAI Batch API lines (completions, and chat through a ChatML template), with the
// tokenizer of tests/data/tokenizer and without one — then answered with result_record() as if
// generation had run. Checked: reading never throws (the file is readable); a line with a problem
// has no prompt; an accepted line has valid sampling parameters and its stop hook runs; every
// record is one line of JSON whose index (what --resume and the final ordering read) is the line's
// own.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/cli/batch_format.h"
#include "engine/cli/jsonl.h"
#include "engine/core/error.h"
#include "engine/model/model_config.h"
#include "engine/runtime/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

struct Fixture {
  offgen::ModelConfig config = offgen::ModelConfig::from_json_file(
      offgen::fuzz::data_dir() / "golden" / "tiny-preln" / "config.json");
  std::unique_ptr<offgen::Tokenizer> tokenizer =
      offgen::Tokenizer::load(offgen::fuzz::data_dir() / "tokenizer");
  // A ChatML template in the shape SmolLM2's and Qwen2's are, so chat lines render too.
  offgen::cli::ChatPrompt chat = offgen::cli::ChatPrompt::from_source(
      "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
      "fuzz ChatML", "</s>", "</s>");
  offgen::cli::GenerateDefaults defaults = [this] {
    offgen::cli::GenerateDefaults d;
    d.chat = &chat;
    return d;
  }();
  offgen::fuzz::MemoryFile input;
};

Fixture& fixture() {
  static Fixture instance;
  return instance;
}

void check_line(const offgen::cli::JsonlLine& line, const offgen::Tokenizer* tokenizer) {
  Fixture& f = fixture();
  const offgen::cli::ParsedLine parsed =
      offgen::cli::parse_generate_line(line, f.config, tokenizer, "tiny", f.defaults);
  std::vector<offgen::GenerationResult> results;
  if (parsed.problem.empty()) {
    const std::vector<offgen::GenerationRequest> requests = offgen::cli::line_requests(parsed);
    OFFGEN_FUZZ_EXPECT(requests.size() == parsed.prompts.size() * std::size_t(parsed.n), "choices");
    for (const offgen::GenerationRequest& request : requests) {
      OFFGEN_FUZZ_EXPECT(request.max_tokens >= 1, "max_tokens");
      offgen::validate(request.sampling);  // throws (a finding) if it let a bad value in
      // What a generation could have produced: ids of the vocabulary, EOS among them.
      offgen::GenerationResult result;
      result.tokens = {40, 41, f.config.eos_token_id, 42};
      if (request.stop) {
        for (std::size_t n = 1; n <= result.tokens.size(); ++n) {
          (void)request.stop(std::span<const std::int32_t>(result.tokens.data(), n));
        }
      }
      results.push_back(result);
    }
  } else {
    OFFGEN_FUZZ_EXPECT(parsed.request.prompt.empty(), parsed.problem);
  }
  const nlohmann::ordered_json record = offgen::cli::result_record(
      line, parsed, results, parsed.problem, tokenizer, f.config, "tiny", 0);
  const std::string text = offgen::cli::dump_json(record);
  OFFGEN_FUZZ_EXPECT(text.find('\n') == std::string::npos, text);
  const auto back = nlohmann::ordered_json::parse(text);  // throws (a finding) if not JSON
  OFFGEN_FUZZ_EXPECT(offgen::cli::record_index(back) == static_cast<std::int64_t>(line.index),
                     text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Fixture& f = fixture();
  f.input.write(data, size);
  const std::vector<offgen::cli::JsonlLine> lines = offgen::cli::read_jsonl(f.input.path());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    OFFGEN_FUZZ_EXPECT(lines[i].index == i, "line index");
    OFFGEN_FUZZ_EXPECT(lines[i].error.empty() == lines[i].value.is_object(), lines[i].error);
    check_line(lines[i], f.tokenizer.get());
    check_line(lines[i], nullptr);
  }
  return 0;
}
