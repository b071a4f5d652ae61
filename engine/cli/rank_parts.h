// How the ranks of a batch job (ranks.h) share its lines, and the part files they write. Rank r
// answers one contiguous run of the lines still to answer and appends its records to
// `<output>.part-<r>` as they finish; rank 0 merges every part into --output in input order and
// removes them. A run that stops early leaves the parts; --resume, with any number of ranks (one
// included), counts every record in --output and in every part as answered.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace offgen::cli {

// Splits items of the given work (tokens) into `parts` contiguous runs [begin, end) whose work sums
// are near-equal: boundary k is the prefix whose sum is nearest k / parts of the total. Runs may be
// empty (fewer items than parts).
std::vector<std::pair<std::size_t, std::size_t>> split_by_work(
    const std::vector<std::uint64_t>& work, int parts);

// `<output>.part-<rank>`.
std::filesystem::path part_path(const std::filesystem::path& output, int rank);

// The part files beside `output` (any rank count), by rank.
std::map<int, std::filesystem::path> part_files(const std::filesystem::path& output);

// The part files beside `output`, after checking that they may be used: unless `keep_or_replace`
// (--resume, --overwrite), one that holds results refuses the run (offgen::Error naming it), as a
// non-empty --output does. output_flag: --output as given, for messages.
std::map<int, std::filesystem::path> earlier_parts(const std::filesystem::path& output,
                                                   const std::string& output_flag,
                                                   bool keep_or_replace);

// Adds `records` to `into`; a result replaces an error record of the same index, never the
// reverse (a stale error in one part does not hide the result another part holds).
void merge_records(std::map<std::size_t, nlohmann::ordered_json>& into,
                   std::map<std::size_t, nlohmann::ordered_json> records);

// Every record in `output` (when it exists) and in its part files, merged as merge_records does.
std::map<std::size_t, nlohmann::ordered_json> answered_records(
    const std::filesystem::path& output,
    const std::function<std::int64_t(const nlohmann::ordered_json&)>& index_of);

// The sorted indices as ranges, e.g. "3-7, 12, 40-47"; after `most` ranges, "and N more".
std::string describe_indices(const std::vector<std::size_t>& indices, std::size_t most = 12);

}  // namespace offgen::cli
