// The OpenAI Batch API body parameters one by one, as `vllm run-batch` takes them: each one offgen
// implements is read into the requests and shapes the record as OpenAI's response does; each it
// does not implement is refused by name unless its value asks for nothing; an unknown key is the
// line's error with the nearest known key suggested, or a warning with --allow-unknown-fields.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/cli/batch_format.h"
#include "engine/cli/request_keys.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using Json = nlohmann::ordered_json;

class BatchParameters : public ::testing::Test {
 protected:
  BatchParameters()
      : config_(ModelConfig::from_json_file(test::data_dir() / "golden" / "tiny-preln" /
                                            "config.json")),
        tokenizer_(Tokenizer::load(test::data_dir() / "golden" / "tiny-preln")) {
    defaults_.max_tokens = 7;
    defaults_.seed = 100;
  }

  // A completions line with `body_fields` (a JSON object's members, without braces).
  cli::ParsedLine parse_body(const std::string& body_fields, std::size_t index = 0) {
    cli::JsonlLine line;
    line.index = index;
    line.line_number = index + 1;
    line.value = Json::parse(R"({"custom_id": "c", "url": "/v1/completions", "body": {)" +
                             body_fields + "}}");
    line_ = line;
    return cli::parse_generate_line(line, config_, tokenizer_.get(), "tiny", defaults_);
  }

  Json record(const cli::ParsedLine& parsed, const std::vector<GenerationResult>& results) {
    return cli::result_record(line_, parsed, results, "", tokenizer_.get(), config_, "tiny", 0);
  }

  // The record's choice for a request that stopped (a stop string or id) after `tokens`.
  Json stopped_choice(const cli::ParsedLine& parsed, const std::vector<std::int32_t>& tokens) {
    GenerationResult r;
    r.tokens = tokens;
    r.finish = FinishReason::stop;
    return record(parsed, {r})["response"]["body"]["choices"][0];
  }

  GenerationResult result_of(const std::string& text, FinishReason finish) {
    GenerationResult r;
    r.tokens = tokenizer_->encode(text);
    r.finish = finish;
    return r;
  }

  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  cli::GenerateDefaults defaults_;
  cli::JsonlLine line_;
};

TEST_F(BatchParameters, NAsksForSeveralChoicesEachWithItsOwnSeed) {
  const cli::ParsedLine parsed = parse_body(R"("prompt": "Hello", "n": 3, "seed": 5)");
  ASSERT_EQ(parsed.problem, "");
  const std::vector<GenerationRequest> requests = cli::line_requests(parsed);
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].seed, 5u);  // the first sample keeps the line's seed
  EXPECT_NE(requests[1].seed, requests[0].seed);
  EXPECT_NE(requests[2].seed, requests[1].seed);
  // Not another line's default seed (seed + index) either.
  EXPECT_NE(requests[1].seed, 6u);
  for (const GenerationRequest& r : requests) EXPECT_EQ(r.prompt, requests[0].prompt);

  const Json out =
      record(parsed, {result_of(" a", FinishReason::length), result_of(" b", FinishReason::length),
                      result_of(" c", FinishReason::stop)});
  const Json& choices = out["response"]["body"]["choices"];
  ASSERT_EQ(choices.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(choices[i]["index"], i);
  EXPECT_EQ(choices[1]["text"], " b");
  EXPECT_EQ(choices[2]["finish_reason"], "stop");
  // Usage counts the prompt once and every choice's tokens.
  const Json& usage = out["response"]["body"]["usage"];
  EXPECT_EQ(usage["prompt_tokens"], parsed.prompts[0].size());
  EXPECT_EQ(usage["completion_tokens"], 3);
}

