// Every offgen subcommand on one CLI11 app, as main() registers them: for tests that parse command
// lines.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/cli/commands.h"
#include "engine/cli/compare_command.h"

namespace offgen::test {

struct CliCommands {
  CLI::App app;
  cli::GenerateOptions generate;
  cli::ScoreOptions score;
  cli::BenchOptions bench;
  cli::CompareCommandOptions compare;
  cli::PlanOptions plan;

  CliCommands() {
    cli::add_generate_command(app, generate);
    cli::add_score_command(app, score);
    cli::add_bench_command(app, bench);
    cli::add_compare_command(app, compare);
    cli::add_plan_command(app, plan);
  }
  CliCommands(const CliCommands&) = delete;  // the app holds references to the options
  CliCommands& operator=(const CliCommands&) = delete;

  // Parses `line` (no program name); throws what CLI11 throws.
  void parse(const std::string& line) { app.parse(line, false); }
};

}  // namespace offgen::test
