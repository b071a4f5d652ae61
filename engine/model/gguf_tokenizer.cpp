#include "engine/model/gguf_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/core/error.h"

namespace offgen {
namespace {

using Json = nlohmann::json;

// llama.cpp's token types (llama_token_type).
enum class TokenType : std::int64_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

// The regexes of LLaMA 3's and Qwen2's tokenizer.json files (Split, Isolated).
constexpr const char* kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

Json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

Json split(const char* regex) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", regex}}},
          {"behavior", "Isolated"},
          {"invert", false}};
}

// How a gpt2-model tokenizer splits text, by tokenizer.ggml.pre: the pre-tokenizer of the
// tokenizer.json the file was converted from (llama.cpp's llama-vocab.cpp lists the same
// regexes per name).
struct PreTokenizer {
  Json pre_tokenizer;
  Json normalizer;
  bool ignore_merges;
};

std::optional<PreTokenizer> pre_tokenizer_for(std::string_view name) {
  if (name == "default" || name == "gpt2" || name == "gpt-2" || name == "olmo" || name == "jais") {
    return PreTokenizer{byte_level(true), nullptr, false};
  }
  if (name == "smollm" || name == "starcoder" || name == "refact" || name == "codeshell" ||
      name == "command-r") {
    return PreTokenizer{
        {{"type", "Sequence"},
         {"pretokenizers",
          Json::array({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)})}},
        nullptr,
        false};
  }
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe" || name == "smaug-bpe" ||
      name == "falcon3") {
    return PreTokenizer{{{"type", "Sequence"},
                         {"pretokenizers", Json::array({split(kLlama3Split), byte_level(false)})}},
                        nullptr,
                        true};
  }
  if (name == "qwen2" || name == "deepseek-r1-qwen") {
    return PreTokenizer{{{"type", "Sequence"},
                         {"pretokenizers", Json::array({split(kQwen2Split), byte_level(false)})}},
                        {{"type", "NFC"}},
                        false};
  }
  return std::nullopt;
}

