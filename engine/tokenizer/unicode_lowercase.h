// Lowercasing as Hugging Face tokenizers' Lowercase normalizer does it: Rust's char::to_lowercase
// one character at a time (U+0130 becomes "i" + U+0307; no final-sigma context), with the tables
// of the Rust that built tokenizers 0.23 (tools/make_tokenizer_lowercase_table.py).
#pragma once

#include <string>
#include <string_view>

namespace offgen::unicode {

// `text` must be valid UTF-8 (unchecked).
std::string lowercase(std::string_view text);

}  // namespace offgen::unicode