TEST_F(BatchParameters, AListOfPromptsGivesChoicesInPromptOrder) {
  const cli::ParsedLine parsed = parse_body(R"("prompt": ["one", "two two"], "n": 2)");
  ASSERT_EQ(parsed.problem, "");
  ASSERT_EQ(parsed.prompts.size(), 2u);
  const std::vector<GenerationRequest> requests = cli::line_requests(parsed);
  ASSERT_EQ(requests.size(), 4u);  // prompt 0 samples 0, 1; prompt 1 samples 0, 1
  EXPECT_EQ(requests[0].prompt, parsed.prompts[0]);
  EXPECT_EQ(requests[1].prompt, parsed.prompts[0]);
  EXPECT_EQ(requests[2].prompt, parsed.prompts[1]);
  EXPECT_EQ(requests[2].seed, requests[0].seed);

  const cli::ParsedLine ids = parse_body(R"("prompt": [[2, 7], [2, 8, 9]])");
  ASSERT_EQ(ids.problem, "");
  EXPECT_EQ(ids.prompts, (std::vector<std::vector<std::int32_t>>{{2, 7}, {2, 8, 9}}));
  const Json out =
      record(ids, {result_of(" x", FinishReason::length), result_of(" y", FinishReason::length)});
  EXPECT_EQ(out["response"]["body"]["usage"]["prompt_tokens"], 5);

  EXPECT_NE(parse_body(R"("prompt": ["ok", 5])").problem.find("prompt 1 of the list"),
            std::string::npos);
}

TEST_F(BatchParameters, EchoPutsThePromptBeforeTheCompletion) {
  const cli::ParsedLine text = parse_body(R"("prompt": "Hello", "echo": true)");
  ASSERT_EQ(text.problem, "");
  EXPECT_EQ(
      record(text,
             {result_of(" world", FinishReason::length)})["response"]["body"]["choices"][0]["text"],
      "Hello world");
  // Token prompts are decoded (BOS left out).
  const std::vector<std::int32_t> hello = tokenizer_->encode("Hello");
  std::string id_list = "2";
  for (const std::int32_t id : hello) id_list += ", " + std::to_string(id);
  const cli::ParsedLine ids = parse_body(R"("prompt": [)" + id_list + R"(], "echo": true)");
  ASSERT_EQ(ids.problem, "");
  EXPECT_EQ(
      record(ids,
             {result_of(" world", FinishReason::length)})["response"]["body"]["choices"][0]["text"],
      tokenizer_->decode(hello) + " world");
}

TEST_F(BatchParameters, StopTokenIdsEndTheChoiceAndLeaveTheText) {
  const std::vector<std::int32_t> dot = tokenizer_->encode(".");
  ASSERT_EQ(dot.size(), 1u);
  const cli::ParsedLine parsed =
      parse_body(R"("prompt": "a", "stop_token_ids": [)" + std::to_string(dot[0]) + "]");
  ASSERT_EQ(parsed.problem, "");
  ASSERT_TRUE(static_cast<bool>(parsed.request.stop));
  std::vector<std::int32_t> generated = tokenizer_->encode(" one two");
  EXPECT_FALSE(parsed.request.stop(generated));
  generated.push_back(dot[0]);
  EXPECT_TRUE(parsed.request.stop(generated));
  const Json choice = stopped_choice(parsed, generated);
  EXPECT_EQ(choice["text"], " one two");
  EXPECT_EQ(choice["token_ids"].size(), generated.size());  // the stop token is kept in the ids
  EXPECT_EQ(choice["stop_reason"], dot[0]);
  EXPECT_EQ(choice["finish_reason"], "stop");

  const cli::ParsedLine kept = parse_body(R"("prompt": "a", "include_stop_str_in_output": true,
      "stop_token_ids": [)" + std::to_string(dot[0]) +
                                          "]");
  EXPECT_EQ(stopped_choice(kept, generated)["text"], " one two.");

  EXPECT_NE(parse_body(R"("prompt": "a", "stop_token_ids": [99999999])")
                .problem.find("outside the vocabulary"),
            std::string::npos);
}

TEST_F(BatchParameters, StopStringsNameTheirStopReason) {
  const cli::ParsedLine parsed = parse_body(R"("prompt": "a", "stop": ["two", "zzz"])");
  ASSERT_EQ(parsed.problem, "");
  const Json choice = record(
      parsed, {result_of(" one two three", FinishReason::stop)})["response"]["body"]["choices"][0];
  EXPECT_EQ(choice["text"], " one ");
  EXPECT_EQ(choice["stop_reason"], "two");
  // A choice that ended by EOS or length has no stop reason.
  EXPECT_TRUE(
      record(
          parsed,
          {result_of(" x", FinishReason::length)})["response"]["body"]["choices"][0]["stop_reason"]
          .is_null());
}

