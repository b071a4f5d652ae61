// A user's job on the real model, SmolLM2-135M-Instruct, as the real binary runs it: a file of
// mixed prompt and output lengths with stop strings, greedy and seeded sampling, run with half of
// each GPU batch's KV in host caches and cpu attention — so continuous batching refills rows by
// copying KV into host caches — must write what blocks write (--no-continuous-batching), and a
// run interrupted midway (SIGINT) then resumed must end with the same file; with fp16 weights,
// with int8 ones, and with int8 ones and a bf16 prefill attention. Skips when the model has not
// been fetched.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/attention_bf16.h"
#include "tests/cli/offgen_process.h"
#include "tests/support/real_model.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using JobJson = nlohmann::json;

constexpr int kRequests = 40;

// Prompts of 3 to about 120 words of one paragraph, max_tokens 1 to 24, every third stopping at
// ".", every other one sampled with its own seed.
std::string mixed_file() {
  const std::string text =
      "The river rises in the hills above the town and runs through the old mill, where the "
      "water turns a wheel that once ground the grain of every farm in the valley. In spring the "
      "snow melts and the river floods the meadows; in summer children swim below the bridge, "
      "and in autumn the leaves float down to the sea. The miller kept a record of every flood "
      "for forty years, and his book is still in the library, open at the page of the great "
      "storm, when the water reached the second floor of the mill and the wheel broke.";
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  std::string out;
  for (int i = 0; i < kRequests; ++i) {
    const std::size_t n = 3 + static_cast<std::size_t>(i * 37) % 118;
    std::string prompt;
    for (std::size_t w = 0; w < n; ++w) {
      if (w > 0) prompt += ' ';
      prompt += words[(static_cast<std::size_t>(i) * 7 + w) % words.size()];
    }
    JobJson body = {{"prompt", prompt}, {"max_tokens", 1 + (i * 11) % 24}};
    if (i % 3 == 0) body["stop"] = JobJson::array({"."});
    if (i % 2 == 1) {
      body["temperature"] = 0.8;
      body["top_p"] = 0.9;
      body["seed"] = 1000 + i;
    } else {
      body["temperature"] = 0;
    }
    std::string id = "r";  // (not "r" + ...: GCC 12 warns of a memcpy overlap, -Wrestrict)
    id += std::to_string(i);
    out +=
        JobJson({{"custom_id", id}, {"method", "POST"}, {"url", "/v1/completions"}, {"body", body}})
            .dump() +
        "\n";
  }
  return out;
}

// Each line's custom_id, tokens, text and finish reason, in the file's order.
std::vector<JobJson> answers(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<JobJson> out;
  for (std::string line; std::getline(in, line);) {
    const JobJson record = JobJson::parse(line);
    const JobJson& choice = record["response"]["body"]["choices"][0];
    out.push_back(
        {record["custom_id"], choice["token_ids"], choice["text"], choice["finish_reason"]});
  }
  return out;
}

// N of the closing line's "N rows of sequences that had finished" (-1 when it is not there).
long finished_rows(const std::string& log) {
  const std::string tail = " rows of sequences that had finished";
  const std::size_t end = log.rfind(tail);
  if (end == std::string::npos) return -1;
  std::size_t start = end;
  while (start > 0 && std::isdigit(static_cast<unsigned char>(log[start - 1])) != 0) --start;
  return start == end ? -1 : std::stol(log.substr(start, end - start));
}

