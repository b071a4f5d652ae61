// The generate command's line formats (plain and OpenAI Batch API), the resumable output writer
// and the progress text, on their own.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "engine/cli/batch_format.h"
#include "engine/cli/jsonl.h"
#include "engine/cli/progress.h"
#include "engine/core/error.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using Json = nlohmann::ordered_json;

cli::JsonlLine line_of(const std::string& text, std::size_t index = 0) {
  cli::JsonlLine line;
  line.index = index;
  line.line_number = index + 1;
  line.value = Json::parse(text);
  return line;
}

class BatchFormat : public ::testing::Test {
 protected:
  BatchFormat()
      : config_(ModelConfig::from_json_file(test::data_dir() / "golden" / "tiny-preln" /
                                            "config.json")),
        tokenizer_(Tokenizer::load(test::data_dir() / "golden" / "tiny-preln")) {
    defaults_.max_tokens = 7;
    defaults_.sampling.temperature = 0.0f;
    defaults_.seed = 100;
  }
  cli::ParsedLine parse(const std::string& text, std::size_t index = 0) {
    return cli::parse_generate_line(line_of(text, index), config_, tokenizer_.get(), "tiny",
                                    defaults_);
  }

  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  cli::GenerateDefaults defaults_;
};

TEST_F(BatchFormat, APlainLineTakesTheDefaultsAndItsOwnOverrides) {
  const auto plain = parse(R"({"prompt_token_ids": [2, 10, 11]})", 3);
  ASSERT_EQ(plain.problem, "");
  EXPECT_EQ(plain.format, cli::LineFormat::plain);
  EXPECT_EQ(plain.request.prompt, (std::vector<std::int32_t>{2, 10, 11}));
  EXPECT_EQ(plain.request.max_tokens, 7);
  EXPECT_EQ(plain.request.seed, 103u);  // seed + index

  const auto own = parse(
      R"({"prompt": "Hello", "max_tokens": 3, "temperature": 0.7, "top_p": 0.9, "top_k": 5,
          "seed": 42, "stop": ["\n", "."], "ignore_eos": true})");
  ASSERT_EQ(own.problem, "");
  EXPECT_EQ(own.request.prompt.front(), config_.bos_token_id);
  EXPECT_EQ(own.request.max_tokens, 3);
  EXPECT_FLOAT_EQ(own.request.sampling.temperature, 0.7f);
  EXPECT_FLOAT_EQ(own.request.sampling.top_p, 0.9f);
  EXPECT_EQ(own.request.sampling.top_k, 5);
  EXPECT_EQ(own.request.seed, 42u);
  EXPECT_TRUE(own.request.ignore_eos);
  EXPECT_EQ(own.text.stop, (std::vector<std::string>{"\n", "."}));
  EXPECT_TRUE(static_cast<bool>(own.request.stop));
}

TEST_F(BatchFormat, AnOpenAiBatchLineReadsItsBody) {
  const auto batch = parse(
      R"({"custom_id": "req-1", "method": "POST", "url": "/v1/completions",
          "body": {"model": "x", "prompt": "Hello world", "max_tokens": 4, "temperature": 0,
                   "seed": 9, "stop": "\n"}})");
  ASSERT_EQ(batch.problem, "");
  EXPECT_EQ(batch.format, cli::LineFormat::openai_batch);
  EXPECT_EQ(batch.custom_id, "req-1");
  EXPECT_EQ(batch.request.max_tokens, 4);
  EXPECT_EQ(batch.request.seed, 9u);
  EXPECT_EQ(batch.text.stop, (std::vector<std::string>{"\n"}));

  const auto ids = parse(R"({"custom_id": "b", "body": {"prompt": [[2, 7, 8]]}})");
  ASSERT_EQ(ids.problem, "");
  EXPECT_EQ(ids.request.prompt, (std::vector<std::int32_t>{2, 7, 8}));
  EXPECT_EQ(ids.request.max_tokens, 7);  // OpenAI's default is the command's
}