TEST_F(BatchParameters, SkipSpecialTokensFalseKeepsEosInTheText) {
  const cli::ParsedLine parsed = parse_body(R"("prompt": "a", "skip_special_tokens": false)");
  ASSERT_EQ(parsed.problem, "");
  GenerationResult r = result_of(" x", FinishReason::stop);
  r.tokens.push_back(config_.eos_token_id);
  const std::string text = record(parsed, {r})["response"]["body"]["choices"][0]["text"];
  EXPECT_EQ(text, " x" + tokenizer_->decode(std::vector<std::int32_t>{config_.eos_token_id}));
  const cli::ParsedLine skipped = parse_body(R"("prompt": "a")");
  EXPECT_EQ(record(skipped, {r})["response"]["body"]["choices"][0]["text"], " x");
}

TEST_F(BatchParameters, AddSpecialTokensFalseLeavesOutBos) {
  const cli::ParsedLine with = parse_body(R"("prompt": "Hello")");
  const cli::ParsedLine without = parse_body(R"("prompt": "Hello", "add_special_tokens": false)");
  ASSERT_EQ(without.problem, "");
  EXPECT_EQ(with.request.prompt.front(), config_.bos_token_id);
  EXPECT_EQ(without.request.prompt, tokenizer_->encode("Hello"));
}

// vLLM's left truncation: each prompt keeps its last k tokens (BOS among those cut).
TEST_F(BatchParameters, TruncatePromptTokensKeepsEachPromptsLastTokens) {
  const cli::ParsedLine parsed =
      parse_body(R"("prompt": [[2, 5, 6, 7, 8], [2, 9]], "truncate_prompt_tokens": 3)");
  ASSERT_EQ(parsed.problem, "");
  EXPECT_EQ(parsed.prompts, (std::vector<std::vector<std::int32_t>>{{6, 7, 8}, {2, 9}}));
  EXPECT_EQ(parsed.request.prompt, (std::vector<std::int32_t>{6, 7, 8}));
  const cli::ParsedLine whole = parse_body(R"("prompt": [2, 5, 6], "truncate_prompt_tokens": -1)");
  EXPECT_EQ(whole.request.prompt, (std::vector<std::int32_t>{2, 5, 6}));
  EXPECT_NE(parse_body(R"("prompt": "a", "truncate_prompt_tokens": 0)")
                .problem.find("'truncate_prompt_tokens' must be an integer >= 1"),
            std::string::npos);
}

TEST_F(BatchParameters, UserAndModelAreReadAndChangeNothing) {
  const cli::ParsedLine parsed = parse_body(R"("prompt": "a", "user": "u-1", "model": "m")");
  EXPECT_EQ(parsed.problem, "");
  EXPECT_NE(parse_body(R"("prompt": "a", "user": 5)").problem.find("'user' must be a string"),
            std::string::npos);
}

