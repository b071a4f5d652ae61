// offgen._offgen: the engine for the Python package (python/offgen). A Session is
// engine/cli/session.h's: jobs over lines held in memory, answered with the CLI's records, passed
// across as JSON text so that Python reads exactly what `offgen generate` would have written. The
// GIL is released while a job runs; Python's signal handlers run at every interrupt check (before
// each block and step), so Ctrl-C raises KeyboardInterrupt within a step.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/cli/chat_prompt.h"
#include "engine/cli/commands.h"
#include "engine/cli/flag_names.h"
#include "engine/cli/request_fields.h"
#include "engine/cli/session.h"
#include "engine/cli/signals.h"
#include "engine/core/error.h"
#include "engine/runtime/engine.h"
#include "scheduler/placement.h"

namespace py = pybind11;

namespace offgen::python {
namespace {

// Usage errors of the flags (CLI11's: a value out of range, a flag that needs another).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<nlohmann::ordered_json> parse_lines(const std::string& json_lines) {
  const nlohmann::ordered_json array = nlohmann::ordered_json::parse(json_lines);
  OFFGEN_CHECK(array.is_array(), "internal: lines must come as a JSON array");
  return std::vector<nlohmann::ordered_json>(array.begin(), array.end());
}

std::string to_json(const std::vector<cli::Session::LineResult>& results) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const cli::Session::LineResult& r : results) {
    // Each choice's top log-probs by id, most likely first ([[id, logprob], ...] per token).
    nlohmann::ordered_json tops = nlohmann::ordered_json::array();
    for (const GenerationResult& result : r.results) {
      nlohmann::ordered_json steps = nlohmann::ordered_json::array();
      for (const auto& step : result.top_logprobs) {
        nlohmann::ordered_json pairs = nlohmann::ordered_json::array();
        for (const auto& [id, logprob] : step) pairs.push_back({id, logprob});
        steps.push_back(std::move(pairs));
      }
      tops.push_back(std::move(steps));
    }
    out.push_back({{"record", r.record}, {"tokens", r.tokens}, {"top_logprobs", std::move(tops)}});
  }
  // Invalid UTF-8 cannot occur in records (texts are made valid), but a passthrough key might
  // hold any string: replace rather than fail.
  return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// Runs `job` without the GIL; Python's signal handlers run at each interrupt check, and a
// handler's exception (KeyboardInterrupt) stops the job and is raised when it has stopped.
template <typename Job>
auto run_interruptible(Job&& job, bool progress) {
  std::optional<py::error_already_set> raised;
  cli::Session::Hooks hooks;
  hooks.progress = progress;
  hooks.interrupted = [&raised] {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() == 0) return false;
    raised.emplace();  // takes the pending exception
    return true;
  };
  try {
    py::gil_scoped_release release;
    return job(hooks);
  } catch (const Interrupted&) {
    if (raised) {
      raised->restore();
      raised.reset();
      throw py::error_already_set();
    }
    throw;
  }
}

class PySession {
 public:
  explicit PySession(const std::vector<std::string>& flags) {
    cli::CommonOptions options;
    try {
      options = cli::parse_session_flags(flags);
    } catch (const CLI::ParseError& e) {
      throw UsageError(e.what());
    }
    session_ = std::make_unique<cli::Session>(std::move(options));
  }

  std::string generate(const std::string& lines, int max_tokens, float temperature, int top_k,
                       float top_p, std::uint64_t seed, const std::string& chat_template,
                       bool allow_unknown_fields, bool progress) {
    cli::GenerateOptions options;
    options.max_tokens = max_tokens;
    options.temperature = temperature;
    options.top_k = top_k;
    options.top_p = top_p;
    options.seed = seed;
    options.chat_template = chat_template;
    options.allow_unknown_fields = allow_unknown_fields;
    std::vector<nlohmann::ordered_json> parsed = parse_lines(lines);
    return to_json(run_interruptible(
        [&](const cli::Session::Hooks& hooks) {
          return cli::naming_flags(
              [&] { return session_->generate(std::move(parsed), options, hooks); });
        },
        progress));
  }

  std::string score(const std::string& lines, int prefill_tokens, int truncate, bool argmax,
                    bool progress) {
    cli::ScoreOptions options;
    options.prefill_tokens = prefill_tokens;
    options.truncate = truncate;
    options.argmax = argmax;
    std::vector<nlohmann::ordered_json> parsed = parse_lines(lines);
    return to_json(run_interruptible(
        [&](const cli::Session::Hooks& hooks) {
          return cli::naming_flags(
              [&] { return session_->score(std::move(parsed), options, hooks); });
        },
        progress));
  }

  std::vector<std::int32_t> encode(const std::string& text) const {
    return tokenizer().encode(text);
  }
  // As the records' texts are: bytes a cut character leaves become U+FFFD.
  std::string decode(const std::vector<std::int32_t>& ids) const {
    return to_valid_utf8(tokenizer().decode(ids));
  }
  bool has_tokenizer() const { return session_->tokenizer() != nullptr; }
  // A conversation (OpenAI messages, JSON text) as the prompt text the checkpoint's chat
  // template (or the template file `template_file`) renders, as chat requests render it:
  // with the assistant's generation prompt, or else continuing the final message.
  std::string apply_chat_template(const std::string& messages, bool add_generation_prompt,
                                  const std::string& template_file) {
    const nlohmann::ordered_json body = {{"messages", nlohmann::ordered_json::parse(messages)},
                                         {"add_generation_prompt", add_generation_prompt},
                                         {"continue_final_message", !add_generation_prompt}};
    return chat_prompt(template_file).render(body);
  }
  // The template's text ("" where the model has none).
  std::string chat_template(const std::string& template_file) {
    return chat_prompt(template_file).source();
  }
  // The ids a text's tokens follow when a request gives it as a string (OPT: </s>; LLaMA: BOS).
  std::vector<std::int32_t> prompt_prefix() const {
    return cli::prompt_prefix(session_->config(), tokenizer());
  }

