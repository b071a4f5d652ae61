#include "bench/task_eval.h"

#include <cmath>
#include <map>

#include "engine/core/error.h"

namespace offgen::bench {
namespace {

// Per-sample outcome before aggregation.
struct Outcome {
  bool correct = false;
  double logprob_sum = 0.0;
  std::uint64_t scored = 0;
};

void answer_generation_samples(Engine& engine, std::span<const TaskSample> samples,
                               std::vector<Outcome>& outcomes) {
  std::vector<GenerationRequest> requests;
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].task == LongContextTask::copy) continue;
    GenerationRequest r;
    r.prompt = samples[i].tokens;
    r.max_tokens = static_cast<int>(samples[i].answer.size());
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    requests.push_back(std::move(r));
    which.push_back(i);
  }
  if (requests.empty()) return;
  const std::vector<GenerationResult> results = engine.generate(requests);
  for (std::size_t k = 0; k < results.size(); ++k) {
    const TaskSample& s = samples[which[k]];
    OFFGEN_CHECK(results[k].error.empty(), "a {} sample of {} tokens was rejected: {}",
                 task_name(s.task), s.length, results[k].error);
    outcomes[which[k]].correct = results[k].tokens == s.answer;
  }
}

// Copy samples score their second copy through the policy's cache: everything before it runs as
// the prefill, so samples that share that length run together.
void score_copy_samples(Engine& engine, std::span<const TaskSample> samples,
                        std::vector<Outcome>& outcomes) {
  std::map<int, std::vector<std::size_t>> by_prefill;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].task == LongContextTask::copy) by_prefill[samples[i].scored_from].push_back(i);
  }
  for (const auto& [prefill, indices] : by_prefill) {
    std::vector<ScoreRequest> requests;
    for (const std::size_t i : indices) requests.push_back({samples[i].tokens});
    const std::vector<ScoreResult> results = engine.score(requests, prefill);
    for (std::size_t k = 0; k < results.size(); ++k) {
      const TaskSample& s = samples[indices[k]];
      OFFGEN_CHECK(results[k].error.empty(), "a copy sample of {} tokens was rejected: {}",
                   s.length, results[k].error);
      Outcome& o = outcomes[indices[k]];
      // The span's first token is unpredictable; the rest can be copied from the first span.
      for (std::size_t t = static_cast<std::size_t>(s.scored_from) + 1;
           t < results[k].token_logprobs.size(); ++t) {
        o.logprob_sum += results[k].token_logprobs[t];
        ++o.scored;
      }
    }
  }
}

}  // namespace

std::vector<TaskScore> run_task_samples(Engine& engine, std::span<const TaskSample> samples) {
  std::vector<Outcome> outcomes(samples.size());
  answer_generation_samples(engine, samples, outcomes);
  score_copy_samples(engine, samples, outcomes);

  std::vector<TaskScore> scores;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const TaskSample& s = samples[i];
    if (scores.empty() || scores.back().task != s.task || scores.back().length != s.length ||
        scores.back().depth != s.depth) {
      scores.push_back({s.task, s.length, s.depth});
    }
    TaskScore& score = scores.back();
    ++score.samples;
    score.correct += outcomes[i].correct ? 1 : 0;
    score.mean_logprob += outcomes[i].logprob_sum;  // a sum until the end
    score.scored_tokens += outcomes[i].scored;
    score.mean_distance += s.distance;
  }
  for (TaskScore& score : scores) {
    score.mean_logprob = score.scored_tokens > 0
                             ? score.mean_logprob / static_cast<double>(score.scored_tokens)
                             : std::nan("");
    score.mean_distance /= score.samples;
  }
  return scores;
}

PooledTask pool_scores(std::span<const TaskScore> scores, LongContextTask task,
                       const std::function<bool(const TaskScore&)>& keep) {
  PooledTask pooled{task};
  double logprob_sum = 0.0;
  std::uint64_t scored = 0;
  for (const TaskScore& s : scores) {
    if (s.task != task || (keep && !keep(s))) continue;
    pooled.samples += s.samples;
    pooled.correct += s.correct;
    if (s.scored_tokens > 0) {
      logprob_sum += s.mean_logprob * static_cast<double>(s.scored_tokens);
      scored += s.scored_tokens;
    }
  }
  pooled.mean_logprob = scored > 0 ? logprob_sum / static_cast<double>(scored) : std::nan("");
  return pooled;
}

Interval wilson_interval(int correct, int samples) {
  if (samples <= 0) return {0.0, 1.0};
  const double z = 1.959963984540054;
  const double n = samples;
  const double p = correct / n;
  const double centre = (p + z * z / (2 * n)) / (1 + z * z / n);
  const double half = z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n);
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

}  // namespace offgen::bench
