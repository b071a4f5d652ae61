// See tokenizer_json.h. Each component is read as `tokenizers` deserializes it (its serde
// structs), with the same defaults; where `tokenizers` would accept a value that offgen does not
// implement, loading fails instead of tokenizing differently.
#include "engine/tokenizer/tokenizer_json.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/tokenizer/bpe.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/hf_tokenizer.h"
#include "engine/tokenizer/json_node.h"
#include "engine/tokenizer/prompt_template.h"
#include "engine/tokenizer/text_file.h"
#include "engine/tokenizer/token_map.h"
#include "engine/tokenizer/utf8.h"

namespace offgen {

namespace {

using nlohmann::json;

std::shared_ptr<const TextPattern> parse_pattern(const JsonNode& node) {
  const auto string = node.find("String");
  const auto regex = node.find("Regex");
  if (string.has_value() == regex.has_value()) {
    node.error("expected a pattern {{\"String\": ...}} or {{\"Regex\": ...}}, got {}",
               node.value().dump());
  }
  if (string)
    return std::make_shared<TextPattern>(TextPattern::Kind::literal, string->string(),
                                         node.where());
  return std::make_shared<TextPattern>(TextPattern::Kind::regex, regex->string(), node.where());
}

// One character, as the serde `char` fields (Metaspace's replacement, Strip's content) are.
std::string one_character(const JsonNode& node) {
  std::string text = node.string();
  std::size_t pos = 0;
  if (!text.empty()) utf8::next_code_point(text, pos);
  if (text.empty() || pos != text.size()) {
    node.error("expected one character, got {:?}", text);
  }
  return text;
}

// Metaspace's prepend_scheme, with the legacy add_prefix_space as `tokenizers` reads it.
PrependScheme parse_prepend_scheme(const JsonNode& node) {
  PrependScheme scheme = PrependScheme::always;
  if (const auto field = node.find("prepend_scheme")) {
    const std::string name = field->string();
    if (name == "always") {
      scheme = PrependScheme::always;
    } else if (name == "first") {
      scheme = PrependScheme::first;
    } else if (name == "never") {
      scheme = PrependScheme::never;
    } else {
      field->error("unknown prepend_scheme {:?}: expected always, first or never", name);
    }
  }
  if (const auto legacy = node.find("add_prefix_space"); legacy && !legacy->boolean()) {
    if (scheme != PrependScheme::never) {
      node.error("add_prefix_space does not match declared prepend_scheme");
    }
  }
  return scheme;
}

void add_normalizer(const JsonNode& node, std::vector<Normalizer::Step>& steps) {
  if (node.value().is_null()) return;
  const std::string type = node.type();
  if (type == "Sequence") {
    const JsonNode list = node.at("normalizers");
    for (std::size_t i = 0; i < list.size(); ++i) add_normalizer(list[i], steps);
  } else if (type == "Prepend") {
    steps.emplace_back(Normalizer::Prepend{node.at("prepend").string()});
  } else if (type == "Replace") {
    steps.emplace_back(
        Normalizer::Replace{parse_pattern(node.at("pattern")), node.at("content").string()});
  } else if (type == "NFC") {
    steps.emplace_back(Normalizer::Nfc{});
  } else if (type == "NFD") {
    steps.emplace_back(Normalizer::Nfd{});
  } else if (type == "Lowercase") {
    steps.emplace_back(Normalizer::Lowercase{});
  } else if (type == "Strip") {
    steps.emplace_back(
        Normalizer::Strip{node.at("strip_left").boolean(), node.at("strip_right").boolean()});
  } else {
    node.unsupported("normalizer", type, "Sequence, Prepend, Replace, NFC, NFD, Lowercase, Strip");
  }
}

SplitBehavior parse_behavior(const JsonNode& node) {
  static const std::map<std::string, SplitBehavior, std::less<>> kNames = {
      {"Removed", SplitBehavior::removed},
      {"Isolated", SplitBehavior::isolated},
      {"MergedWithPrevious", SplitBehavior::merged_with_previous},
      {"MergedWithNext", SplitBehavior::merged_with_next},
      {"Contiguous", SplitBehavior::contiguous}};
  const std::string name = node.string();
  const auto it = kNames.find(name);
  if (it == kNames.end()) {
    node.error(
        "unknown Split behavior {:?}: expected Removed, Isolated, MergedWithPrevious, "
        "MergedWithNext or Contiguous",
        name);
  }
  return it->second;
}

// A Split on a regex of offgen's own: the pre-tokenizers that tokenizers implements with a
// `Fn(char) -> bool` pattern (a one-character class, each character a match of its own) or a
// fixed regex.
PreTokenizerChain::Step regex_split(std::string_view regex, SplitBehavior behavior,
                                    const JsonNode& node, bool invert = false) {
  return PreTokenizerChain::Split{
      std::make_shared<TextPattern>(TextPattern::Kind::regex, regex, node.where()), behavior,
      invert};
}

void add_pre_tokenizer(const JsonNode& node, std::vector<PreTokenizerChain::Step>& steps) {
  if (node.value().is_null()) return;
  const std::string type = node.type();
  if (type == "Sequence") {
    const JsonNode list = node.at("pretokenizers");
    for (std::size_t i = 0; i < list.size(); ++i) add_pre_tokenizer(list[i], steps);
  } else if (type == "Split") {
    steps.emplace_back(PreTokenizerChain::Split{parse_pattern(node.at("pattern")),
                                                parse_behavior(node.at("behavior")),
                                                node.at("invert").boolean()});
  } else if (type == "ByteLevel") {
    const auto use_regex = node.find("use_regex");
    std::shared_ptr<const Pretokenizer> gpt2;
    if (!use_regex || use_regex->boolean()) gpt2 = std::make_shared<const Pretokenizer>();
    steps.emplace_back(
        PreTokenizerChain::ByteLevel{node.at("add_prefix_space").boolean(), std::move(gpt2)});
  } else if (type == "Metaspace") {
    const auto split = node.find("split");
    steps.emplace_back(PreTokenizerChain::Metaspace{one_character(node.at("replacement")),
                                                    parse_prepend_scheme(node),
                                                    !split || split->boolean()});
  } else if (type == "Digits") {
    // Numbers (Rust's char::is_numeric: Nd, Nl, No) one character at a time: each its own piece,
    // or runs of them together.
    const auto individual = node.find("individual_digits");
    steps.push_back(regex_split(
        R"(\p{N})",
        individual && individual->boolean() ? SplitBehavior::isolated : SplitBehavior::contiguous,
        node));
  } else if (type == "Punctuation") {
    // ASCII punctuation or a Unicode P* character; the ASCII symbols \p{P} lacks are listed.
    const auto behavior = node.find("behavior");
    steps.push_back(regex_split(R"([\p{P}$+<=>^`|~])",
                                behavior ? parse_behavior(*behavior) : SplitBehavior::isolated,
                                node));
  } else if (type == "WhitespaceSplit") {
    steps.push_back(regex_split(R"(\s)", SplitBehavior::removed, node));
  } else if (type == "Whitespace") {
    // tokenizers' regex \w+|[^\w\s]+, whose matches are the pieces (Removed, inverted). It is
    // compiled by Rust's regex crate, whose \w is Alphabetic, marks, Nd, Pc and the joiners
    // (so "²" is not a word character and U+200D is), spelled out here for Oniguruma.
    steps.push_back(regex_split(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]+|)"
                                R"([^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\s]+)",
                                SplitBehavior::removed, node, /*invert=*/true));
  } else {
    node.unsupported("pre_tokenizer", type,
                     "Sequence, Split, ByteLevel, Metaspace, Digits, Punctuation, Whitespace, "
                     "WhitespaceSplit");
  }
}

