#include "engine/cli/ranks.h"

#include <cstdlib>
#include <string>

#include "engine/cli/mpi_world.h"
#include "engine/core/error.h"

namespace offgen::cli {
namespace {

// A job of one process: nothing to exchange.
class SingleRank final : public Ranks {
 public:
  RankInfo info() const override { return {}; }
  bool all(bool ok) override { return ok; }
  std::vector<std::string> gather(const std::string& text) override { return {text}; }
  bool barrier() override { return true; }
  void send_to_root(std::string /*message*/) override {}
  void flush() override {}
  std::optional<std::pair<int, std::string>> receive() override { return std::nullopt; }
};

std::unique_ptr<Ranks>& world() {
  static std::unique_ptr<Ranks> ranks;
  return ranks;
}

bool finalize_skipped = false;

// The value of environment variable `name` as a positive count, or 0 when unset or not one.
int env_count(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  return end != value && *end == '\0' && n > 0 && n < (1 << 24) ? static_cast<int>(n) : 0;
}

// Whether a launcher started this process as an MPI rank: Open MPI's mpirun, a PMI (MPICH's
// hydra, srun --mpi=pmi2) or PMIx (srun --mpi=pmix, Open MPI 5) launcher. Slurm's own SLURM_*
// variables are not enough: a batch script's plain `offgen` has them too.
bool launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

}  // namespace

Ranks& job_ranks() {
  static SingleRank single;
  return world() ? *world() : single;
}

bool built_with_mpi() {
  return mpi_world_available();
}

int launched_ranks() {
  if (const int n = env_count("OMPI_COMM_WORLD_SIZE")) return n;
  if (const int n = env_count("PMI_SIZE")) return n;
  // PMIx names only this process's rank: a rank above 0 means several.
  if (env_count("PMIX_RANK") > 0) return 2;
  return 1;
}

MpiSession::MpiSession(int& argc, char**& argv) {
  if (!launched_by_mpi()) return;
  if (!mpi_world_available()) {
    OFFGEN_CHECK(launched_ranks() == 1,
                 "this offgen was built without MPI, but mpirun / srun started it as one of {} "
                 "ranks: each would run the whole job into the same --output. Install Open MPI "
                 "(scripts/setup does) and rebuild, or run offgen without mpirun",
                 launched_ranks());
    return;
  }
  world() = start_mpi_world(argc, argv);
  started_ = true;
}

MpiSession::~MpiSession() {
  if (!started_) return;
  world().reset();
  finish_mpi_world(!finalize_skipped);
}

void MpiSession::skip_finalize() {
  finalize_skipped = true;
}

}  // namespace offgen::cli