// logprobs k (completions) / logprobs true with top_logprobs k (chat): each token's own
// log-probability and the k most likely alternatives, in OpenAI's shapes.
TEST_F(BatchParameters, LogprobsGiveEachTokensOwnLogProbability) {
  const cli::ParsedLine parsed = parse_body(R"("prompt": "a", "logprobs": 0)");
  ASSERT_EQ(parsed.problem, "");
  EXPECT_TRUE(parsed.request.logprobs);
  GenerationResult r = result_of(" one two", FinishReason::length);
  for (std::size_t i = 0; i < r.tokens.size(); ++i)
    r.token_logprobs.push_back(-0.5f * float(i + 1));
  const Json lp = record(parsed, {r})["response"]["body"]["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), r.tokens.size());
  EXPECT_EQ(lp["token_logprobs"][1], -1.0f);
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 1u);  // the token itself, as vLLM gives for 0
  std::string joined;
  for (const auto& t : lp["tokens"]) joined += t.get<std::string>();
  EXPECT_EQ(joined, " one two");
  EXPECT_EQ(lp["text_offset"][1], lp["tokens"][0].get<std::string>().size());

  EXPECT_TRUE(
      record(parse_body(R"("prompt": "a")"), {r})["response"]["body"]["choices"][0]["logprobs"]
          .is_null());
  // k alternatives: completions' top entry is the token itself and then the k most likely.
  const cli::ParsedLine three = parse_body(R"("prompt": "a", "logprobs": 3)");
  ASSERT_EQ(three.problem, "");
  EXPECT_EQ(three.request.top_logprobs, 3);
  GenerationResult with_top = r;
  std::vector<std::int32_t> alternatives;
  for (const char* word : {" the", " and", " of"}) {
    alternatives.push_back(tokenizer_->encode(word).back());
  }
  const auto text_of = [&](std::int32_t id) {
    return tokenizer_->decode(std::vector<std::int32_t>{id});
  };
  ASSERT_NE(text_of(alternatives[0]), text_of(alternatives[1]));
  for (std::size_t i = 0; i < r.tokens.size(); ++i) {
    with_top.top_logprobs.push_back(
        {{alternatives[0], -0.1f}, {alternatives[1], -2.0f}, {alternatives[2], -3.0f}});
  }
  const Json top = record(three, {with_top})["response"]["body"]["choices"][0]["logprobs"];
  ASSERT_EQ(top["top_logprobs"][1].size(), 4u);
  EXPECT_EQ(top["top_logprobs"][1].begin().key(), lp["tokens"][1]);
  EXPECT_EQ(top["top_logprobs"][1][text_of(alternatives[1])], -2.0f);
  for (const char* body : {R"("prompt": "a", "logprobs": 21)", R"("prompt": "a", "logprobs": -1)",
                           R"("prompt": "a", "logprobs": 1.5)"}) {
    EXPECT_NE(parse_body(body).problem.find("'logprobs' must be an integer from 0 to 20"),
              std::string::npos)
        << body;
  }
  EXPECT_NE(parse_body(R"("prompt": "a", "logprobs": 0, "echo": true)").problem.find("'echo'"),
            std::string::npos);

  // Chat: {"content": [{token, logprob, bytes, top_logprobs}]}.
  const cli::ChatPrompt chat =
      cli::ChatPrompt::from_source("{{ messages[0]['content'] }}", "bare", "</s>", "</s>");
  defaults_.chat = &chat;
  cli::JsonlLine line;
  line.value = Json::parse(R"({"custom_id": "c", "url": "/v1/chat/completions", "body": {
      "messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 0}})");
  const cli::ParsedLine chat_line =
      cli::parse_generate_line(line, config_, tokenizer_.get(), "tiny", defaults_);
  ASSERT_EQ(chat_line.problem, "");
  const Json content =
      cli::result_record(line, chat_line, {r}, "", tokenizer_.get(), config_, "tiny",
                         0)["response"]["body"]["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), r.tokens.size());
  EXPECT_EQ(content[0]["logprob"], -0.5f);
  EXPECT_EQ(content[0]["bytes"].size(), content[0]["token"].get<std::string>().size());
  EXPECT_TRUE(content[0]["top_logprobs"].empty());
  line.value["body"]["top_logprobs"] = 3;
  const cli::ParsedLine chat_top =
      cli::parse_generate_line(line, config_, tokenizer_.get(), "tiny", defaults_);
  ASSERT_EQ(chat_top.problem, "");
  EXPECT_EQ(chat_top.request.top_logprobs, 3);
  const Json top_content =
      cli::result_record(line, chat_top, {with_top}, "", tokenizer_.get(), config_, "tiny",
                         0)["response"]["body"]["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(top_content[0]["top_logprobs"].size(), 3u);
  EXPECT_EQ(top_content[0]["top_logprobs"][2]["token"], text_of(alternatives[2]));
  EXPECT_EQ(top_content[0]["top_logprobs"][2]["logprob"], -3.0f);
  EXPECT_EQ(top_content[0]["top_logprobs"][2]["bytes"].size(), text_of(alternatives[2]).size());
  for (const Json& logprobs : {Json(false), Json(nullptr)}) {
    line.value["body"]["logprobs"] = logprobs;  // also when logprobs is not given at all
    EXPECT_NE(cli::parse_generate_line(line, config_, tokenizer_.get(), "tiny", defaults_)
                  .problem.find("'top_logprobs' needs 'logprobs': true"),
              std::string::npos);
  }
}

// Penalties, min_p, min_tokens and logit_bias reach the request as vLLM reads them (a bias is
// clamped to +-100 as vLLM's server clamps it; stop_token_ids are what min_tokens bans); each
// out-of-range value is the line's error naming the key and vLLM's range.
TEST_F(BatchParameters, PenaltiesMinPMinTokensAndLogitBiasAreRead) {
  const cli::ParsedLine parsed = parse_body(
      R"("prompt": "Hello", "max_tokens": 9, "presence_penalty": 0.5, "frequency_penalty": -1.5,
         "repetition_penalty": 1.25, "min_p": 0.05, "min_tokens": 4, "stop_token_ids": [7],
         "logit_bias": {"5": 10, "11": -250})");
  ASSERT_EQ(parsed.problem, "");
  const LogitShaping& s = parsed.request.shaping;
  EXPECT_EQ(s.presence_penalty, 0.5f);
  EXPECT_EQ(s.frequency_penalty, -1.5f);
  EXPECT_EQ(s.repetition_penalty, 1.25f);
  EXPECT_EQ(parsed.request.sampling.min_p, 0.05f);
  EXPECT_EQ(s.min_tokens, 4);
  EXPECT_EQ(s.stop_ids, (std::vector<std::int32_t>{7}));
  EXPECT_EQ(s.logit_bias, (std::vector<std::pair<std::int32_t, float>>{{5, 10.0f}, {11, -100.0f}}));
  const LogitShaping neutral = parse_body(R"("prompt": "Hello")").request.shaping;
  EXPECT_FALSE(neutral.edits_logits());

  const std::pair<const char*, const char*> bad[] = {
      {R"("presence_penalty": 2.5)", "'presence_penalty' must be in [-2, 2], got 2.5"},
      {R"("frequency_penalty": "x")", "'frequency_penalty' must be a number"},
      {R"("repetition_penalty": 0)", "'repetition_penalty' must be greater than zero, got 0"},
      {R"("min_p": 1.5)", "'min_p' must be in [0, 1], got 1.5"},
      {R"("min_tokens": -1)", "'min_tokens' must be an integer >= 0"},
      {R"("min_tokens": 8, "max_tokens": 4)",
       "'min_tokens' must be at most 'max_tokens' (4), got 8"},
      {R"("logit_bias": [1])", "'logit_bias' must be an object of token ids and biases"},
      {R"("logit_bias": {"x5": 1})", "'logit_bias': key \"x5\" is not a token id"},
      {R"("logit_bias": {"999999": 1})", "'logit_bias': token 999999 is outside the vocabulary"},
      {R"("logit_bias": {"5": "up"})", "'logit_bias': the bias of token 5 must be a number"},
  };
  for (const auto& [fields, message] : bad) {
    const cli::ParsedLine line = parse_body(std::string(R"("prompt": "a", )") + fields);
    EXPECT_NE(line.problem.find(message), std::string::npos) << fields << " -> " << line.problem;
  }
}

// min_tokens with stop strings, as vLLM: a stop string written within the first min_tokens tokens
// neither ends the request nor cuts its text; one written after them does both.
TEST_F(BatchParameters, StopStringsCountOnlyAfterMinTokens) {
  std::vector<std::int32_t> early = tokenizer_->encode(" and the light");
  const cli::ParsedLine parsed = parse_body(R"("prompt": "a", "max_tokens": 20, "min_tokens": )" +
                                            std::to_string(early.size()) + R"(, "stop": [" and"])");
  ASSERT_EQ(parsed.problem, "");
  ASSERT_TRUE(parsed.request.stop);
  EXPECT_FALSE(parsed.request.stop(early)) << "' and' among the first min_tokens tokens";
  const std::vector<std::int32_t> more = tokenizer_->encode(" of the day");
  std::vector<std::int32_t> longer = early;
  longer.insert(longer.end(), more.begin(), more.end());
  EXPECT_FALSE(parsed.request.stop(longer));
  const std::vector<std::int32_t> late = tokenizer_->encode(" and night");
  longer.insert(longer.end(), late.begin(), late.end());
  EXPECT_TRUE(parsed.request.stop(longer));
  const Json choice = stopped_choice(parsed, longer);
  EXPECT_EQ(choice["text"], " and the light of the day");
  EXPECT_EQ(choice["stop_reason"], " and");
}

// Each parameter vLLM accepts that offgen does not implement: refused by name with a value that
// asks for something, accepted with the value that asks for nothing.
TEST_F(BatchParameters, ParametersOffgenDoesNotImplementAreRefusedByName) {
  const std::pair<const char*, const char*> refused[] = {
      {R"("best_of": 3)", R"("best_of": 1)"},
      {R"("suffix": "x")", R"("suffix": null)"},
      {R"("use_beam_search": true)", R"("use_beam_search": false)"},
      {R"("guided_json": {"type": "object"})", R"("guided_json": null)"},
      {R"("response_format": {"type": "json_object"})", R"("response_format": {"type": "text"})"},
  };
  for (const auto& [asks, neutral] : refused) {
    const std::string key = Json::parse(std::string("{") + asks + "}").begin().key();
    const cli::ParsedLine bad = parse_body(std::string(R"("prompt": "a", )") + asks);
    EXPECT_NE(bad.problem.find("'" + key + "' is not supported"), std::string::npos)
        << asks << " -> " << bad.problem;
    EXPECT_TRUE(bad.request.prompt.empty());
    const cli::ParsedLine fine = parse_body(std::string(R"("prompt": "a", )") + neutral);
    EXPECT_EQ(fine.problem, "") << neutral;
  }
  EXPECT_NE(parse_body(R"("prompt": "a", "stream": true)").problem.find("'stream' must be false"),
            std::string::npos);
  EXPECT_EQ(parse_body(R"("prompt": "a", "stream": false)").problem, "");
}

TEST_F(BatchParameters, AnUnknownKeyIsAnErrorThatSuggestsTheNearestKey) {
  const std::pair<const char*, const char*> typos[] = {
      {R"("max_token": 5)", "unknown key 'max_token' in 'body' (did you mean 'max_tokens'?)"},
      {R"("temprature": 0.5)", "(did you mean 'temperature'?)"},
      {R"("stop_tokens_ids": [1])", "(did you mean 'stop_token_ids'?)"},
      {R"("banana": 1)", "unknown key 'banana' in 'body' (--allow-unknown-fields"},
  };
  for (const auto& [field, needle] : typos) {
    const cli::ParsedLine parsed = parse_body(std::string(R"("prompt": "a", )") + field);
    EXPECT_NE(parsed.problem.find(needle), std::string::npos) << field << " -> " << parsed.problem;
  }
  // Around the body too.
  cli::JsonlLine line;
  line.value = Json::parse(R"({"custom_id": "c", "bodyy": 1, "body": {"prompt": "a"}})");
  EXPECT_NE(cli::parse_generate_line(line, config_, tokenizer_.get(), "tiny", defaults_)
                .problem.find("unknown key 'bodyy' in the request line (did you mean 'body'?)"),
            std::string::npos);

  defaults_.allow_unknown_fields = true;
  const cli::ParsedLine allowed = parse_body(R"("prompt": "a", "max_token": 5)");
  EXPECT_EQ(allowed.problem, "");
  ASSERT_EQ(allowed.warnings.size(), 1u);
  EXPECT_NE(allowed.warnings[0].find("'max_token'"), std::string::npos);
  EXPECT_NE(allowed.warnings[0].find("ignored"), std::string::npos);
  EXPECT_EQ(allowed.request.max_tokens, 7);  // the typo set nothing
}

// A plain line copies unknown keys to its output, so a key only batch bodies read is refused
// there rather than copied unread.
TEST_F(BatchParameters, APlainLineRefusesKeysOnlyBatchBodiesRead) {
  cli::JsonlLine line;
  line.value = Json::parse(R"({"prompt": "a", "n": 2})");
  EXPECT_NE(cli::parse_generate_line(line, config_, tokenizer_.get(), "tiny", defaults_)
                .problem.find("'n' is read in OpenAI Batch API lines only"),
            std::string::npos);
  line.value = Json::parse(R"({"prompt": "a", "stop_token_ids": [5], "tag": 1})");
  EXPECT_EQ(cli::parse_generate_line(line, config_, tokenizer_.get(), "tiny", defaults_).problem,
            "");
}

TEST(RequestKeys, NearestKeyIsWithinAThirdOfTheKeysLength) {
  const std::vector<std::string_view> known = {"max_tokens", "temperature", "top_p", "n"};
  EXPECT_EQ(cli::nearest_key("max_token", known), "max_tokens");
  EXPECT_EQ(cli::nearest_key("top-p", known), "top_p");
  EXPECT_EQ(cli::nearest_key("zzzzzzzz", known), "");
  EXPECT_EQ(cli::nearest_key("m", known), "n");
}

}  // namespace
}  // namespace offgen
