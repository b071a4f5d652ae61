// The processes of one job. A batch job started by `mpirun -n N` or Slurm's `srun` runs as N
// ranks that split its requests (data parallel: each rank has its own engine, on its own GPU or
// the cpu device, and no tensor crosses ranks). Ranks exchange only small text messages:
// agreeing to start, progress and final reports sent to rank 0, and bench's rows gathered there.
// Without MPI (a plain `offgen ...`, or a build without Open MPI) the job is one rank.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace offgen::cli {

struct RankInfo {
  int rank = 0;        // 0 .. size-1; rank 0 reports and merges
  int size = 1;        // ranks in the job
  int local_rank = 0;  // among the ranks on this machine: picks its GPU
  int local_size = 1;  // ranks on this machine: they share its host memory
};

class Ranks {
 public:
  virtual ~Ranks() = default;
  virtual RankInfo info() const = 0;

  // Collective (every rank calls it, in the same order): true when `ok` is true on every rank.
  virtual bool all(bool ok) = 0;
  // Collective: rank 0 gets every rank's `text`, in rank order; the others get nothing.
  virtual std::vector<std::string> gather(const std::string& text) = 0;
  // Collective: returns true once every rank has called it, or false as soon as a stop signal
  // (signals.h) arrives first: a rank that died never comes.
  virtual bool barrier() = 0;
  // The collectives wait with short sleeps, not MPI's busy polling, so a rank that waits for the
  // others leaves their cores to them (ranks often share a machine).

  // Ranks other than 0: queues `message` for rank 0 without waiting for it to be received.
  // Messages from one rank arrive in the order sent.
  virtual void send_to_root(std::string message) = 0;
  // Waits until rank 0 has received every message queued by send_to_root.
  virtual void flush() = 0;
  // Rank 0: a message that has arrived from another rank (its rank and text), if any; never waits.
  virtual std::optional<std::pair<int, std::string>> receive() = 0;
};

// The ranks of this process's job: MPI's world after an MpiSession started it, else one rank.
Ranks& job_ranks();

// Starts MPI for the life of main() when the process was launched by an MPI launcher (mpirun,
// mpiexec, srun) and this build has MPI; otherwise does nothing, so a plain `offgen` never loads
// MPI's runtime. Throws offgen::Error when the launcher started several ranks but this build has
// no MPI (each would run the whole job into the same output).
class MpiSession {
 public:
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // Whether the process exits without finalizing MPI: after a stop signal, when the launcher is
  // already tearing the job down and a collective finalize could wait for a dead rank.
  static void skip_finalize();

 private:
  bool started_ = false;
};

// Whether this build has MPI (Open MPI found at build time).
bool built_with_mpi();

// The ranks a launcher says it started (its environment: Open MPI, PMIx, PMI, Slurm), or 1.
int launched_ranks();

}  // namespace offgen::cli
