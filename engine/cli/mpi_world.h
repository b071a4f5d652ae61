// MPI's world as Ranks (mpi_world.cpp, built when Open MPI is found; mpi_world_none.cpp
// otherwise). Only ranks.cpp uses it: the rest of offgen sees Ranks.
#pragma once

#include <memory>

#include "engine/cli/ranks.h"

namespace offgen::cli {

bool mpi_world_available();
// MPI_Init_thread (the calling thread alone makes MPI calls) and the world's Ranks.
std::unique_ptr<Ranks> start_mpi_world(int& argc, char**& argv);
// MPI_Finalize when `finalize`; otherwise leaves MPI as it is, for a process being torn down.
void finish_mpi_world(bool finalize);

}  // namespace offgen::cli
