// Compiled twice: TPO_GPU_BINARY=1 into tpo-gpu, 0 into tpo (see cli/gpu_handoff.h).
#include "cli/gpu_handoff.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/error.h"
#include "tpo/config.h"

namespace tpo::cli {

namespace {
std::vector<char*> g_argv;
}

void remember_command_line(int argc, char** argv) {
  g_argv.assign(argv, argv + argc);
  g_argv.push_back(nullptr);
}

bool gpu_libraries_linked() {
  return TPO_GPU_BINARY != 0;
}

void hand_gpu_work_to_gpu_binary() {
#if TPO_GPU_BINARY || !(TPO_WITH_CUDA || TPO_WITH_MPI)
  return;  // tpo-gpu itself, or a build without GPU libraries (nothing to hand over to)
#else
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const fs::path gpu = (ec ? fs::path(".") : self.parent_path()) / "tpo-gpu";
  if (!fs::exists(gpu, ec)) {
    throw RunFailure("this command needs CUDA, NCCL or MPI, which `tpo` hands to `tpo-gpu`; " +
                     gpu.string() + " is missing (build it: cmake --build BUILD --target tpo-gpu)");
  }
  if (g_argv.empty()) throw RunFailure("internal: the command line was not recorded");
  // A tpo-gpu that is really a lean tpo (a copy, a link) would hand over forever.
  if (std::getenv("TPO_HANDED_OVER")) {
    throw RunFailure(gpu.string() +
                     " does not do GPU work itself (is it a copy of tpo?); "
                     "rebuild it: cmake --build BUILD --target tpo-gpu");
  }
  ::setenv("TPO_HANDED_OVER", "1", 1);
  std::string path = gpu.string();
  g_argv[0] = path.data();
  ::execv(path.c_str(), g_argv.data());
  throw RunFailure("cannot start " + path + ": " + std::strerror(errno));
#endif
}

}  // namespace tpo::cli
