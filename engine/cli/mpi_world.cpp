// MPI's world as Ranks. Only the main thread calls MPI (MPI_THREAD_FUNNELED): the engine's own
// threads never do. Messages to rank 0 are sent without blocking (MPI_Isend) and kept until MPI
// has delivered them; rank 0 polls (MPI_Iprobe), so no rank ever blocks on a slower one except
// in the collectives (the start agreement, bench's gather).
#include "engine/cli/mpi_world.h"

#include <mpi.h>

#include <chrono>
#include <deque>
#include <thread>

#include "engine/cli/signals.h"
#include "engine/core/error.h"

namespace offgen::cli {
namespace {

constexpr int kReportTag = 17;

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail("MPI: {} failed: {}", call, std::string(text, static_cast<std::size_t>(length)));
}

// Waits for `request` with sleeps growing to 20 ms (MPI's own wait spins a core). Returns false,
// leaving the request, when `interruptible` and a stop signal arrives first.
bool wait(MPI_Request& request, bool interruptible) {
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return true;
    if (interruptible && StopSignals::requested()) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
}

class MpiWorld final : public Ranks {
 public:
  MpiWorld() {
    // Errors come back as codes (check() turns them into offgen::Error) instead of aborting.
    check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(MPI_COMM_WORLD, &info_.rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &info_.size), "MPI_Comm_size");
    MPI_Comm node = MPI_COMM_NULL;
    check(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, info_.rank, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
    check(MPI_Comm_rank(node, &info_.local_rank), "MPI_Comm_rank");
    check(MPI_Comm_size(node, &info_.local_size), "MPI_Comm_size");
    MPI_Comm_free(&node);
  }

  ~MpiWorld() override {
    // Sends not yet delivered are dropped: rank 0 reports what reached it.
    for (Outgoing& o : outgoing_) {
      if (o.request != MPI_REQUEST_NULL) MPI_Request_free(&o.request);
    }
  }

  RankInfo info() const override { return info_; }

  bool all(bool ok) override {
    const int mine = ok ? 1 : 0;
    int value = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(&mine, &value, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD, &request),
          "MPI_Iallreduce");
    wait(request, false);
    return value != 0;
  }

  std::vector<std::string> gather(const std::string& text) override {
    const int length = static_cast<int>(text.size());
    std::vector<int> lengths(info_.rank == 0 ? info_.size : 0);
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD, &request),
          "MPI_Igather");
    wait(request, false);
    std::vector<int> offsets(lengths.size());
    int total = 0;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
      offsets[r] = total;
      total += lengths[r];
    }
    std::string all(static_cast<std::size_t>(total), '\0');
    check(MPI_Igatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                       MPI_CHAR, 0, MPI_COMM_WORLD, &request),
          "MPI_Igatherv");
    wait(request, false);
    std::vector<std::string> out;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
      out.push_back(
          all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
    }
    return out;
  }

  bool barrier() override {
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier");
    return wait(request, true);
  }

  void send_to_root(std::string message) override {
    if (info_.rank == 0) return;
    reap();
    Outgoing& o = outgoing_.emplace_back();
    o.text = std::move(message);
    check(MPI_Isend(o.text.data(), static_cast<int>(o.text.size()), MPI_CHAR, 0, kReportTag,
                    MPI_COMM_WORLD, &o.request),
          "MPI_Isend");
  }

  void flush() override {
    for (Outgoing& o : outgoing_) wait(o.request, false);
    outgoing_.clear();
  }

  std::optional<std::pair<int, std::string>> receive() override {
    int arrived = 0;
    MPI_Status status;
    check(MPI_Iprobe(MPI_ANY_SOURCE, kReportTag, MPI_COMM_WORLD, &arrived, &status), "MPI_Iprobe");
    if (!arrived) return std::nullopt;
    int length = 0;
    check(MPI_Get_count(&status, MPI_CHAR, &length), "MPI_Get_count");
    std::string text(static_cast<std::size_t>(length), '\0');
    check(MPI_Recv(text.data(), length, MPI_CHAR, status.MPI_SOURCE, kReportTag, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE),
          "MPI_Recv");
    return std::pair{status.MPI_SOURCE, std::move(text)};
  }

 private:
  struct Outgoing {
    std::string text;  // the buffer MPI reads until the send completes
    MPI_Request request = MPI_REQUEST_NULL;
  };

  // Drops the sends MPI has delivered (std::deque keeps the others' buffers in place).
  void reap() {
    while (!outgoing_.empty()) {
      int done = 0;
      check(MPI_Test(&outgoing_.front().request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (!done) return;
      outgoing_.pop_front();
    }
  }

  RankInfo info_;
  std::deque<Outgoing> outgoing_;
};

}  // namespace

bool mpi_world_available() {
  return true;
}

std::unique_ptr<Ranks> start_mpi_world(int& argc, char**& argv) {
  int provided = 0;
  check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  return std::make_unique<MpiWorld>();
}

void finish_mpi_world(bool finalize) {
  if (finalize) MPI_Finalize();
}

}  // namespace offgen::cli
