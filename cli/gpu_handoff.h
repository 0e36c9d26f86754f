// A lean start: `tpo` links no CUDA, NCCL or MPI library, so the commands that never touch a
// GPU (simulate, plan, CPU profile and validate) start without loading them. GPU and
// multi-process work is done by `tpo-gpu`, the same commands linked with those libraries,
// built beside `tpo`; `tpo` hands such a command to it with the same command line.
#pragma once

namespace tpo::cli {

void remember_command_line(int argc, char** argv);

// Called by a command about to do work that needs CUDA, NCCL or MPI. In tpo-gpu it returns
// (the work runs here). In tpo it replaces this process by tpo-gpu with the same command line
// and never returns, or throws RunFailure when tpo-gpu is missing. A build with neither CUDA
// nor MPI has no tpo-gpu: it returns, and the command says what the build lacks.
void hand_gpu_work_to_gpu_binary();

// True in tpo-gpu.
bool gpu_libraries_linked();

}  // namespace tpo::cli