void add_decoder(const JsonNode& node, std::vector<Decoder::Step>& steps) {
  const std::string type = node.type();
  if (type == "Sequence") {
    const JsonNode list = node.at("decoders");
    for (std::size_t i = 0; i < list.size(); ++i) add_decoder(list[i], steps);
  } else if (type == "ByteLevel") {
    steps.emplace_back(Decoder::ByteLevel{});
  } else if (type == "Replace") {
    steps.emplace_back(
        Decoder::Replace{parse_pattern(node.at("pattern")), node.at("content").string()});
  } else if (type == "ByteFallback") {
    steps.emplace_back(Decoder::ByteFallback{});
  } else if (type == "Fuse") {
    steps.emplace_back(Decoder::Fuse{});
  } else if (type == "Strip") {
    steps.emplace_back(Decoder::Strip{one_character(node.at("content")),
                                      node.at("start").size_value(), node.at("stop").size_value()});
  } else if (type == "Metaspace") {
    steps.emplace_back(Decoder::Metaspace{one_character(node.at("replacement")),
                                          parse_prepend_scheme(node) != PrependScheme::never});
  } else {
    node.unsupported("decoder", type,
                     "Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace");
  }
}

// BPE's "prefix"/"suffix" options: only their neutral values are implemented.
void require_empty(const JsonNode& model, std::string_view key) {
  const auto field = model.find(key);
  if (field && !field->string().empty()) {
    field->error("BPE {} {:?} is not supported (only null or \"\")", key, field->string());
  }
}