// The job with `storage` flags (with them, the host caches attend on the CPU unless `placement`
// says otherwise): refilled rows write what blocks write, and an interrupted run resumed ends
// with the same file.
void expect_the_job_whole(const std::filesystem::path& gguf,
                          const std::vector<std::string>& storage,
                          const std::vector<std::string>& placement = {"--cpu-attention"}) {
  const test::TempDir dir;
  const auto input = dir.path() / "requests.jsonl";
  test::write_file(input, mixed_file());
  const auto run = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"generate",
                                     "--model",
                                     gguf.string(),
                                     "--device",
                                     "cpu",
                                     "--kv-gpu",
                                     "50",
                                     "--batch-size",
                                     "4",
                                     "--input",
                                     input.string(),
                                     "--output",
                                     (dir.path() / (name + ".jsonl")).string()};
    args.insert(args.end(), placement.begin(), placement.end());
    args.insert(args.end(), storage.begin(), storage.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const test::Finished refilled =
      test::run_offgen(run("refilled", {}), dir.path() / "refilled.log");
  ASSERT_EQ(refilled.code, 0) << refilled.output;
  EXPECT_NE(refilled.output.find("each row taking the next request"), std::string::npos)
      << refilled.output;
  const test::Finished blocks =
      test::run_offgen(run("blocks", {"--no-continuous-batching"}), dir.path() / "blocks.log");
  ASSERT_EQ(blocks.code, 0) << blocks.output;
  // Rows computed for sequences that had finished: fewer where finished rows were refilled.
  EXPECT_LT(finished_rows(refilled.output), finished_rows(blocks.output))
      << refilled.output << blocks.output;
  const std::vector<JobJson> want = answers(dir.path() / "refilled.jsonl");
  ASSERT_EQ(want.size(), static_cast<std::size_t>(kRequests));
  EXPECT_EQ(answers(dir.path() / "blocks.jsonl"), want);
  EXPECT_TRUE(std::any_of(want.begin(), want.end(), [](const JobJson& a) {
    return a[3] == "stop";
  }));  // a stop string ended one

  // Interrupted once a few requests are answered, then resumed: the same file.
  const auto resumed = dir.path() / "resumed.jsonl";
  const pid_t pid = test::start_offgen(run("resumed", {}), {dir.path() / "resumed-1.log"});
  const bool midway = test::wait_for_lines(pid, resumed, 5);
  kill(pid, SIGINT);
  const int code = test::exit_code(test::wait_for(pid));
  EXPECT_TRUE(midway);
  EXPECT_TRUE(code == 130 || code == 0) << code;  // 0: it finished before the signal came
  const test::Finished rest =
      test::run_offgen(run("resumed", {"--resume"}), dir.path() / "resumed-2.log");
  ASSERT_EQ(rest.code, 0) << rest.output;
  EXPECT_EQ(answers(resumed), want);
}

TEST(Smollm2Job, RefillsIntoHostCachesWriteWhatBlocksWriteAndSurviveAnInterrupt) {
  const auto gguf = test::smollm2_gguf();
  if (!gguf) GTEST_SKIP() << test::kNoSmollm2;
  expect_the_job_whole(*gguf, {});
}

// The same job with the layers kept and multiplied in int8 (--int8-weights).
TEST(Smollm2Job, WithInt8WeightsRefillsWriteWhatBlocksWriteAndSurviveAnInterrupt) {
  const auto gguf = test::smollm2_gguf();
  if (!gguf) GTEST_SKIP() << test::kNoSmollm2;
  expect_the_job_whole(*gguf, {"--int8-weights"});
}

// int8 weights with the prefill's attention in bf16 (--int8-weights --prefill-math bf16), where
// the CPU runs a bf16 attention: refilled rows' prefills attend in bf16 beside other rows, as
// blocks' do, and must write the same file.
TEST(Smollm2Job, WithInt8WeightsAndBf16AttentionRefillsWriteWhatBlocksWriteAndSurviveAnInterrupt) {
  const auto gguf = test::smollm2_gguf();
  if (!gguf) GTEST_SKIP() << test::kNoSmollm2;
  if (!kernels::cpu::use_bf16_prefill_attention({.prefill_math = kernels::PrefillMath::bf16})) {
    GTEST_SKIP() << "no bf16 attention here (no AVX512-BF16, or OFFGEN_CPU_ISA caps it)";
  }
  expect_the_job_whole(*gguf, {"--int8-weights", "--prefill-math", "bf16"});
}

// quest over the host caches attended on the gpu tier: a staging of the attended pages alone,
// the two dense layers and the prefills through it a chunk of whole caches at a time.
TEST(Smollm2Job, QuestOverCompactStagingRefillsWriteWhatBlocksWriteAndSurviveAnInterrupt) {
  const auto gguf = test::smollm2_gguf();
  if (!gguf) GTEST_SKIP() << test::kNoSmollm2;
  expect_the_job_whole(*gguf, {"--policy", "quest", "--kv-budget", "0.2"}, {});
}

}  // namespace
}  // namespace offgen
