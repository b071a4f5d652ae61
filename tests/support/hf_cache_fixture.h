// Builds a Hugging Face hub cache as huggingface_hub lays one out, for the model-name tests:
// <cache>/models--org--name/blobs/<file>, snapshots/<revision>/<file> as relative links into
// ../../blobs, and refs/main holding the revision.
#pragma once

#include <filesystem>
#include <string>

namespace offgen::test {

// Adds every file of `source` as snapshot `revision` of `repo_id` ("org/name"); writes refs/main
// when `write_ref` is true. Returns the snapshot folder.
std::filesystem::path add_hf_snapshot(const std::filesystem::path& cache,
                                      const std::string& repo_id,
                                      const std::filesystem::path& source,
                                      const std::string& revision, bool write_ref = true);

}  // namespace offgen::test
