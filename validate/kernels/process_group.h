// One TP rank per process: runs launched with `mpirun -np TP tpo validate --mpi ...` (one
// process per GPU, across nodes too). MPI starts lazily (only `--mpi` needs it) with full
// thread support, since the runtime's comm-stream thread makes the collective calls. A build
// without MPI throws a message saying so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tpo::validate::mpi {

bool built();        // this build has MPI
void init();         // MPI_Init_thread once (no-op after the first call)
bool initialized();  // init() ran and MPI_Finalize did not
int rank();          // this process's rank in MPI_COMM_WORLD
int size();          // processes in MPI_COMM_WORLD
// Processes on this node before this one (MPI_COMM_TYPE_SHARED): the GPU to use.
int local_rank();
// Processes on this node.
int local_size();
void finalize();
// Ends every process (a failed rank would leave the others waiting in a collective).
[[noreturn]] void abort(int code);
// In-place sum of n floats over all processes.
void allreduce_sum(float* buf, std::int64_t n);
// In-place all-gather: process r's `per_rank` floats at buf + r * per_rank reach every process.
void allgather(float* buf, std::int64_t per_rank);
void broadcast(void* buf, std::size_t bytes, int root);
// The largest value over all processes.
std::int64_t max(std::int64_t v);
void barrier();

}  // namespace tpo::validate::mpi