// transformers' GGUF tokenizer for SentencePiece vocabularies (generate_merges in its
// gguf_tokenizer_mapping.py): for every token, each split into two tokens is a merge; a token's
// splits in order of (left id, right id); then all of them stably ordered by the whole token's
// score, the left part's length and the right part's length (in characters), each descending.
Json spm_merges(const std::vector<std::string>& tokens, const std::vector<double>& scores,
                const std::unordered_map<std::string_view, std::int64_t>& ids) {
  const auto characters = [](std::string_view text) {
    std::size_t n = 0;
    for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
    return n;
  };
  struct Merge {
    std::int64_t left;
    std::int64_t right;
    double score;
    std::size_t left_chars;
    std::size_t right_chars;
  };
  std::vector<Merge> merges;
  std::vector<Merge> local;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const std::string_view token = tokens[t];
    local.clear();
    // Split between characters (not bytes), as Python's str slicing does.
    for (std::size_t cut = 1; cut < token.size(); ++cut) {
      if ((static_cast<unsigned char>(token[cut]) & 0xC0) == 0x80) continue;
      const auto left = ids.find(token.substr(0, cut));
      const auto right = ids.find(token.substr(cut));
      if (left != ids.end() && right != ids.end()) {
        local.push_back({left->second, right->second, scores[t], characters(token.substr(0, cut)),
                         characters(token.substr(cut))});
      }
    }
    std::ranges::sort(local, [](const Merge& a, const Merge& b) {
      return a.left != b.left ? a.left < b.left : a.right < b.right;
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::ranges::stable_sort(merges, [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.left_chars != b.left_chars) return a.left_chars > b.left_chars;
    return a.right_chars > b.right_chars;
  });
  Json out = Json::array();
  for (const Merge& m : merges) {
    out.push_back(Json::array(
        {tokens[static_cast<std::size_t>(m.left)], tokens[static_cast<std::size_t>(m.right)]}));
  }
  return out;
}

Json template_processing(const std::vector<std::pair<std::string, std::int64_t>>& before,
                         const std::vector<std::pair<std::string, std::int64_t>>& after) {
  Json single = Json::array();
  Json special = Json::object();
  for (const auto& [name, id] : before) {
    single.push_back({{"SpecialToken", {{"id", name}, {"type_id", 0}}}});
    special[name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
  }
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  for (const auto& [name, id] : after) {
    single.push_back({{"SpecialToken", {{"id", name}, {"type_id", 0}}}});
    special[name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
  }
  return {{"type", "TemplateProcessing"},
          {"single", single},
          {"pair", single},
          {"special_tokens", special}};
}

}  // namespace

Json gguf_tokenizer_document(const GgufFile& file) {
  const std::string path = file.path().string();
  const std::string model = file.required_string("tokenizer.ggml.model");
  if (model != "gpt2" && model != "llama") {
    fail(
        "{}: tokenizer.ggml.model is '{}'; offgen reads 'gpt2' (byte-level BPE) and 'llama' "
        "(SentencePiece-style) vocabularies",
        path, model);
  }
  const Json* tokens_json = file.array("tokenizer.ggml.tokens", GgufFile::Element::string);
  if (tokens_json == nullptr || tokens_json->empty()) {
    fail("{}: metadata key 'tokenizer.ggml.tokens' is missing", path);
  }
  const auto count = static_cast<std::int64_t>(tokens_json->size());
  std::vector<std::string> tokens;
  tokens.reserve(tokens_json->size());
  for (const Json& t : *tokens_json) tokens.push_back(t.get<std::string>());
  std::vector<std::int64_t> types(tokens.size(), static_cast<std::int64_t>(TokenType::normal));
  if (const Json* t = file.array("tokenizer.ggml.token_type", GgufFile::Element::integer, count)) {
    for (std::size_t i = 0; i < types.size(); ++i) types[i] = (*t)[i].get<std::int64_t>();
  }
  const auto id_of = [&](const char* key) -> std::optional<std::int64_t> {
    const auto id = file.integer(key);
    if (id && (*id < 0 || *id >= count)) {
      fail("{}: metadata '{}' = {} is not one of the {} tokens", path, key, *id, count);
    }
    return id;
  };

  Json document = {{"version", "1.0"}, {"normalizer", nullptr}, {"pre_tokenizer", nullptr}};
  // The vocabulary: of duplicated strings the last keeps its id, as transformers' dict does.
  std::unordered_map<std::string_view, std::int64_t> ids;
  Json vocab = Json::object();
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    vocab[tokens[i]] = i;
    ids[tokens[i]] = static_cast<std::int64_t>(i);
  }
  Json bpe = {{"type", "BPE"}, {"dropout", nullptr}, {"vocab", std::move(vocab)}};
  if (model == "gpt2") {
    const Json* merges = file.array("tokenizer.ggml.merges", GgufFile::Element::string);
    if (merges == nullptr) fail("{}: metadata key 'tokenizer.ggml.merges' is missing", path);
    const std::string pre = file.string("tokenizer.ggml.pre").value_or("default");
    const std::optional<PreTokenizer> split = pre_tokenizer_for(pre);
    if (!split) {
      fail(
          "{}: tokenizer.ggml.pre '{}' is not a pre-tokenizer offgen knows; it knows default, "
          "gpt2, smollm, starcoder, refact, codeshell, command-r, llama-bpe (llama3), qwen2, "
          "falcon3, olmo",
          path, pre);
    }
    bpe["merges"] = *merges;
    bpe["ignore_merges"] = split->ignore_merges;
    bpe["byte_fallback"] = false;
    document["pre_tokenizer"] = split->pre_tokenizer;
    document["normalizer"] = split->normalizer;
    document["decoder"] = byte_level(true);
  } else {
    const Json* scores_json = file.array("tokenizer.ggml.scores", GgufFile::Element::number, count);
    if (scores_json == nullptr) fail("{}: metadata key 'tokenizer.ggml.scores' is missing", path);
    std::vector<double> scores;
    for (const Json& score : *scores_json) scores.push_back(score.get<double>());
    bpe["merges"] = spm_merges(tokens, scores, ids);
    bpe["byte_fallback"] = true;
    bpe["fuse_unk"] = true;
    // As transformers builds it (not as llama.cpp or SentencePiece do): "▁" for spaces and one
    // before the text's first piece only (Metaspace "first": not after an added token, not
    // before a text that starts with a space), whatever add_space_prefix says; the decoder
    // removes one leading space.
    document["pre_tokenizer"] = {{"type", "Metaspace"},
                                 {"replacement", "\u2581"},
                                 {"prepend_scheme", "first"},
                                 {"split", false}};
    document["decoder"] = {
        {"type", "Sequence"},
        {"decoders",
         Json::array({{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}},
                      {{"type", "Strip"}, {"content", " "}, {"start", 1u}, {"stop", 0u}}})}};
  }
  document["model"] = std::move(bpe);

  // transformers also makes the BOS, EOS, unknown and padding tokens special, whatever their
  // type (a SentencePiece <unk> is UNKNOWN, not CONTROL).
  std::vector<bool> named(tokens.size(), false);
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"}) {
    if (const auto id = id_of(key)) named[static_cast<std::size_t>(*id)] = true;
  }
  Json added = Json::array();
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    auto type = static_cast<TokenType>(types[i]);
    if (named[i]) type = TokenType::control;
    if (type != TokenType::control && type != TokenType::user_defined) continue;
    added.push_back({{"id", i},
                     {"content", tokens[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", type == TokenType::control}});
  }
  document["added_tokens"] = std::move(added);

  std::vector<std::pair<std::string, std::int64_t>> before;
  std::vector<std::pair<std::string, std::int64_t>> after;
  const auto bos = id_of("tokenizer.ggml.bos_token_id");
  const auto eos = id_of("tokenizer.ggml.eos_token_id");
  if (file.boolean("tokenizer.ggml.add_bos_token").value_or(model == "llama")) {
    if (!bos) fail("{}: add_bos_token is set but tokenizer.ggml.bos_token_id is missing", path);
    before.emplace_back(tokens[static_cast<std::size_t>(*bos)], *bos);
  }
  if (file.boolean("tokenizer.ggml.add_eos_token").value_or(false)) {
    if (!eos) fail("{}: add_eos_token is set but tokenizer.ggml.eos_token_id is missing", path);
    after.emplace_back(tokens[static_cast<std::size_t>(*eos)], *eos);
  }
  document["post_processor"] = template_processing(before, after);
  return document;
}

std::optional<std::string> gguf_chat_template(const GgufFile& file) {
  return file.string("tokenizer.chat_template");
}

}  // namespace offgen
