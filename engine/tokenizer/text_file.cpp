#include "engine/tokenizer/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"

namespace offgen {

std::string read_text_file(const std::filesystem::path& path, std::string_view what) {
  const std::string name = path.string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("{}: {} not found", name, what);
  if (!std::filesystem::is_regular_file(path, ec)) fail("{}: {} is not a regular file", name, what);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open {}: {}", name, what, std::strerror(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) fail("{}: error reading {}", name, what);
  return std::move(contents).str();
}

}  // namespace offgen