TEST_F(BatchFormat, BadFieldsAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"custom_id": "a", "url": "/v1/embeddings", "body": {"prompt": "x"}})",
       "offgen serves /v1/completions and /v1/chat/completions"},
      {R"({"custom_id": "a", "url": "/v1/chat/completions", "body": {"prompt": "x"}})",
       "'prompt' is read in /v1/completions bodies: a /v1/chat/completions body gives 'messages'"},
      {R"({"custom_id": "a", "body": {"messages": []}})",
       "'messages' is read in /v1/chat/completions bodies"},
      {R"({"custom_id": "a", "method": "GET", "body": {"prompt": "x"}})", "POST"},
      {R"({"custom_id": 5, "body": {"prompt": "x"}})", "custom_id"},
      {R"({"body": {"prompt": "x"}})", "custom_id"},
      {R"({"custom_id": "a", "body": {"prompt": "x", "n": 0}})", "'n'"},
      {R"({"custom_id": "a", "body": {}})", "prompt"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": "many"})", "max_tokens"},
      {R"({"prompt": "x", "temperature": -1})", "temperature"},
      {R"({"prompt": "x", "top_p": 0})", "top_p"},
      {R"({"prompt": "x", "stop": [1]})", "stop"},
      {R"({"prompt": "x", "stop": ""})", "stop"},
      {R"({"promptx": "x"})", "neither"},
  };
  for (const auto& [text, needle] : cases) {
    const auto parsed = parse(text);
    EXPECT_NE(parsed.problem.find(needle), std::string::npos) << text << " -> " << parsed.problem;
    EXPECT_TRUE(parsed.request.prompt.empty()) << text;
  }
}

TEST_F(BatchFormat, RecordsFollowEachFormatAndCarryTheirIndex) {
  GenerationResult result;
  result.tokens = {50, 51, 52};
  result.finish = FinishReason::length;
  const cli::JsonlLine plain_line = line_of(R"({"prompt_token_ids": [2, 10], "tag": "t"})", 4);
  const auto plain =
      cli::parse_generate_line(plain_line, config_, tokenizer_.get(), "tiny", defaults_);
  const Json p = cli::result_record(plain_line, plain, {result}, "", tokenizer_.get(), config_,
                                    "tiny", 1700000000);
  EXPECT_EQ(p["index"], 4);
  EXPECT_EQ(p["tag"], "t");
  EXPECT_EQ(p["token_ids"].size(), 3u);
  EXPECT_EQ(p["finish_reason"], "length");
  EXPECT_EQ(cli::record_index(p), 4);

  const cli::JsonlLine batch_line =
      line_of(R"({"custom_id": "x-9", "body": {"prompt": [2, 10], "max_tokens": 3}})", 9);
  const auto batch =
      cli::parse_generate_line(batch_line, config_, tokenizer_.get(), "tiny", defaults_);
  const Json b = cli::result_record(batch_line, batch, {result}, "", tokenizer_.get(), config_,
                                    "tiny", 1700000000);
  EXPECT_EQ(b["custom_id"], "x-9");
  EXPECT_EQ(b["response"]["status_code"], 200);
  EXPECT_EQ(b["response"]["body"]["object"], "text_completion");
  EXPECT_EQ(b["response"]["body"]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(b["response"]["body"]["usage"]["prompt_tokens"], 2);
  EXPECT_EQ(b["response"]["body"]["usage"]["completion_tokens"], 3);
  EXPECT_EQ(b["response"]["body"]["usage"]["total_tokens"], 5);
  EXPECT_TRUE(b["error"].is_null());
  EXPECT_EQ(cli::record_index(b), 9);

  const Json e =
      cli::result_record(batch_line, batch, {}, "too long", tokenizer_.get(), config_, "tiny", 0);
  EXPECT_TRUE(e["response"].is_null());
  EXPECT_NE(e["error"]["message"].get<std::string>().find("line 10: too long"), std::string::npos);
  EXPECT_EQ(cli::record_index(e), 9);
  EXPECT_EQ(cli::record_index(Json::parse(R"({"id": "other"})")), -1);
}

cli::TextOptions stop_at(std::vector<std::string> stop, bool include = false) {
  cli::TextOptions options;
  options.stop = std::move(stop);
  options.include_stop_str_in_output = include;
  return options;
}

TEST_F(BatchFormat, CompletionTextEndsBeforeTheFirstStopString) {
  const std::vector<std::int32_t> ids = tokenizer_->encode(" one two. three");
  std::string found;
  EXPECT_EQ(cli::completion_text(*tokenizer_, config_, ids, stop_at({"three", "."}), &found),
            " one two");
  EXPECT_EQ(found, ".");  // the first in the text, not in the list
  EXPECT_EQ(cli::completion_text(*tokenizer_, config_, ids, stop_at({"four"}), &found),
            " one two. three");
  EXPECT_EQ(found, "");
  // include_stop_str_in_output: the text ends after the stop string.
  EXPECT_EQ(cli::completion_text(*tokenizer_, config_, ids, stop_at({"."}, true)), " one two.");
}

// Found by tests/fuzz/config_fuzz in the config reader, and read_jsonl had the same catch: a
// number too large for a double makes nlohmann throw out_of_range, not parse_error, which escaped
// read_jsonl and ended the whole run. And (found reading the code the fuzzer drives) a line nested
// a million deep parsed, then overflowed the stack when its keys were copied to the output record.
TEST_F(BatchFormat, HugeNumbersAndDeepNestingAreBadLinesNotCrashes) {
  test::TempDir dir;
  const auto path = dir.path() / "in.jsonl";
  const std::size_t depth = 1'000'000;
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  test::write_file(path, R"({"prompt": "a", "max_tokens": 1e400})"
                         "\n"
                         R"({"prompt": "b", "tag": )" +
                             deep + "}\n" + R"({"prompt": "c", "tag": [[[[1]]]]})" + "\n");
  const auto lines = cli::read_jsonl(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].error.find("line 1: invalid JSON"), std::string::npos) << lines[0].error;
  EXPECT_NE(lines[1].error.find("line 2: JSON nested more than"), std::string::npos)
      << lines[1].error;
  EXPECT_TRUE(lines[1].value.is_null());
  EXPECT_EQ(lines[2].error, "");
  for (const cli::JsonlLine& line : lines) {
    const auto parsed =
        cli::parse_generate_line(line, config_, tokenizer_.get(), "tiny", defaults_);
    EXPECT_EQ(parsed.problem, line.error);
    const Json record =
        cli::result_record(line, parsed, {}, parsed.problem, tokenizer_.get(), config_, "tiny", 0);
    EXPECT_EQ(cli::record_index(Json::parse(cli::dump_json(record))),
              static_cast<std::int64_t>(line.index));
  }
}

