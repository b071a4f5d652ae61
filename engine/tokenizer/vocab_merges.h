// GPT-2 / OPT's tokenizer files: vocab.json + merges.txt, a byte-level BPE identical in its ids to
// Hugging Face `tokenizers`' ByteLevel BPE with add_prefix_space = false. Special-token text is
// encoded as plain text, and the prompt prefix is left to the engine (the model config's BOS).
#pragma once

#include <filesystem>
#include <memory>

#include "engine/tokenizer/tokenizer_backend.h"

namespace offgen {

// Throws offgen::Error naming the file (and line of merges.txt) for a missing file, bad JSON, a
// merge whose parts or result are not in the vocabulary.
std::unique_ptr<TokenizerBackend> load_vocab_merges(const std::filesystem::path& vocab_json,
                                                    const std::filesystem::path& merges_txt);

}  // namespace offgen
