// CUDA kernels shared by the profiler and the runtime: cuBLASLt bf16 GEMM, attention with a
// causal KV prefix (cuBLAS strided-batched GEMMs around a masked-softmax kernel), rmsnorm,
// SiLU*mul, residual add, an SM-limited copy kernel that emulates communication, and an NCCL
// all-reduce group. This header has no CUDA types: streams and buffers are opaque pointers,
// so code built without nvcc can include it. Every call throws std::runtime_error with the
// file, line and CUDA/cuBLAS/NCCL message on failure (TPO_CUDA_CHECK and friends).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/kernels/attention_shape.h"

namespace tpo::validate::cuda {

// Number of CUDA devices; 0 (and `why` filled) when there is no driver or device.
int device_count(std::string* why = nullptr);
// Name, SMs, memory, driver, runtime, cuBLAS and NCCL versions of a device.
nlohmann::json device_info(int device);

// Device memory, freed on destruction.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t bytes);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return p_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

// One device's streams (compute, and comm at high priority), cuBLAS handles and workspace.
class Context {
 public:
  explicit Context(int device = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  void* compute_stream() const;
  void* comm_stream() const;
  void synchronize() const;
  bool idle() const;  // both streams have finished what was enqueued (no wait)
  int device() const { return device_; }
  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  int device_;
  std::unique_ptr<Impl> impl_;
};

// A CUDA event: recorded on a stream, waited on by another, timed against another.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  // `external`: inside a stream capture, an event-record node of the graph (so it times each
  // replay) instead of a dependency marker; outside a capture the same as a plain record.
  void record(void* stream, bool external = false);
  void make_wait(void* stream) const;  // `stream` waits for this event
  void synchronize() const;
  bool done() const;  // recorded and reached (no wait)
  static double seconds_between(const Event& from, const Event& to);

 private:
  void* e_ = nullptr;
};

void set_device(int device);

// A CUDA graph made by capturing what is enqueued on a stream (and on streams that join it
// through events) between begin_capture and end_capture; instantiated once, launched often.
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void begin_capture(void* stream);  // relaxed mode: libraries may allocate on first use
  // Ends the capture, instantiates the graph and uploads it on `stream` (so its first launch
  // is not charged the upload).
  void end_capture(void* stream);
  // After a failure during the capture begun on `origin`, into which `other` was forked: joins
  // `other` back, ends the capture (if still active) and drops what was captured, leaving both
  // streams usable; never throws.
  static void abandon_capture(void* origin, void* other) noexcept;
  void launch(void* stream) const;
  bool ready() const { return exec_ != nullptr; }

 private:
  void* graph_ = nullptr;
  void* exec_ = nullptr;
};

// bf16 values uniform in [-scale, scale], from a counter-based hash of (seed, index).
void fill_random_bf16(void* p, std::size_t n, std::uint64_t seed, float scale, void* stream);
// Contiguous device-to-device copy.
void copy_device(void* dst, const void* src, std::size_t bytes, void* stream);
// Strided device-to-device copy of `height` rows of `width_bytes` (cudaMemcpy2DAsync).
void copy_rows(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
               std::size_t width_bytes, std::size_t height, void* stream);
// The KV-cache write after a qkv GEMM, one kernel (bf16): as cpu::store_kv, `requests` x
// `rows` qkv rows (pitch `qkv_n`) to `rows` rows of kv_width per request in k and in v,
// request i's from element i * dst_stride.
void store_kv_bf16(const void* qkv, std::int64_t qkv_n, std::int64_t q_width, std::int64_t kv_width,
                   std::int64_t rows, void* k, void* v, void* stream, std::int64_t requests = 1,
                   std::int64_t dst_stride = 0);
// Per-head RMSNorm in place (bf16, fp32 arithmetic), one kernel: as cpu::head_rmsnorm, one
// warp per (row, head).
void head_rmsnorm_bf16(void* x, std::int64_t pitch, std::int64_t heads, std::int64_t head_dim,
                       const void* w, std::int64_t rows, float eps, void* stream);