TEST(ResumableJsonlWriter, KeepsWholeRecordsCutsATornLineAndOrdersAtTheEnd) {
  test::TempDir dir;
  const auto path = dir.path() / "out.jsonl";
  const auto index_of = [](const Json& r) { return cli::record_index(r); };
  {
    cli::ResumableJsonlWriter writer(path, cli::ExistingOutput::overwrite, index_of);
    writer.put(Json{{"index", 3}, {"v", "c"}});
    writer.put(Json{{"index", 0}, {"v", "a"}});
  }
  {
    std::ofstream torn(path, std::ios::app | std::ios::binary);
    torn << R"({"index": 1, "v": "trunc)";  // a crash mid-line
  }
  cli::ResumableJsonlWriter writer(path, cli::ExistingOutput::resume, index_of);
  EXPECT_EQ(writer.recovered().size(), 2u);
  EXPECT_TRUE(writer.recovered().count(0) && writer.recovered().count(3));
  EXPECT_GT(writer.dropped_bytes(), 0u);
  writer.put(Json{{"index", 2}, {"v", "b"}});
  writer.put(Json{{"index", 1}, {"v", "b1"}});
  writer.finish();
  std::ifstream in(path);
  std::string line;
  std::vector<std::int64_t> order;
  while (std::getline(in, line)) order.push_back(cli::record_index(Json::parse(line)));
  EXPECT_EQ(order, (std::vector<std::int64_t>{0, 1, 2, 3}));
}

