// Tokenizer: picks the file format and forwards to its backend (vocab_merges.h, hf_tokenizer.h).
#include "engine/tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include "engine/model/gguf_checkpoint.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_tokenizer.h"
#include "engine/tokenizer/tokenizer_backend.h"
#include "engine/tokenizer/tokenizer_json.h"
#include "engine/tokenizer/vocab_merges.h"

namespace offgen {

Tokenizer::Tokenizer(std::unique_ptr<TokenizerBackend> backend) : backend_(std::move(backend)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& dir) {
  if (const auto gguf = find_gguf_file(dir)) {
    const auto file = GgufFile::open(*gguf);
    return from_document(gguf_tokenizer_document(*file), gguf->string());
  }
  std::error_code ec;
  const auto json = dir / "tokenizer.json";
  const auto vocab = dir / "vocab.json";
  const auto merges = dir / "merges.txt";
  const bool has_pair = std::filesystem::exists(vocab, ec) && std::filesystem::exists(merges, ec);
  if (std::filesystem::exists(json, ec) && (!has_pair || !describes_gpt2_byte_level(json))) {
    return load_json(json);
  }
  return load(vocab, merges);  // also when neither is there: its error names vocab.json
}

bool Tokenizer::found_in(const std::filesystem::path& path) {
  std::error_code ec;
  return find_gguf_file(path).has_value() || std::filesystem::exists(path / "vocab.json", ec) ||
         std::filesystem::exists(path / "tokenizer.json", ec);
}

std::unique_ptr<Tokenizer> Tokenizer::from_document(const nlohmann::json& document,
                                                    const std::string& source) {
  return std::unique_ptr<Tokenizer>(new Tokenizer(tokenizer_from_document(document, source)));
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& vocab_json,
                                           const std::filesystem::path& merges_txt) {
  return std::unique_ptr<Tokenizer>(new Tokenizer(load_vocab_merges(vocab_json, merges_txt)));
}

std::unique_ptr<Tokenizer> Tokenizer::load_json(const std::filesystem::path& tokenizer_json) {
  return std::unique_ptr<Tokenizer>(new Tokenizer(load_tokenizer_json(tokenizer_json)));
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  return backend_->encode(text);
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  return backend_->decode(ids);
}

bool Tokenizer::has_id(std::int32_t id) const {
  return backend_->has_id(id);
}

std::int32_t Tokenizer::vocab_size() const {
  return backend_->vocab_size();
}

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return backend_->token_to_id(token);
}

std::optional<std::vector<std::int32_t>> Tokenizer::prompt_prefix() const {
  return backend_->prompt_prefix();
}

std::optional<std::vector<std::int32_t>> Tokenizer::prompt_suffix() const {
  return backend_->prompt_suffix();
}

}  // namespace offgen