TokenMap parse_vocab(const JsonNode& node) {
  if (!node.value().is_object()) {
    node.error("expected an object {{token: id}}, got {}", node.value().type_name());
  }
  TokenMap vocab;
  vocab.reserve(node.value().size());
  std::map<std::int64_t, std::string> by_id;
  for (const auto& [token, value] : node.value().items()) {
    if (!value.is_number_integer()) {
      node.error("token {:?} has a non-integer id {}", token, value.dump());
    }
    const auto id = value.get<std::int64_t>();
    if (id < 0 || id >= kMaxTokenId) {
      node.error("token {:?} has id {} outside [0, {})", token, id, kMaxTokenId);
    }
    const auto [it, inserted] = by_id.emplace(id, token);
    if (!inserted) node.error("tokens {:?} and {:?} share id {}", it->second, token, id);
    vocab.emplace(token, static_cast<std::int32_t>(id));
  }
  if (vocab.empty()) node.error("the vocabulary is empty");
  return vocab;
}

BpeMerges parse_merges(const JsonNode& node, const TokenMap& vocab) {
  BpeMerges merges;
  const std::size_t count = node.size();
  const bool pairs = count > 0 && node[0].value().is_array();
  std::uint32_t rank = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const JsonNode item = node[i];
    std::string left;
    std::string right;
    if (pairs) {
      if (!item.value().is_array() || item.size() != 2) {
        item.error("expected a pair [left, right] like the merges before it, got {}",
                   item.value().dump());
      }
      left = item[0].string();
      right = item[1].string();
    } else {
      const std::string line = item.string();
      if (line.starts_with("#version")) continue;  // as `tokenizers` skips it
      const std::size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        item.error("expected two tokens separated by one space, got {:?}", line);
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    }
    const auto left_it = vocab.find(left);
    const auto right_it = vocab.find(right);
    const auto merged_it = vocab.find(left + right);
    if (left_it == vocab.end()) {
      item.error("merge ({:?}, {:?}): {:?} is not in the vocabulary", left, right, left);
    }
    if (right_it == vocab.end()) {
      item.error("merge ({:?}, {:?}): {:?} is not in the vocabulary", left, right, right);
    }
    if (merged_it == vocab.end()) {
      item.error("merge ({:?}, {:?}): the result {:?} is not in the vocabulary", left, right,
                 left + right);
    }
    merges.add(left_it->second, right_it->second, rank++, merged_it->second);
  }
  return merges;
}