// Two runs on one output: the second must stop before it reads, cuts or truncates anything — a
// resume would cut the first run's line in progress, and both would then write torn records.
TEST(ResumableJsonlWriter, ASecondRunOnTheSameOutputStopsWithoutTouchingIt) {
  test::TempDir dir;
  const auto path = dir.path() / "out.jsonl";
  const auto index_of = [](const Json& r) { return cli::record_index(r); };
  std::optional<cli::ResumableJsonlWriter> first;
  first.emplace(path, cli::ExistingOutput::overwrite, index_of);
  first->put(Json{{"index", 0}, {"v", "a"}});
  const std::string kept = test::read_file(path);
  for (const auto existing : {cli::ExistingOutput::resume, cli::ExistingOutput::overwrite}) {
    try {
      cli::ResumableJsonlWriter second(path, existing, index_of);
      ADD_FAILURE() << "a second writer opened an output in use";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("being written by another run"), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(test::read_file(path), kept);
  }
  // The lock follows the output through its ordering rewrite, and ends with the writer.
  first->put(Json{{"index", 1}, {"v", "b"}});
  first->finish();
  EXPECT_THROW(cli::ResumableJsonlWriter(path, cli::ExistingOutput::resume, index_of), Error);
  first.reset();
  const cli::ResumableJsonlWriter again(path, cli::ExistingOutput::resume, index_of);
  EXPECT_EQ(again.recovered().size(), 2u);
}

TEST(ResumableJsonlWriter, RefusesToResumeOverAFileThatIsNotItsOutput) {
  test::TempDir dir;
  const auto path = dir.path() / "out.jsonl";
  test::write_file(path, "{\"something\": 1}\n{\"index\": 0}\n");
  EXPECT_THROW(cli::ResumableJsonlWriter(path, cli::ExistingOutput::resume,
                                         [](const Json& r) { return cli::record_index(r); }),
               Error);
}

// Without --resume or --overwrite, a file that already holds results is refused (naming both
// flags) and left as it was; an empty or missing file is fine; --overwrite replaces it.
TEST(ResumableJsonlWriter, RefusesAnOutputThatHoldsResultsUnlessToldWhatToDo) {
  test::TempDir dir;
  const auto path = dir.path() / "out.jsonl";
  const auto index_of = [](const Json& r) { return cli::record_index(r); };
  const std::string earlier = "{\"index\": 0, \"text\": \"hours of work\"}\n";
  test::write_file(path, earlier);
  try {
    cli::ResumableJsonlWriter writer(path, cli::ExistingOutput::refuse, index_of);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path.string()), std::string::npos) << what;
    EXPECT_NE(what.find("--resume"), std::string::npos) << what;
    EXPECT_NE(what.find("--overwrite"), std::string::npos) << what;
  }
  EXPECT_EQ(test::read_file(path), earlier);

  {
    cli::ResumableJsonlWriter writer(dir.path() / "missing.jsonl", cli::ExistingOutput::refuse,
                                     index_of);
  }
  test::write_file(path, "");
  { cli::ResumableJsonlWriter writer(path, cli::ExistingOutput::refuse, index_of); }
  test::write_file(path, earlier);
  {
    cli::ResumableJsonlWriter writer(path, cli::ExistingOutput::overwrite, index_of);
    writer.put(Json{{"index", 0}, {"text", "new"}});
  }
  EXPECT_EQ(test::read_file(path), "{\"index\":0,\"text\":\"new\"}\n");
}

TEST(Progress, SaysRequestsTokensRateAndEta) {
  cli::Progress progress(4, 64, /*terminal=*/false);
  progress.tokens(10);
  progress.add();
  progress.tokens(6);
  progress.add();
  const std::string status = progress.status();
  EXPECT_NE(status.find("2/4 requests"), std::string::npos) << status;
  EXPECT_NE(status.find("16 tokens"), std::string::npos) << status;
  EXPECT_NE(status.find("ETA"), std::string::npos) << status;
}

TEST(Progress, CountsTokensBeforeAnyRequestFinishes) {
  // One block holds every request: tokens flow step by step long before the first answer, and
  // the rate and ETA come from them (not "0.2 tokens/s, ETA 33:15:17").
  cli::Progress progress(600, 600 * 32, /*terminal=*/false);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int step = 0; step < 16; ++step) progress.tokens(600);
  const std::string status = progress.status();
  EXPECT_NE(status.find("0/600 requests, 9600 tokens"), std::string::npos) << status;
  EXPECT_EQ(status.find("ETA ?"), std::string::npos) << status;
  EXPECT_EQ(status.find(" 0.0 tokens/s"), std::string::npos) << status;
}

}  // namespace
}  // namespace offgen
