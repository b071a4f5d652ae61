// Reading a tokenizer file whole, with errors that name the file and what it was for.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace offgen {

// The file's bytes. Throws offgen::Error "<path>: <what> not found" (or "is not a regular file",
// "cannot open ...", "error reading ...").
std::string read_text_file(const std::filesystem::path& path, std::string_view what);

}  // namespace offgen