// Rotary embeddings in place (bf16, fp32 arithmetic), one kernel: as cpu::rope, its table of
// cosines and sines in bf16 ([positions][rot], as vLLM casts its cos_sin_cache to the
// activations' type).
void rope_bf16(void* qkv, std::int64_t qkv_n, std::int64_t heads, std::int64_t head_dim,
               std::int64_t rot, std::int64_t rows, std::int64_t pos, const void* table,
               void* stream, std::int64_t requests = 1);
// The embedding lookup of a vocabulary slice (bf16), one kernel: as cpu::embed, `ids` int32 on
// the device.
void embed_bf16(const void* ids, const void* table, std::int64_t first, std::int64_t rows, void* x,
                std::int64_t tokens, std::int64_t cols, void* stream);
// Raw host-to-device copy (synchronous).
void copy_from_host(const void* host, void* dev, std::size_t bytes);
void copy_to_host_bf16_as_float(const void* dev, float* host, std::size_t n);
void copy_from_host_float_to_bf16(const float* host, void* dev, std::size_t n);

// c[m x n] (+)= a[m x k] * b[k x n], bf16 row-major, fp32 accumulation (cuBLASLt).
// With `bias` (n bf16 values), the epilogue adds it to every row: c = a b (+ c) + bias.
// `lda`: a's rows that many values apart (0: k), e.g. the LM head reading each request's last
// row in place.
void gemm_bf16(Context& ctx, const void* a, const void* b, void* c, std::int64_t m, std::int64_t n,
               std::int64_t k, bool accumulate, void* stream, const void* bias = nullptr,
               std::int64_t lda = 0);
// The cuBLASLt algorithm configuration gemm_bf16 runs for these operands (its plan is made if
// it is not yet): "tile 128x256, stages id 23, split-K 1, reduction none, swizzle 0, custom 0,
// inner shape id 0, cluster id 2, algo 66, waves 2.55" — the ids are cublasLt.h enum values,
// waves the heuristic's device-utilization estimate. "default" when the heuristic found none
// and cuBLASLt chooses at the call.
std::string gemm_kernel(Context& ctx, const void* a, const void* b, const void* c, std::int64_t m,
                        std::int64_t n, std::int64_t k, bool bias = false);
// Every GEMM shape this context has made a plan for, with its algorithm configuration (as
// gemm_kernel), once per (m, n, k, configuration), in shape order.
struct GemmPlanInfo {
  std::int64_t m, n, k;
  std::string kernel;
};
std::vector<GemmPlanInfo> gemm_plans(Context& ctx);

using validate::AttentionShape;
// Scratch bytes attention_bf16 needs for a shape: pointer arrays, fp32 scores and bf16
// probabilities for every (request, query head).
std::size_t attention_scratch_bytes(const AttentionShape& s);
// q: [requests][q_tokens][q_heads][d]; k, v: [requests][kv_capacity][kv_heads][d]; out like q.
void attention_bf16(Context& ctx, const void* q, const void* k, const void* v, void* out,
                    void* scratch, const AttentionShape& s, void* stream);

// The same attention fused (cuDNN's scaled dot-product attention, bottom-right causal, GQA):
// no scratch, an execution plan per shape. fused_attention_built() says whether this build
// has cuDNN; where it does not, attention_fused_bf16 throws.
bool fused_attention_built();
// Whether libcudnn can be opened on this machine (opened on first use; $TPO_CUDNN_LIB names it).
bool fused_attention_available(std::string* why = nullptr);
// --attention: "cudnn" (fused; refused where unavailable), "cublas" (two batched GEMMs around a
// softmax), or "auto" (cudnn where available). Returns true for the fused kernel.
bool use_fused_attention(const std::string& option);
// The kernel's name for reports: "cudnn-sdpa" or "cublas-batched".
const char* attention_kernel_name(bool fused);
void attention_fused_bf16(Context& ctx, const void* q, const void* k, const void* v, void* out,
                          const AttentionShape& s, void* stream);
