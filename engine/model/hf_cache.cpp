#include "engine/model/hf_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "engine/model/model_config.h"

namespace offgen {
namespace {

namespace fs = std::filesystem;

// An environment variable, or empty when unset or empty (huggingface_hub treats both alike).
std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

bool is_name_part(std::string_view part) {
  if (part.empty() || part.front() == '.' || part.front() == '-') return false;
  return std::ranges::all_of(part, [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
  });
}

// A revision as refs/ files hold it: a commit hash (anything else must not become a path).
bool is_revision(std::string_view text) {
  return !text.empty() && text.size() <= 64 && std::ranges::all_of(text, [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0;
  });
}

std::string trimmed(std::string text) {
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!text.empty() && space(static_cast<unsigned char>(text.back()))) text.pop_back();
  const auto first = std::ranges::find_if_not(text, space);
  return std::string(first, text.end());
}

}  // namespace

bool is_hub_repo_id(std::string_view text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos || text.size() > 96) return false;
  if (text.find("..") != std::string_view::npos || text.find("--") != std::string_view::npos) {
    return false;
  }
  return is_name_part(text.substr(0, slash)) && is_name_part(text.substr(slash + 1));
}

fs::path hf_hub_cache_dir() {
  for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"}) {
    if (const std::string dir = env(name); !dir.empty()) return dir;
  }
  if (const std::string home = env("HF_HOME"); !home.empty()) return fs::path(home) / "hub";
  if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) {
    return fs::path(xdg) / "huggingface" / "hub";
  }
  if (const std::string home = env("HOME"); !home.empty()) {
    return fs::path(home) / ".cache" / "huggingface" / "hub";
  }
  return {};
}

std::optional<fs::path> find_hf_snapshot(const fs::path& cache, std::string_view repo_id) {
  if (cache.empty() || !is_hub_repo_id(repo_id)) return std::nullopt;
  const std::size_t slash = repo_id.find('/');
  const fs::path repo =
      cache / fmt::format("models--{}--{}", repo_id.substr(0, slash), repo_id.substr(slash + 1));
  const fs::path snapshots = repo / "snapshots";
  std::error_code ec;
  std::ifstream ref(repo / "refs" / "main");
  std::string revision;
  if (ref && std::getline(ref, revision)) {
    revision = trimmed(revision);
    if (is_revision(revision) && fs::is_directory(snapshots / revision, ec)) {
      return snapshots / revision;
    }
  }
  std::optional<fs::path> newest;
  fs::file_time_type newest_time{};
  for (const auto& entry : fs::directory_iterator(snapshots, ec)) {
    if (!entry.is_directory(ec)) continue;
    const fs::file_time_type time = entry.last_write_time(ec);
    if (!newest || time > newest_time) {
      newest = entry.path();
      newest_time = time;
    }
  }
  return newest;
}

std::string missing_hf_model_message(std::string_view repo_id, const fs::path& cache) {
  const std::string dummy = "dummy:" + ModelConfig::nearest_known_name(repo_id);
  const std::string where =
      cache.empty()
          ? std::string(
                "no Hugging Face cache is set (HF_HUB_CACHE, HF_HOME and HOME are "
                "all unset)")
          : fmt::format("the Hugging Face cache {} has no snapshot of it", cache.string());
  return fmt::format(
      "--model {}: not a directory here, and {}. Download it once (into that cache) with\n"
      "  huggingface-cli download {} --include '*.json' '*.txt' '*.safetensors' '*.bin'\n"
      "or\n"
      "  python -c \"from huggingface_hub import snapshot_download; snapshot_download('{}', "
      "allow_patterns=['*.json', '*.txt', '*.safetensors', '*.bin'])\"\n"
      "(set HF_HUB_CACHE or HF_HOME to use another cache), or pass the checkpoint directory. For "
      "random weights of an OPT size instead, use --model {} (dummy weights: the text is noise)",
      repo_id, where, repo_id, repo_id, dummy);
}

}  // namespace offgen