std::unique_ptr<BpeModel> parse_model(const JsonNode& node) {
  const std::string type = node.type();
  if (type != "BPE") node.unsupported("model", type, "BPE");
  if (const auto dropout = node.find("dropout"); dropout && dropout->number() != 0.0) {
    dropout->error("BPE dropout {} is not supported (only null or 0)", dropout->number());
  }
  require_empty(node, "continuing_subword_prefix");
  require_empty(node, "end_of_word_suffix");
  TokenMap vocab = parse_vocab(node.at("vocab"));
  BpeMerges merges = parse_merges(node.at("merges"), vocab);
  BpeOptions options;
  if (const auto unk = node.find("unk_token")) {
    const auto it = vocab.find(unk->string());
    if (it == vocab.end()) unk->error("unk_token {:?} is not in the vocabulary", unk->string());
    options.unk_id = it->second;
  }
  const auto flag = [&](std::string_view key) {
    const auto field = node.find(key);
    return field && field->boolean();
  };
  options.fuse_unk = flag("fuse_unk");
  options.byte_fallback = flag("byte_fallback");
  options.ignore_merges = flag("ignore_merges");
  return std::make_unique<BpeModel>(std::move(vocab), std::move(merges), options);
}

bool same_flags(const AddedToken& a, const AddedToken& b) {
  return a.single_word == b.single_word && a.lstrip == b.lstrip && a.rstrip == b.rstrip &&
         a.normalized == b.normalized && a.special == b.special;
}

// The ids `tokenizers` gives added tokens (AddedVocabulary::add_tokens): the file's "id" is not
// read; a token already in the vocabulary keeps its id there, the others are numbered on from the
// vocabulary's size, in file order.
std::vector<AddedToken> parse_added_tokens(const JsonNode& node, const BpeModel& model) {
  std::map<std::int32_t, AddedToken> by_id;
  TokenMap ids;
  auto next_id = static_cast<std::int32_t>(model.vocab().size());
  for (std::size_t i = 0; i < node.size(); ++i) {
    const JsonNode item = node[i];
    AddedToken token;
    token.content = item.at("content").string();
    const auto flag = [&](std::string_view key, bool otherwise) {
      const auto field = item.find(key);
      return field ? field->boolean() : otherwise;
    };
    token.special = flag("special", false);
    token.single_word = flag("single_word", false);
    token.lstrip = flag("lstrip", false);
    token.rstrip = flag("rstrip", false);
    token.normalized = flag("normalized", !token.special);
    if (token.content.empty()) continue;
    const auto known = ids.find(token.content);
    if (known != ids.end() && same_flags(by_id.at(known->second), token)) continue;
    if (known != ids.end()) {
      token.id = known->second;
    } else if (const auto it = model.vocab().find(token.content); it != model.vocab().end()) {
      token.id = it->second;
    } else {
      if (next_id >= kMaxTokenId) item.error("too many added tokens");
      token.id = next_id++;
    }
    ids.insert_or_assign(token.content, token.id);
    by_id.insert_or_assign(token.id, std::move(token));
  }
  std::vector<AddedToken> out;
  out.reserve(by_id.size());
  for (auto& [id, token] : by_id) out.push_back(std::move(token));
  return out;
}

json parse_file(const std::filesystem::path& path, std::string_view what,
                const json::parser_callback_t& callback = nullptr) {
  const std::string text = read_text_file(path, what);
  try {
    return json::parse(text, callback);
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", path.string(), e.what());
  }
}

}  // namespace

