#include "engine/runtime/generation_picks.h"

namespace offgen {

bool record_pick(const ModelConfig& config, const GenerationRequest& request,
                 GenerationResult& result, std::int32_t token, const BlockRunner& runner,
                 std::size_t row, std::span<const float> logprobs) {
  result.tokens.push_back(token);
  if (request.logprobs) result.token_logprobs.push_back(logprobs[row]);
  if (request.logprobs && request.top_logprobs > 0) {
    auto& top = result.top_logprobs.emplace_back();
    const std::size_t at = row * static_cast<std::size_t>(runner.top_logprobs());
    for (int j = 0; j < request.top_logprobs; ++j) {
      top.emplace_back(runner.top_logprob_ids()[at + static_cast<std::size_t>(j)],
                       runner.top_logprob_values()[at + static_cast<std::size_t>(j)]);
    }
  }
  const bool eos = config.is_eos(token) && !request.ignore_eos;
  // Before min_tokens, stop tokens are banned and stop strings not looked for (vLLM's).
  const bool may_stop = static_cast<int>(result.tokens.size()) >= request.shaping.min_tokens;
  const bool stopped = eos || (may_stop && request.stop && request.stop(result.tokens));
  if (!stopped && static_cast<int>(result.tokens.size()) < request.max_tokens) return false;
  result.finish = stopped ? FinishReason::stop : FinishReason::length;
  return true;
}

}  // namespace offgen
