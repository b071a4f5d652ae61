// A build without MPI: every job is one rank.
#include "engine/cli/mpi_world.h"

#include "engine/core/error.h"

namespace offgen::cli {

bool mpi_world_available() {
  return false;
}

std::unique_ptr<Ranks> start_mpi_world(int& /*argc*/, char**& /*argv*/) {
  fail("this offgen was built without MPI");
}

void finish_mpi_world(bool /*finalize*/) {}

}  // namespace offgen::cli
