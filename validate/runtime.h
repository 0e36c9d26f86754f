// The validation runtime: executes a sim::Schedule — the very graph the simulator timed —
// with real kernels, one thread per (rank, stream), and records when each op ran. Strategies
// are not re-implemented here: every op is interpreted from its code, its layer/module and
// the token block it covers. A plain reference forward of each architecture (standard,
// ladder, parallel block), written without the graph, checks the output.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/schedule.h"
#include "sim/strategy.h"
#include "sim/workload.h"

namespace tpo::validate {

struct RunOptions {
  int repeat = 3;  // timed runs; the median is reported
  int warmup = 1;  // untimed runs first
  std::uint64_t seed = 1234;
  // One rank per process (launched with mpirun -np TP): this process runs rank
  // mpi::rank() only, and all-reduces go over MPI (CPU) or NCCL across processes (CUDA).
  bool mpi = false;
  // CUDA: the attention kernel (auto | cudnn | cublas), as `tpo profile --attention`.
  std::string attention = "auto";
  // CUDA: queued (the host queues the schedule behind a spin before the GPU starts), eager
  // (ops launched as the host gets to them) or graph (captured once, replayed). The CPU
  // runtime runs every mode alike (its threads start an op as soon as it may run).
  sim::ExecMode exec = sim::ExecMode::Queued;
  // CUDA with NCCL: seconds without any op finishing before the run is aborted (exit 1,
  // naming the rank and the op).
  double nccl_timeout_s = 300;
};

struct RunResult {
  // One run: per op start and end (ns from the run's start), all-reduce waits where known.
  struct Timeline {
    std::vector<std::int64_t> start_ns, end_ns, wait_ns;
    std::int64_t total_ns = 0;
    std::vector<float> output;
    std::int64_t untimed_total_ns = -1;  // CUDA --exec graph: RunResult::untimed_totals_ns
  };
  std::vector<std::int64_t> start_ns, end_ns;  // rank 0, median run, from the run's start
  // All-reduces: how long rank 0 waited for the last rank before the collective could start
  // (its start_ns is when all had arrived). Empty where not measured.
  std::vector<std::int64_t> wait_ns;
  std::int64_t total_ns = 0;            // median of the timed runs
  std::vector<std::int64_t> totals_ns;  // every timed run
  // CUDA --exec graph: after each timed run, the same schedule captured without its per-op
  // timing events, launched from fresh state: its totals (empty otherwise). The timed graph's
  // event nodes may cost time of their own; this shows how much.
  std::vector<std::int64_t> untimed_totals_ns;
  // The final residual stream, [batch][seq][hidden]; with the LM head (--embed-head) the
  // logits of each request's last position after it, [batch][vocab] (run_output).
  std::vector<float> output;
  std::string attention_kernel;  // CUDA: which attention kernel ran
  std::string device;            // CUDA: the name of the GPU rank 0 ran on; empty on the CPU
  // CUDA: the cuBLASLt algorithm configuration of each GEMM shape rank 0 ran (as the
  // profile's `kernel`), to compare with the profile's at the same shape.
  struct GemmKernel {
    std::int64_t m, n, k;
    std::string kernel;
  };
  std::vector<GemmKernel> gemm_kernels;
  // CUDA --comm emulated: the copy kernel as measured before the runs (each all-reduce's copy
  // is sized from them: bytes = (target - fixed) x rate). 0: not emulated.
  double copy_gbps = 0, copy_fixed_us = 0;
  int copy_ctas = 0;
};

// Runs the schedule on the CPU: fp32, ranks as threads, a compute and a comm thread per rank,
// a shared-memory all-reduce (with RunOptions::mpi: this process's rank, MPI all-reduce).
RunResult run_cpu(const sim::Workload& w, const sim::Schedule& s, const RunOptions& o);

// The reference: the same weights and inputs, computed module by module on all tokens at
// once, with the architecture's residual rule (standard; ladder on the last N layers;
// parallel attention + MLP). No schedule involved.
// `ranks_summed`: how many ranks' partial outputs each all-reduce sums (all of them by
// default; 1 for emulated communication, where only rank 0 runs and the all-reduce moves
// bytes without summing).
std::vector<float> reference_forward(const sim::Workload& w, const sim::StrategySpec& spec,
                                     std::uint64_t seed, std::int64_t ranks_summed = 0);

// The CUDA runtime (builds with CUDA only): the graph enqueued op by op on each GPU's compute
// and comm streams, cross-stream dependencies as events, bf16 kernels. comm "nccl": one GPU
// per rank in this process, NCCL all-reduces. comm "emulated": rank 0 alone on GPU 0, each
// all-reduce replaced by the SM-limited copy kernel sized to last `allreduce_target_ns[i]`
// (the target machine's all-reduce time for op i); the output then sums rank 0 only.
// The name of the GPU a CUDA run of this process would use first (under --mpi, its local
// rank's); empty where the build has no CUDA or the machine no usable GPU.
std::string cuda_device_name(bool mpi);

RunResult run_cuda(const sim::Workload& w, const sim::Schedule& s, const RunOptions& o,
                   const std::string& comm, const std::vector<std::int64_t>& allreduce_target_ns,
                   int comm_ctas = 16);
bool cuda_runtime_built();

// The median run of several (by total time), with every run's total in run order.
RunResult median_of_runs(std::vector<RunResult::Timeline> runs);

// max |a - b| / max |b|: the error measure of the correctness check.
double relative_error(const std::vector<float>& a, const std::vector<float>& b);
// The error of a run's output whose last `logits` values are logits (--embed-head): the residual
// stream's and the logits' each on its own scale (the logits are smaller, and a wrong final
// norm or LM head could hide under the stream's), the larger; relative_error without logits.
double output_error(const std::vector<float>& got, const std::vector<float>& want,
                    std::size_t logits);

}  // namespace tpo::validate