// Builds (and caches) the fused kernel's plan for each shape on the current device without
// running it: false, with the first shape cuDNN refuses and its reason in `why`, when one
// cannot be built. For --attention auto to choose the cuBLAS attention for a whole run
// rather than fail in its middle.
bool fused_attention_plans(const std::vector<AttentionShape>& shapes, std::string* why);

// y = rmsnorm(x) with w over `rows` rows `pitch` values apart in x and in y (0: cols).
void rmsnorm_bf16(const void* x, const void* w, void* y, std::int64_t rows, std::int64_t cols,
                  float eps, void* stream, std::int64_t pitch = 0);
// out = act(gate) * up over rows of [gate (ffn) | up (ffn)]: SiLU, or with `gelu` GELU's tanh
// approximation (GeGLU, as cpu::silu_mul).
void silu_mul_bf16(const void* gate_up, void* out, std::int64_t rows, std::int64_t ffn,
                   void* stream, bool gelu = false);
void add_bf16(void* acc, const void* x, std::int64_t n, void* stream);
// c[r][j] += bias[j] over `rows` rows of n (a bias GEMM's bias where cuBLASLt has no epilogue
// algorithm for it).
void add_bias_rows_bf16(void* c, const void* bias, std::int64_t rows, std::int64_t n, void* stream);
// x += o (rounded to bf16 as add_bf16 stores it), then y = rmsnorm(x) with w, over `rows` rows of
// `cols` in one kernel (one block per row; the norm's pass reads back the row the add wrote, from
// cache: vLLM's fused_add_rms_norm). As cpu::add_rmsnorm.
void add_rmsnorm_bf16(void* x, const void* o, const void* w, void* y, std::int64_t rows,
                      std::int64_t cols, float eps, void* stream);

// Holds `stream` for that much GPU time: enqueued before a timed region, it lets the host
// queue the region's launches before the GPU starts on them, so host launch time is not timed.
void spin(void* stream, double microseconds);

// Copies `bytes` with exactly `ctas` thread blocks: communication emulated on a limited
// number of SMs, like NCCL's kernels.
void copy_on_ctas(const void* src, void* dst, std::size_t bytes, int ctas, void* stream);

// A new NCCL unique id (ncclGetUniqueId), as bytes to broadcast to the other processes.
std::vector<char> nccl_unique_id();

// An NCCL communicator: over devices 0..ranks-1 in this process (ncclCommInitAll), or one
// rank of a communicator spread over processes (ncclCommInitRank with the unique id rank 0
// made), on `device`.
class NcclGroup {
 public:
  // `ctas` > 0: the communicator's SM budget (ncclConfig_t minCTAs = maxCTAs, through
  // ncclCommInitRankConfig); 0: NCCL's own choice.
  explicit NcclGroup(int ranks, int ctas = 0);
  NcclGroup(int rank, int nranks, const std::vector<char>& unique_id, int device, int ctas = 0);
  ~NcclGroup();
  int ranks() const;
  // In-place bf16 sum over the ranks: bufs[r] on device r, enqueued on each rank's stream.
  void allreduce_bf16(const std::vector<void*>& bufs, std::size_t count);
  // The same on the caller's streams (one per rank, e.g. each GPU's comm stream).
  void allreduce_bf16_on(const std::vector<void*>& bufs, std::size_t count,
                         const std::vector<void*>& streams);
  // In-place bf16 all-gather: bufs[r] holds nranks x count values, the rank's own `count` at
  // its rank's place; afterwards every rank's holds all of them.
  void allgather_bf16_on(const std::vector<void*>& bufs, std::size_t count,
                         const std::vector<void*>& streams);
  void* stream(int rank) const;
  void synchronize() const;
  // The first asynchronous error of any rank as "rank R: message", or empty (a collective
  // that hangs on the GPU does not block the host; the caller's watchdog polls this).
  std::string async_error() const;
  // Aborts every communicator (ncclCommAbort): what is enqueued on them is dropped.
  void abort();
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpo::validate::cuda
