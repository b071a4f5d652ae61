#include "engine/cli/rank_parts.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>

#include "engine/cli/batch_job.h"
#include "engine/cli/jsonl.h"
#include "engine/core/error.h"

namespace offgen::cli {

std::vector<std::pair<std::size_t, std::size_t>> split_by_work(
    const std::vector<std::uint64_t>& work, int parts) {
  std::vector<std::uint64_t> prefix(work.size() + 1, 0);
  for (std::size_t i = 0; i < work.size(); ++i) prefix[i + 1] = prefix[i] + work[i];
  const double total = static_cast<double>(prefix.back());
  std::vector<std::size_t> bounds{0};
  for (int k = 1; k < parts; ++k) {
    const double target = total * k / parts;
    // The first prefix at or past the target, or the one before it when that is nearer.
    std::size_t b = static_cast<std::size_t>(
        std::lower_bound(prefix.begin(), prefix.end(), target,
                         [](std::uint64_t p, double t) { return static_cast<double>(p) < t; }) -
        prefix.begin());
    b = std::min(b, work.size());
    if (b > 0 &&
        target - static_cast<double>(prefix[b - 1]) < static_cast<double>(prefix[b]) - target) {
      --b;
    }
    bounds.push_back(std::max(b, bounds.back()));
  }
  bounds.push_back(work.size());
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  for (int k = 0; k < parts; ++k) runs.emplace_back(bounds[k], bounds[k + 1]);
  return runs;
}

std::filesystem::path part_path(const std::filesystem::path& output, int rank) {
  return output.string() + fmt::format(".part-{}", rank);
}

std::map<int, std::filesystem::path> part_files(const std::filesystem::path& output) {
  namespace fs = std::filesystem;
  std::map<int, fs::path> parts;
  const fs::path folder = output.has_parent_path() ? output.parent_path() : fs::path(".");
  const std::string prefix = output.filename().string() + ".part-";
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    int rank = -1;
    const char* first = name.data() + prefix.size();
    const char* last = name.data() + name.size();
    const auto [end, error] = std::from_chars(first, last, rank);
    if (error == std::errc() && end == last && rank >= 0) {
      parts[rank] = output.has_parent_path() ? output.parent_path() / name : fs::path(name);
    }
  }
  return parts;
}

std::map<int, std::filesystem::path> earlier_parts(const std::filesystem::path& output,
                                                   const std::string& output_flag,
                                                   bool keep_or_replace) {
  auto parts = part_files(output);
  if (keep_or_replace) return parts;
  for (const auto& [rank, part] : parts) {
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(part, ec);
    OFFGEN_CHECK(ec || bytes == 0,
                 "{} holds {} bytes of results of an earlier run on several ranks (rank {}'s part "
                 "of {}); add --resume to keep them and run only the rest, or --overwrite to "
                 "replace them",
                 part.string(), bytes, rank, output_flag);
  }
  return parts;
}

void merge_records(std::map<std::size_t, nlohmann::ordered_json>& into,
                   std::map<std::size_t, nlohmann::ordered_json> records) {
  for (auto& [index, record] : records) {
    const auto it = into.find(index);
    if (it == into.end() || is_error_record(it->second)) into[index] = std::move(record);
  }
}

std::map<std::size_t, nlohmann::ordered_json> answered_records(
    const std::filesystem::path& output,
    const std::function<std::int64_t(const nlohmann::ordered_json&)>& index_of) {
  std::map<std::size_t, nlohmann::ordered_json> records;
  std::error_code ec;
  if (std::filesystem::is_regular_file(output, ec)) {
    records = read_jsonl_records(output, index_of);
  }
  for (const auto& [rank, part] : part_files(output)) {
    merge_records(records, read_jsonl_records(part, index_of));
  }
  return records;
}

std::string describe_indices(const std::vector<std::size_t>& indices, std::size_t most) {
  std::vector<std::string> ranges;
  std::size_t i = 0;
  while (i < indices.size()) {
    std::size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    ranges.push_back(i == j ? fmt::format("{}", indices[i])
                            : fmt::format("{}-{}", indices[i], indices[j]));
    i = j + 1;
  }
  if (ranges.size() <= most) return fmt::format("{}", fmt::join(ranges, ", "));
  const std::size_t more = ranges.size() - most;
  ranges.resize(most);
  return fmt::format("{} and {} more ranges", fmt::join(ranges, ", "), more);
}

}  // namespace offgen::cli
