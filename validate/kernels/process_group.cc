// MPI wrappers behind process_group.h; stubs that throw where the build has no MPI. Compiled
// twice: with MPI for tpo-gpu (the executable that does GPU and multi-process work), and with
// TPO_MPI_STUB for `tpo`, which loads no MPI library and hands --mpi runs to tpo-gpu.
#include "validate/kernels/process_group.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "sim/error.h"
#include "tpo/config.h"
#if defined(TPO_MPI_STUB)
#define TPO_USE_MPI 0
#else
#define TPO_USE_MPI TPO_WITH_MPI
#endif
#if TPO_USE_MPI
#include <mpi.h>
#endif

namespace tpo::validate::mpi {

#if TPO_USE_MPI

namespace {
bool started = false;
void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI: ") + what + " failed");
}
}  // namespace

bool built() {
  return true;
}

void init() {
  if (started) return;
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    started = true;  // from here a failure must abort every process
    if (provided < MPI_THREAD_SERIALIZED) {
      throw std::runtime_error(
          "MPI: this MPI library cannot be called from the runtime's comm thread (thread "
          "support level " +
          std::to_string(provided) + "); use an MPI built with threads");
    }
  }
  started = true;
}

bool initialized() {
  return started;
}

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

namespace {
// This process's rank among, and the number of, the processes on its node.
std::pair<int, int> on_node() {
  MPI_Comm node;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  int r = 0, n = 1;
  MPI_Comm_rank(node, &r);
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  return {r, n};
}
}  // namespace

int local_rank() {
  return on_node().first;
}
int local_size() {
  return on_node().second;
}

void finalize() {
  if (!started) return;
  started = false;
  MPI_Finalize();
}

void abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);  // MPI_Abort does not return; this satisfies [[noreturn]]
}

void allreduce_sum(float* buf, std::int64_t n) {
  // MPI counts are int: large messages go in pieces.
  for (std::int64_t done = 0; done < n;) {
    const int part = static_cast<int>(std::min<std::int64_t>(n - done, INT_MAX / 2));
    check(MPI_Allreduce(MPI_IN_PLACE, buf + done, part, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce");
    done += part;
  }
}

void allgather(float* buf, std::int64_t per_rank) {
  if (per_rank > INT_MAX) {
    throw std::runtime_error("MPI_Allgather: " + std::to_string(per_rank) +
                             " floats per rank exceed MPI's int count");
  }
  check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, static_cast<int>(per_rank),
                      MPI_FLOAT, MPI_COMM_WORLD),
        "MPI_Allgather");
}

void broadcast(void* buf, std::size_t bytes, int root) {
  check(MPI_Bcast(buf, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
}

std::int64_t max(std::int64_t v) {
  long long in = v, out = 0;
  check(MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return out;
}

void barrier() {
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

#else  // built without MPI

namespace {
[[noreturn]] void missing() {
  throw InputError("--mpi", "", "this build has no MPI (install libopenmpi-dev and reconfigure)");
}
}  // namespace

bool built() {
  return false;
}
void init() {
  missing();
}
bool initialized() {
  return false;
}
int rank() {
  return 0;
}
int size() {
  return 1;
}
int local_rank() {
  return 0;
}
int local_size() {
  return 1;
}
void finalize() {}
void abort(int code) {
  std::exit(code);
}
void allreduce_sum(float*, std::int64_t) {
  missing();
}
void allgather(float*, std::int64_t) {
  missing();
}
void broadcast(void*, std::size_t, int) {
  missing();
}
std::int64_t max(std::int64_t v) {
  return v;
}
void barrier() {}

#endif

}  // namespace tpo::validate::mpi
