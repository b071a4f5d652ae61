// See hf_tokenizer.h. The order of the stages is `tokenizers`' TokenizerImpl::encode_single_
// sequence with AddedVocabulary::extract_and_normalize; each stage lives in its own file.
#include "engine/tokenizer/hf_tokenizer.h"

#include <algorithm>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace offgen {

HfTokenizer::HfTokenizer(HfTokenizerParts parts)
    : model_(std::move(parts.model)),
      normalizer_(std::move(parts.normalizer)),
      pre_tokenizer_(std::move(parts.pre_tokenizer)),
      decoder_(std::move(parts.decoder)),
      prefix_(std::move(parts.prompt_prefix)),
      suffix_(std::move(parts.prompt_suffix)) {
  std::int32_t max_id = -1;
  for (const auto& [token, id] : model_->vocab()) max_id = std::max(max_id, id);
  for (const AddedToken& t : parts.added_tokens) max_id = std::max(max_id, t.id);
  vocab_size_ = max_id + 1;

  std::vector<AddedToken> raw;
  std::vector<AddedToken> normalized;
  for (AddedToken& t : parts.added_tokens) {
    added_ids_.insert_or_assign(t.content, t.id);
    // A normalized token is matched, and decoded, in its normalized form (as `tokenizers` 0.23
    // does, so that the decoder inverts the normalization).
    if (t.normalized && !normalizer_.empty()) t.content = normalizer_.normalize(t.content);
    added_text_.insert_or_assign(t.id, t.content);
    (t.normalized ? normalized : raw).push_back(std::move(t));
  }
  raw_tokens_ = std::make_unique<AddedTokenMatcher>(std::move(raw));
  normalized_tokens_ = std::make_unique<AddedTokenMatcher>(std::move(normalized));
}

void HfTokenizer::encode_normalized(std::string_view text, bool at_start,
                                    std::vector<std::int32_t>& ids) const {
  const std::string normalized =
      normalizer_.empty() ? std::string(text) : normalizer_.normalize(text);
  std::vector<AddedTokenMatcher::Segment> segments;
  normalized_tokens_->split(normalized, segments);
  std::vector<PreTokenPiece> pieces;
  for (const AddedTokenMatcher::Segment& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    const std::string_view part(normalized.data() + s.begin, s.end - s.begin);
    pre_tokenizer_.split(part, at_start && s.begin == 0, pieces);
    for (const PreTokenPiece& piece : pieces) model_->tokenize(piece.text, ids);
  }
}

std::vector<std::int32_t> HfTokenizer::encode(std::string_view text) const {
  std::string repaired;
  if (utf8::valid_prefix_length(text) != text.size()) {
    repaired = to_valid_utf8(text);
    text = repaired;
  }
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<AddedTokenMatcher::Segment> segments;
  raw_tokens_->split(text, segments);
  for (const AddedTokenMatcher::Segment& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      encode_normalized(text.substr(s.begin, s.end - s.begin), s.begin == 0, ids);
    }
  }
  return ids;
}

std::string HfTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const std::int32_t id : ids) {
    if (const auto added = added_text_.find(id); added != added_text_.end()) {
      tokens.push_back(added->second);
    } else if (const std::string* token = model_->token(id)) {
      tokens.push_back(*token);
    }
  }
  return decoder_.decode(std::move(tokens));
}

bool HfTokenizer::has_id(std::int32_t id) const {
  return added_text_.contains(id) || model_->token(id) != nullptr;
}

std::int32_t HfTokenizer::vocab_size() const {
  return vocab_size_;
}

std::optional<std::int32_t> HfTokenizer::token_to_id(std::string_view token) const {
  if (const auto it = added_ids_.find(token); it != added_ids_.end()) return it->second;
  if (const auto it = model_->vocab().find(token); it != model_->vocab().end()) return it->second;
  return std::nullopt;
}

}  // namespace offgen