  py::dict config() const {
    const ModelConfig& c = session_->config();
    py::dict d;
    d["model_type"] = c.model_type;
    d["num_hidden_layers"] = c.num_layers;
    d["hidden_size"] = c.hidden_size;
    d["num_attention_heads"] = c.num_heads;
    d["num_key_value_heads"] = c.kv_heads();
    d["vocab_size"] = c.vocab_size;
    d["max_position_embeddings"] = c.max_positions();
    d["bos_token_id"] = c.bos_token_id;
    d["eos_token_id"] = c.eos_token_id;
    return d;
  }

  // The loaded engine's placement as a plan file writes it (JSON text), or "" before the first
  // job.
  std::string placement() const {
    const Engine* engine = session_->engine();
    return engine == nullptr ? std::string() : placement_json(engine->placement()).dump();
  }

 private:
  const cli::ChatPrompt& chat_prompt(const std::string& template_file) {
    if (!chat_ || chat_file_ != template_file) {
      const cli::CommonOptions& common = session_->options();
      chat_ = std::make_unique<cli::ChatPrompt>(
          cli::ChatPrompt::for_model(common.tokenizer.empty() ? common.model : common.tokenizer,
                                     template_file, session_->config(), tokenizer()));
      chat_file_ = template_file;
    }
    return *chat_;
  }

  const Tokenizer& tokenizer() const {
    OFFGEN_CHECK(session_->tokenizer() != nullptr,
                 "model {} has no tokenizer (no vocab.json + merges.txt, tokenizer.json or GGUF "
                 "vocabulary): pass tokenizer=DIR",
                 session_->options().model);
    return *session_->tokenizer();
  }

  std::unique_ptr<cli::Session> session_;
  std::unique_ptr<cli::ChatPrompt> chat_;  // found on first use, for chat_file_
  std::string chat_file_;
};

// `offgen bench` with these flags (the command's own, after `bench`), its rows as JSON text.
std::string bench(const std::vector<std::string>& flags, const std::string& json_path) {
  CLI::App app{"offgen"};
  cli::BenchOptions options;
  cli::add_bench_command(app, options);
  std::vector<std::string> args = {"bench"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"--json", json_path});
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  const int code = run_interruptible(
      [&](const cli::Session::Hooks&) {
        // bench runs under the CLI's stop-signal guard, which says what is kept when stopped.
        return cli::run_bench(options);
      },
      false);
  // 2: some rows failed (their "error" says why, as the CLI's rows do); 128 + N: stopped by
  // signal N, which reaches Python as the signal's exception would.
  if (code > 128) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
  std::ifstream in(json_path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace
}  // namespace offgen::python

PYBIND11_MODULE(_offgen, m) {
  using namespace offgen::python;
  m.doc() = "offgen's engine (the offgen package wraps it; see docs/python.md)";
  m.attr("__version__") = OFFGEN_VERSION;  // the project's VERSION in CMakeLists.txt
  // Logs on stderr as the CLI writes them.
  if (!spdlog::get("offgen")) spdlog::set_default_logger(spdlog::stderr_color_mt("offgen"));
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");

  static py::exception<offgen::Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<offgen::OutOfMemoryError> out_of_memory(m, "OutOfMemoryError", error.ptr());
  static py::exception<UsageError> usage(m, "UsageError", PyExc_ValueError);
  // PyErr_SetString rather than the exception's call operator: that is deprecated from pybind11
  // 2.12 (pip's build takes PyPI's newest), and this builds with both.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const offgen::OutOfMemoryError& e) {
      PyErr_SetString(out_of_memory.ptr(), offgen::cli::flag_message(e).c_str());
    } catch (const offgen::Error& e) {
      PyErr_SetString(error.ptr(), offgen::cli::flag_message(e).c_str());
    } catch (const UsageError& e) {
      PyErr_SetString(usage.ptr(), e.what());
    } catch (const nlohmann::json::exception& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.def("set_log_level",
        [](const std::string& level) { spdlog::set_level(spdlog::level::from_str(level)); });
  m.def("bench", &bench, py::arg("flags"), py::arg("json_path"));
  py::class_<PySession>(m, "Session")
      .def(py::init<const std::vector<std::string>&>(), py::arg("flags"))
      .def("generate", &PySession::generate, py::arg("lines"), py::arg("max_tokens"),
           py::arg("temperature"), py::arg("top_k"), py::arg("top_p"), py::arg("seed"),
           py::arg("chat_template"), py::arg("allow_unknown_fields"), py::arg("progress"))
      .def("score", &PySession::score, py::arg("lines"), py::arg("prefill_tokens"),
           py::arg("truncate"), py::arg("argmax"), py::arg("progress"))
      .def("encode", &PySession::encode, py::arg("text"))
      .def("decode", &PySession::decode, py::arg("ids"))
      .def_property_readonly("has_tokenizer", &PySession::has_tokenizer)
      .def_property_readonly("prompt_prefix", &PySession::prompt_prefix)
      .def("apply_chat_template", &PySession::apply_chat_template, py::arg("messages"),
           py::arg("add_generation_prompt"), py::arg("template_file"))
      .def("chat_template", &PySession::chat_template, py::arg("template_file"))
      .def_property_readonly("config", &PySession::config)
      .def_property_readonly("placement", &PySession::placement);
}
