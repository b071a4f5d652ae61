// Continuous batching inside the block schedule. A runner of the planned block starts with the
// first requests of the job (in order of length); when some of its sequences finish (EOS, a stop,
// max_tokens), the next requests are prefilled together in a runner of their own, each picks its
// first token there, and each that goes on takes a finished sequence's row of the running block:
// its KV cache and policy state are copied into the row's caches (BlockRunner::adopt), and from
// the next step it decodes with the others. A request's tokens are those it gets in a block of
// its own: its prefill is batch-invariant as any block's, and from then on it attends over its
// own slots with its own policy state and its own draws.
//
// A refill is a pass over the layers, so it waits until an eighth of the rows are free (a
// quarter when the weights stream in every pass, so each pass costs a weight load), or until
// the rest of the job fits the free rows.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>
#include <random>

#include "engine/runtime/block_runner.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/generation_picks.h"
#include "engine/runtime/logit_edits.h"
#include "scheduler/batch_formation.h"

namespace offgen {

bool Engine::refills_rows() const {
  return options_.continuous_batching;
}

std::size_t Engine::generate_continuously(std::span<const GenerationRequest> requests,
                                          std::span<const std::size_t> order, std::size_t most_rows,
                                          std::vector<GenerationResult>& results,
                                          const GenerationCallback& report) {
  std::vector<std::int32_t> eos_ids = {config_.eos_token_id};
  eos_ids.insert(eos_ids.end(), config_.more_eos_token_ids.begin(),
                 config_.more_eos_token_ids.end());
  // The last sampled token is never fed back, so a request caches max_tokens - 1 decode tokens;
  // a fraction budget is of its own prompt + max_tokens.
  const auto lengths_of = [](const GenerationRequest& r) {
    const int prompt = static_cast<int>(r.prompt.size());
    return SequenceLengths{prompt, r.max_tokens - 1, prompt + r.max_tokens};
  };
  const auto policy_of = [&](const GenerationRequest& r) {
    const SequenceLengths l = lengths_of(r);
    return sequence_policy(l.prompt, l.new_tokens, l.total);
  };
  const auto sequence_of = [&](const GenerationRequest& r) {
    return LogitEditor::Sequence{
        &r.shaping, r.prompt,
        r.ignore_eos ? std::span<const std::int32_t>{} : std::span<const std::int32_t>(eos_ids),
        r.max_tokens};
  };
  // Each request's own draws (from its seed) and logit shaping, for a group's rows.
  const auto rngs_of = [&](std::span<const std::size_t> group) {
    std::vector<std::mt19937_64> rngs;
    for (const std::size_t index : group) rngs.emplace_back(requests[index].seed);
    return rngs;
  };
  const auto shaped_of = [&](std::span<const std::size_t> group) {
    std::vector<LogitEditor::Sequence> shaped;
    for (const std::size_t index : group) shaped.push_back(sequence_of(requests[index]));
    return shaped;
  };
  // What the runners are sized for: a row may take any request of the job.
  int capacity = 1;
  int pages_per_step = 0;  // quest: a compact staging holds any request's attended pages
  std::vector<std::int64_t> edit_capacities;
  const auto extras_of = [&](std::span<const std::size_t> group) {
    PickExtras extras;
    for (const std::size_t index : group) {
      const GenerationRequest& r = requests[index];
      extras.logit_edits += LogitEditor::capacity_of(sequence_of(r));
      if (r.logprobs) extras.top_logprobs = std::max(extras.top_logprobs, r.top_logprobs);
    }
    return extras;
  };
  const auto wants_logprobs = [&](std::span<const std::size_t> group) {
    return std::any_of(group.begin(), group.end(),
                       [&](std::size_t index) { return requests[index].logprobs; });
  };
  for (const std::size_t index : order) {
    const auto policy = policy_of(requests[index]);
    capacity = std::max(capacity, policy->cache_slots(config_.num_layers));
    pages_per_step = std::max(pages_per_step, policy->pages_per_step());
    edit_capacities.push_back(LogitEditor::capacity_of(sequence_of(requests[index])));
  }
  std::sort(edit_capacities.begin(), edit_capacities.end(), std::greater<>());
  const PickExtras job_extras = extras_of(order);
  const bool job_logprobs = wants_logprobs(order);

  // A runner for `group`, sized for the job's capacity, and its padded prompts.
  const auto runner_for = [&](std::span<const std::size_t> group, const PickExtras& extras) {
    std::vector<std::vector<std::int32_t>> prompts;
    std::vector<SequenceLengths> lengths;
    int max_new = 1;
    for (const std::size_t index : group) {
      prompts.push_back(requests[index].prompt);
      lengths.push_back(lengths_of(requests[index]));
      max_new = std::max(max_new, requests[index].max_tokens);
    }
    PaddedBatch padded = left_pad(prompts, config_.pad_token_id);
    auto runner = make_runner(padded.seq, max_new - 1, lengths, extras, capacity, pages_per_step);
    return std::pair{std::move(runner), std::move(padded)};
  };
  // One pick for each active sequence of `runner`, whose row b runs request request_of[b] with
  // its draws from rngs[b].
  std::vector<float> logprobs;
  std::vector<kernels::SampleParams> sample;
  const auto pick = [&](BlockRunner& runner, LogitEditor& editor,
                        std::span<const std::uint8_t> active,
                        std::span<const std::size_t> request_of, std::vector<std::mt19937_64>& rngs,
                        bool read_logprobs) {
    sample.assign(active.size(), kernels::SampleParams{});
    for (std::size_t b = 0; b < active.size(); ++b) {
      if (active[b]) sample[b] = next_sample(requests[request_of[b]].sampling, rngs[b]);
    }
    StepLogitEdits edits;
    if (editor.any()) edits = editor.step(active);
    return runner.next_tokens(sample, read_logprobs ? &logprobs : nullptr,
                              editor.any() ? &edits : nullptr);
  };
  // Records row b's pick for request `index`; true when the request is done (and reported).
  const auto take = [&](const BlockRunner& runner, LogitEditor& editor, std::size_t b,
                        std::size_t index, std::int32_t token) {
    editor.record(b, token);
    GenerationResult& result = results[index];
    if (!record_pick(config_, requests[index], result, token, runner, b, logprobs)) return false;
    if (report) report(index, result);
    return true;
  };

  const std::size_t planned = std::max<std::size_t>(1, most_rows);
  if (planned < order.size()) {
    spdlog::info(
        "{} requests through {} rows, each row taking the next request as its own finishes",
        order.size(), planned);
  }
  std::size_t next = 0;  // the first request of `order` not started
  while (next < order.size()) {
    const std::size_t rows = std::min(planned, order.size() - next);
    const std::span<const std::size_t> first = order.subspan(next, rows);
    PickExtras extras = job_extras;
    extras.logit_edits = std::accumulate(
        edit_capacities.begin(), edit_capacities.begin() + static_cast<std::ptrdiff_t>(rows),
        std::int64_t{0});
    before_block(rows);
    std::unique_ptr<BlockRunner> runner;
    PaddedBatch padded;
    try {
      std::tie(runner, padded) = runner_for(first, extras);
    } catch (const OutOfMemoryError& e) {
      spdlog::info(
          "a block of {} with rows that take the next requests does not fit ({}); the "
          "rest runs in blocks",
          rows, e.what());
      return next;
    }
    next += rows;
    const SlotUseCounter count_slots{*runner, slot_use_};
    // Row b runs request request_of[b] with its own draws; inactive rows wait for a request.
    std::vector<std::size_t> request_of(first.begin(), first.end());
    std::vector<std::mt19937_64> rngs = rngs_of(first);
    LogitEditor editor(shaped_of(first));
    std::vector<std::uint8_t> active(rows, 1);
    std::vector<std::int32_t> fed(rows, config_.pad_token_id);
    const auto take_step = [&](std::span<const std::int32_t> picks) {
      std::uint64_t tokens = 0;
      for (std::size_t b = 0; b < rows; ++b) {
        if (!active[b]) continue;
        ++tokens;
        if (take(*runner, editor, b, request_of[b], picks[b])) {
          active[b] = 0;
          fed[b] = config_.pad_token_id;
        } else {
          fed[b] = picks[b];
        }
      }
      report_tokens(tokens);
    };
    // Prefills `group` in a runner of its own and moves each request that goes on past its first
    // token into one of `free` (finished rows); false when that runner does not fit.
    const auto refill = [&](std::span<const std::size_t> group, std::span<const int> free) {
      std::unique_ptr<BlockRunner> filler;
      PaddedBatch prompts;
      try {
        std::tie(filler, prompts) = runner_for(group, extras_of(group));
      } catch (const OutOfMemoryError& e) {
        spdlog::info("finished rows are not refilled: a prefill of {} requests does not fit ({})",
                     group.size(), e.what());
        return false;
      }
      const SlotUseCounter count_refill{*filler, slot_use_};
      check_interrupt();
      filler->prefill(prompts);
      std::vector<std::mt19937_64> group_rngs = rngs_of(group);
      LogitEditor group_editor(shaped_of(group));
      const std::vector<std::uint8_t> all(group.size(), 1);
      const std::span<const std::int32_t> picks =
          pick(*filler, group_editor, all, group, group_rngs, wants_logprobs(group));
      std::size_t taken = 0;
      for (std::size_t i = 0; i < group.size(); ++i) {
        const std::size_t index = group[i];
        const std::int32_t token = picks[i];
        if (take(*filler, group_editor, i, index, token)) continue;
        const auto b = static_cast<std::size_t>(free[taken++]);
        runner->adopt(static_cast<int>(b), *filler, static_cast<int>(i),
                      policy_of(requests[index]));
        editor.replace(b, sequence_of(requests[index]));
        editor.record(b, token);
        rngs[b] = group_rngs[i];
        request_of[b] = index;
        active[b] = 1;
        fed[b] = token;
      }
      report_tokens(group.size());
      return true;
    };

    // Each GPU batch keeps its running sequences first (a finished row takes the last running
    // one of its GPU batch), so a decode step computes only running[g] rows of GPU batch g and
    // the free rows, at the end of each, are those a refill fills.
    // With host caches or host hidden states (laid out per whole GPU batch) rows stay where they
    // are and a decode step computes every row: a free row costs its compute until it is refilled.
    const std::vector<GpuBatch>& batches = runner->gpu_batches();
    std::vector<int> running(runner->compacts() ? batches.size() : 0, 0);
    const auto compact = [&] {
      if (!runner->compacts()) return;
      for (std::size_t g = 0; g < batches.size(); ++g) {
        int low = batches[g].first;
        int high = batches[g].first + batches[g].size - 1;
        for (;;) {
          while (low < high && active[static_cast<std::size_t>(low)]) ++low;
          while (low < high && !active[static_cast<std::size_t>(high)]) --high;
          if (low >= high) break;
          const auto to = static_cast<std::size_t>(low);
          const auto from = static_cast<std::size_t>(high);
          runner->move_row(low, high);
          editor.move(to, from);
          std::swap(request_of[to], request_of[from]);
          std::swap(rngs[to], rngs[from]);
          std::swap(fed[to], fed[from]);
          std::swap(active[to], active[from]);
        }
        running[g] =
            static_cast<int>(std::count(active.begin() + batches[g].first,
                                        active.begin() + batches[g].first + batches[g].size, 1));
      }
    };

    check_interrupt();
    // The prefill, timed up to its picks, is what BlockSizer learns a pass's shape from.
    const auto prefill_began = std::chrono::steady_clock::now();
    const SlotUse before_prefill = runner->slot_use();
    runner->prefill(padded);
    take_step(pick(*runner, editor, active, request_of, rngs, job_logprobs));
    prefill_time_ += PassTime{
        1, (runner->slot_use() - before_prefill).computed(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - prefill_began).count()};
    const std::size_t threshold = std::max<std::size_t>(1, rows / refill_divisor());
    bool refills = true;
    std::vector<int> free;
    for (;;) {
      compact();
      free.clear();
      for (std::size_t b = 0; b < rows; ++b) {
        if (!active[b]) free.push_back(static_cast<int>(b));
      }
      const std::size_t waiting = order.size() - next;
      const auto alive = static_cast<std::size_t>(std::count(active.begin(), active.end(), 1));
      if (refills && waiting > 0 && !free.empty() &&
          (free.size() >= threshold || free.size() >= waiting || alive == 0)) {
        const std::size_t k = std::min(free.size(), waiting);
        if (refill(order.subspan(next, k), free)) {
          next += k;
          continue;
        }
        refills = false;
      }
      if (alive == 0) break;
      compact();  // the refill's rows
      check_interrupt();
      runner->decode(fed, active, running);
      take_step(pick(*runner, editor, active, request_of, rngs, job_logprobs));
    }
  }
  return next;
}

}  // namespace offgen
