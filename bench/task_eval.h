// Runs long-context task samples (long_context_tasks.h) on an engine under its current policy and
// scores them per (task, length, depth): accuracy of the greedy answers (passkey, kv-recall) or
// the mean log-probability of the repeated span (copy).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "bench/long_context_tasks.h"
#include "engine/runtime/engine.h"

namespace offgen::bench {

struct TaskScore {
  LongContextTask task = LongContextTask::passkey;
  int length = 0;
  double depth = 0.0;
  int samples = 0;
  int correct = 0;            // passkey, kv-recall: answers exactly right
  double mean_logprob = 0.0;  // copy: over the scored tokens of every sample
  std::uint64_t scored_tokens = 0;
  double mean_distance = 0.0;  // tokens between needle and question, averaged over the samples

  double accuracy() const { return samples > 0 ? static_cast<double>(correct) / samples : 0.0; }
};

// One score per (task, length, depth) in the order the samples come (make_task_samples' order).
// A sample the engine rejects is an error (the tasks are built to fit the model).
std::vector<TaskScore> run_task_samples(Engine& engine, std::span<const TaskSample> samples);

// One task's scores pooled over some of its (length, depth) cells: answers summed, the copy
// log-probability weighted by the tokens each cell scored (NaN when none did).
struct PooledTask {
  LongContextTask task = LongContextTask::passkey;
  int samples = 0;
  int correct = 0;
  double mean_logprob = 0.0;  // copy
};
// Pools the scores of `task` that `keep` accepts (all of them when it is empty).
PooledTask pool_scores(std::span<const TaskScore> scores, LongContextTask task,
                       const std::function<bool(const TaskScore&)>& keep = {});

// The Wilson score interval (95%) of `correct` successes in `samples` trials: what an accuracy
// could be given this many samples, so two policies differ only where their intervals part.
struct Interval {
  double low = 0.0, high = 0.0;
};
Interval wilson_interval(int correct, int samples);

}  // namespace offgen::bench
