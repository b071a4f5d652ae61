#include "engine/runtime/logit_edits.h"

#include <cmath>

#include "engine/core/error.h"

namespace offgen {

bool LogitShaping::edits_logits() const {
  return repetition_penalty != 1.0f || frequency_penalty != 0.0f || presence_penalty != 0.0f ||
         !logit_bias.empty() || min_tokens > 0;
}

void validate(const LogitShaping& s, int vocab) {
  OFFGEN_CHECK(std::isfinite(s.repetition_penalty) && s.repetition_penalty > 0.0f,
               "repetition_penalty must be > 0 (got {})", s.repetition_penalty);
  OFFGEN_CHECK(s.frequency_penalty >= -2.0f && s.frequency_penalty <= 2.0f,
               "frequency_penalty must be in [-2, 2] (got {})", s.frequency_penalty);
  OFFGEN_CHECK(s.presence_penalty >= -2.0f && s.presence_penalty <= 2.0f,
               "presence_penalty must be in [-2, 2] (got {})", s.presence_penalty);
  for (const auto& [id, bias] : s.logit_bias) {
    OFFGEN_CHECK(id >= 0 && id < vocab, "logit_bias: token {} is outside the vocabulary [0, {})",
                 id, vocab);
    OFFGEN_CHECK(bias >= -100.0f && bias <= 100.0f,
                 "logit_bias: the bias of token {} must be in [-100, 100] (got {})", id, bias);
  }
  OFFGEN_CHECK(s.min_tokens >= 0, "min_tokens must be >= 0 (got {})", s.min_tokens);
  for (const std::int32_t id : s.stop_ids) {
    OFFGEN_CHECK(id >= 0 && id < vocab, "stop token {} is outside the vocabulary [0, {})", id,
                 vocab);
  }
}

LogitEditor::LogitEditor(std::span<const Sequence> sequences)
    : rows_(sequences.size()), penalties_(sequences.size()) {
  for (std::size_t b = 0; b < sequences.size(); ++b) set_row(b, sequences[b]);
}

std::int64_t LogitEditor::capacity_of(const Sequence& s) {
  if (s.shaping == nullptr || !s.shaping->edits_logits()) return 0;
  const LogitShaping& shaping = *s.shaping;
  const bool repetition = shaping.repetition_penalty != 1.0f;
  const bool counts = shaping.frequency_penalty != 0.0f || shaping.presence_penalty != 0.0f;
  const std::size_t stop_ids =
      shaping.min_tokens > 0 ? s.eos_ids.size() + shaping.stop_ids.size() : 0;
  return static_cast<std::int64_t>((repetition ? s.prompt.size() : 0) + shaping.logit_bias.size() +
                                   stop_ids) +
         (repetition || counts ? s.max_tokens : 0);
}

void LogitEditor::replace(std::size_t b, const Sequence& sequence) {
  OFFGEN_CHECK(b < rows_.size(), "logit edits: no row {} in a block of {}", b, rows_.size());
  capacity_ -= rows_[b].capacity;
  rows_[b] = Row{};
  penalties_[b] = {};
  set_row(b, sequence);
}

void LogitEditor::move(std::size_t to, std::size_t from) {
  OFFGEN_CHECK(to < rows_.size() && from < rows_.size() && to != from,
               "logit edits: row {} cannot move to row {} of a block of {}", from, to,
               rows_.size());
  capacity_ -= rows_[to].capacity;
  rows_[to] = std::move(rows_[from]);
  rows_[from] = Row{};
  for (auto& [token, edit] : rows_[to].edits) edit.row = static_cast<std::int32_t>(to);
  penalties_[to] = penalties_[from];
  penalties_[from] = {};
}

void LogitEditor::set_row(std::size_t b, const Sequence& s) {
  if (s.shaping == nullptr || !s.shaping->edits_logits()) return;
  Row& row = rows_[b];
  row.shaping = s.shaping;
  const LogitShaping& shaping = *s.shaping;
  penalties_[b] = {shaping.repetition_penalty, shaping.frequency_penalty, shaping.presence_penalty};
  auto entry = [&](std::int32_t token) -> kernels::LogitEdit& {
    kernels::LogitEdit& e = row.edits[token];
    e.row = static_cast<std::int32_t>(b);
    e.token = token;
    return e;
  };
  if (shaping.repetition_penalty != 1.0f) {
    for (const std::int32_t token : s.prompt) entry(token).flags |= kernels::kEditInContext;
  }
  for (const auto& [token, bias] : shaping.logit_bias) entry(token).bias = bias;
  if (shaping.min_tokens > 0) {
    row.stop_ids.assign(s.eos_ids.begin(), s.eos_ids.end());
    row.stop_ids.insert(row.stop_ids.end(), shaping.stop_ids.begin(), shaping.stop_ids.end());
    for (const std::int32_t token : row.stop_ids) entry(token).flags |= kernels::kEditBanned;
  }
  row.capacity = capacity_of(s);
  capacity_ += row.capacity;
}

StepLogitEdits LogitEditor::step(std::span<const std::uint8_t> active) {
  step_edits_.clear();
  for (std::size_t b = 0; b < rows_.size(); ++b) {
    if (rows_[b].shaping == nullptr || !active[b]) continue;
    for (const auto& [token, edit] : rows_[b].edits) step_edits_.push_back(edit);
  }
  OFFGEN_CHECK(static_cast<std::int64_t>(step_edits_.size()) <= capacity_,
               "logit edits outgrew their capacity ({} > {})", step_edits_.size(), capacity_);
  return {step_edits_, penalties_};
}

void LogitEditor::record(std::size_t b, std::int32_t token) {
  Row& row = rows_[b];
  if (row.shaping == nullptr) return;
  const LogitShaping& shaping = *row.shaping;
  ++row.generated;
  if (row.generated == shaping.min_tokens) {
    for (const std::int32_t id : row.stop_ids) row.edits[id].flags &= ~kernels::kEditBanned;
  }
  const bool counts = shaping.frequency_penalty != 0.0f || shaping.presence_penalty != 0.0f;
  if (!counts && shaping.repetition_penalty == 1.0f) return;
  kernels::LogitEdit& e = row.edits[token];
  e.row = static_cast<std::int32_t>(b);
  e.token = token;
  if (counts) e.count += 1.0f;
  if (shaping.repetition_penalty != 1.0f) e.flags |= kernels::kEditInContext;
}

}  // namespace offgen
