#include "tests/support/hf_cache_fixture.h"

#include "tests/support/test_support.h"

namespace offgen::test {

std::filesystem::path add_hf_snapshot(const std::filesystem::path& cache,
                                      const std::string& repo_id,
                                      const std::filesystem::path& source,
                                      const std::string& revision, bool write_ref) {
  namespace fs = std::filesystem;
  const std::size_t slash = repo_id.find('/');
  const fs::path repo =
      cache / ("models--" + repo_id.substr(0, slash) + "--" + repo_id.substr(slash + 1));
  const fs::path snapshot = repo / "snapshots" / revision;
  fs::create_directories(snapshot);
  fs::create_directories(repo / "blobs");
  for (const auto& entry : fs::directory_iterator(source)) {
    const std::string blob = revision + "-" + entry.path().filename().string();
    fs::copy_file(entry.path(), repo / "blobs" / blob, fs::copy_options::overwrite_existing);
    fs::create_symlink(fs::path("..") / ".." / "blobs" / blob, snapshot / entry.path().filename());
  }
  if (write_ref) write_file(repo / "refs" / "main", revision);
  return snapshot;
}

}  // namespace offgen::test
