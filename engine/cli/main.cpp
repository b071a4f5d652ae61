// offgen: throughput-oriented batch inference for OPT models.
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <new>
#include <string>

#include "engine/cli/commands.h"
#include "engine/cli/compare_command.h"
#include "engine/cli/flag_names.h"
#include "engine/cli/ranks.h"
#include "engine/core/error.h"

int main(int argc, char** argv) {
  // Under mpirun / srun: MPI for the life of main (the job's ranks split batch jobs; ranks.h).
  std::unique_ptr<offgen::cli::MpiSession> mpi;
  try {
    mpi = std::make_unique<offgen::cli::MpiSession>(argc, argv);
  } catch (const offgen::Error& e) {
    std::fprintf(stderr, "offgen: %s\n", e.what());
    return 1;
  }
  CLI::App app{
      "offgen: throughput-oriented batch inference of OPT and LLaMA-family models on one device, "
      "with weights and KV cache offloaded to host memory and disk"};
  app.require_subcommand(1);
  // OFFGEN_VERSION: the project's VERSION in CMakeLists.txt.
  app.set_version_flag("--version", std::string("offgen ") + OFFGEN_VERSION,
                       "print the version and exit");
  app.footer(
      "Exit codes: 0 every request succeeded; 2 the run completed but some requests got error "
      "records; 1 the run failed or the command line is wrong (the message names the file or "
      "flag); 128 + N stopped by signal N (130 SIGINT, 143 SIGTERM): the results written so far "
      "are kept, and the same command with --resume answers the rest.");
  app.fallthrough();  // --log-level may also come after the subcommand
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();

  offgen::cli::GenerateOptions generate;
  offgen::cli::ScoreOptions score;
  offgen::cli::BenchOptions bench;
  offgen::cli::CalibrateOptions calibrate;
  offgen::cli::PlanOptions plan;
  offgen::cli::CompareCommandOptions compare;
  offgen::cli::add_generate_command(app, generate);
  offgen::cli::add_score_command(app, score);
  offgen::cli::add_bench_command(app, bench);
  offgen::cli::add_calibrate_command(app, calibrate);
  offgen::cli::add_plan_command(app, plan);
  offgen::cli::add_compare_command(app, compare);

  // Logs go to stderr so stdout carries only results (the bench table).
  spdlog::set_default_logger(spdlog::stderr_color_mt("offgen"));
  // Each rank's lines say which rank wrote them.
  const offgen::cli::RankInfo rank = offgen::cli::job_ranks().info();
  spdlog::set_pattern(
      rank.size > 1 ? fmt::format("[%H:%M:%S.%e] [rank {}/{}] [%^%l%$] %v", rank.rank, rank.size)
                    : std::string("[%H:%M:%S.%e] [%^%l%$] %v"));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a usage error exits 1 as documented, not with CLI11's own
    // codes (105 and up).
    return app.exit(e) == 0 ? 0 : 1;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  try {
    if (app.got_subcommand("generate")) return offgen::cli::run_generate(generate);
    if (app.got_subcommand("score")) return offgen::cli::run_score(score);
    if (app.got_subcommand("bench")) return offgen::cli::run_bench(bench);
    if (app.got_subcommand("calibrate")) return offgen::cli::run_calibrate(calibrate);
    if (app.got_subcommand("plan")) return offgen::cli::run_plan(plan);
    if (app.got_subcommand("compare")) return offgen::cli::run_compare(compare);
  } catch (const offgen::Error& e) {
    spdlog::error("{}", offgen::cli::flag_message(e));
    return 1;
  } catch (const std::bad_alloc&) {
    spdlog::error(
        "out of host memory (lower --batch-size or --cpu-mem, or let the planner place "
        "the run)");
    return 1;
  } catch (const std::exception& e) {
    spdlog::error("unexpected error: {}", e.what());
    return 1;
  }
  return 0;
}
