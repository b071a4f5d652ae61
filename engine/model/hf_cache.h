// Models downloaded by huggingface_hub (huggingface-cli download, snapshot_download,
// from_pretrained): where its cache is and which snapshot of a model to read. The cache is found
// as huggingface_hub finds it: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub,
// else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. A model "org/name" lives
// in <cache>/models--org--name/snapshots/<revision>/, whose files link into ../../blobs.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace offgen {

// True for a hub repository id as huggingface_hub spells one: "org/name", each part letters,
// digits, '-', '_' and '.', without ".." or "--" and not starting with '.' or '-'.
bool is_hub_repo_id(std::string_view text);

// The hub cache folder from the environment; empty when nothing says where (no HOME).
std::filesystem::path hf_hub_cache_dir();

// The snapshot of `repo_id` in `cache`: the revision refs/main names when that snapshot exists,
// else the only one, else the most recently modified. nullopt when the cache has none.
std::optional<std::filesystem::path> find_hf_snapshot(const std::filesystem::path& cache,
                                                      std::string_view repo_id);

// What to tell a user whose `repo_id` is not in `cache`: where offgen looked, how to download it,
// and how to run with dummy weights instead.
std::string missing_hf_model_message(std::string_view repo_id, const std::filesystem::path& cache);

}  // namespace offgen
