// What a step's pick means for the request whose sequence made it: the token (and its log-probs)
// joins the request's result, and the request may be done — the same for a block that runs its
// requests from prefill to last step and for one whose finished rows take the next request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/model/model_config.h"
#include "engine/runtime/block_runner.h"
#include "engine/runtime/engine.h"

namespace offgen {

// Appends `token`, picked for the runner's sequence `row`, to `result` (with its log-prob from
// `logprobs`, and its top log-probs from the runner, when the request asks); returns true when
// the request is done — EOS (unless ignored), a stop (from min_tokens on) or max_tokens — with
// result.finish set.
bool record_pick(const ModelConfig& config, const GenerationRequest& request,
                 GenerationResult& result, std::int32_t token, const BlockRunner& runner,
                 std::size_t row, std::span<const float> logprobs);

}  // namespace offgen