namespace tokenizer_json {

Normalizer parse_normalizer(const json& value, std::string_view file, std::string_view path) {
  std::vector<Normalizer::Step> steps;
  add_normalizer(JsonNode(value, std::string(file), std::string(path)), steps);
  return Normalizer(std::move(steps));
}

PreTokenizerChain parse_pre_tokenizer(const json& value, std::string_view file,
                                      std::string_view path) {
  std::vector<PreTokenizerChain::Step> steps;
  add_pre_tokenizer(JsonNode(value, std::string(file), std::string(path)), steps);
  return PreTokenizerChain(std::move(steps));
}

Decoder parse_decoder(const json& value, std::string_view file, std::string_view path) {
  if (value.is_null()) return Decoder();
  std::vector<Decoder::Step> steps;
  add_decoder(JsonNode(value, std::string(file), std::string(path)), steps);
  return Decoder(std::move(steps));
}

}  // namespace tokenizer_json

namespace {

// `config` is the tokenizer_config.json to apply, or empty for none.
std::unique_ptr<TokenizerBackend> load_document(const json& value, const std::string& source,
                                                const std::filesystem::path& config) {
  const JsonNode root(value, source);
  if (!value.is_object()) root.error("expected a JSON object, got {}", value.type_name());
  if (const auto version = root.find("version"); version && version->string() != "1.0") {
    version->error("unknown tokenizer.json version {:?} (expected \"1.0\")", version->string());
  }
  HfTokenizerParts parts;
  parts.model = parse_model(root.at("model"));
  const auto part = [&](std::string_view key) {
    const auto node = root.find(key);
    return node ? node->value() : json(nullptr);
  };
  parts.normalizer = tokenizer_json::parse_normalizer(part("normalizer"), source, "normalizer");
  parts.pre_tokenizer =
      tokenizer_json::parse_pre_tokenizer(part("pre_tokenizer"), source, "pre_tokenizer");
  parts.decoder = tokenizer_json::parse_decoder(part("decoder"), source, "decoder");
  if (const auto added = root.find("added_tokens")) {
    parts.added_tokens = parse_added_tokens(*added, *parts.model);
  }
  const auto token_id = [&](std::string_view token) -> std::optional<std::int32_t> {
    for (const AddedToken& t : parts.added_tokens) {
      if (t.content == token) return t.id;
    }
    const auto it = parts.model->vocab().find(token);
    if (it == parts.model->vocab().end()) return std::nullopt;
    return it->second;
  };
  PromptIds prompt = read_post_processor(root.find("post_processor"));
  if (!config.empty()) apply_tokenizer_config(config, token_id, prompt);
  parts.prompt_prefix = std::move(prompt.prefix);
  parts.prompt_suffix = std::move(prompt.suffix);
  return std::make_unique<HfTokenizer>(std::move(parts));
}

}  // namespace

std::unique_ptr<TokenizerBackend> load_tokenizer_json(const std::filesystem::path& path) {
  const json value = parse_file(path, "tokenizer file");
  return load_document(value, path.string(), path.parent_path() / "tokenizer_config.json");
}

std::unique_ptr<TokenizerBackend> tokenizer_from_document(const nlohmann::json& document,
                                                          const std::string& source) {
  return load_document(document, source, {});
}

bool describes_gpt2_byte_level(const std::filesystem::path& path) {
  // Only the two components matter: skip building the (large) model and added tokens.
  const json value =
      parse_file(path, "tokenizer file", [](int depth, json::parse_event_t event, json& parsed) {
        return !(depth == 1 && event == json::parse_event_t::key &&
                 (parsed == "model" || parsed == "added_tokens"));
      });
  // Anything unexpected is "no": loading the file then says what is wrong with it.
  if (!value.is_object()) return false;
  const auto normalizer = value.find("normalizer");
  const auto pre = value.find("pre_tokenizer");
  if (normalizer != value.end() && !normalizer->is_null()) return false;
  if (pre == value.end() || !pre->is_object()) return false;
  const auto field_is = [&](const char* key, const json& expected, bool if_absent) {
    const auto it = pre->find(key);
    return it == pre->end() ? if_absent : *it == expected;
  };
  return field_is("type", "ByteLevel", false) && field_is("add_prefix_space", false, false) &&
         field_is("use_regex", true, true);
}

}  // namespace offgen
