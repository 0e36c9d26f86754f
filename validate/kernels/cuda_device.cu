// Devices, buffers, contexts (streams and library handles), events and copies.
#include "validate/kernels/cuda_common.cuh"

namespace tpo::validate::cuda {

namespace {

__global__ void fill_kernel(bf16* p, std::size_t n, std::uint64_t seed, float scale) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    const float u = float(x >> 40) / float(1ull << 24);  // [0, 1)
    p[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
  }
}

}  // namespace

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cudaGetErrorString(e);
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device";
  return n;
}

nlohmann::json device_info(int device) {
  cudaDeviceProp prop{};
  TPO_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0, nccl = 0;
  TPO_CUDA_CHECK(cudaDriverGetVersion(&driver));
  TPO_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
#if TPO_WITH_NCCL
  ncclGetVersion(&nccl);
#endif
  return {{"backend", "cuda"},
          {"name", prop.name},
          {"sms", prop.multiProcessorCount},
          {"memory_gib", double(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0)},
          {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
          {"driver", driver},
          {"cuda_runtime", runtime},
          {"cublas", cublasLtGetVersion()},
          {"nccl", nccl}};
}

Buffer::Buffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes) TPO_CUDA_CHECK(cudaMalloc(&p_, bytes));
}
Buffer::~Buffer() {
  if (p_) cudaFree(p_);
}
Buffer::Buffer(Buffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) {
  o.p_ = nullptr;
  o.bytes_ = 0;
}
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (p_) cudaFree(p_);
    p_ = o.p_;
    bytes_ = o.bytes_;
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

Context::Context(int device) : device_(device), impl_(std::make_unique<Impl>()) {
  TPO_CUDA_CHECK(cudaSetDevice(device));
  int least = 0, greatest = 0;
  TPO_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  TPO_CUDA_CHECK(cudaStreamCreateWithPriority(&impl_->compute, cudaStreamNonBlocking, least));
  // The comm stream at the highest priority, so its kernels get SMs as soon as any free up.
  TPO_CUDA_CHECK(cudaStreamCreateWithPriority(&impl_->comm, cudaStreamNonBlocking, greatest));
  TPO_CUBLAS_CHECK(cublasCreate(&impl_->blas));
  TPO_CUBLAS_CHECK(cublasLtCreate(&impl_->lt));
  impl_->workspace = Buffer(32u << 20);
}

Context::~Context() {
  cudaSetDevice(device_);  // the handles and streams belong to this device
  for (auto& [shape, p] : impl_->plans) {
    cublasLtMatrixLayoutDestroy(p.la);
    cublasLtMatrixLayoutDestroy(p.lb);
    cublasLtMatrixLayoutDestroy(p.lc);
    cublasLtMatmulDescDestroy(p.op);
  }
  if (impl_->lt) cublasLtDestroy(impl_->lt);
  if (impl_->blas) cublasDestroy(impl_->blas);
  if (impl_->compute) cudaStreamDestroy(impl_->compute);
  if (impl_->comm) cudaStreamDestroy(impl_->comm);
}

void* Context::compute_stream() const {
  return impl_->compute;
}
void* Context::comm_stream() const {
  return impl_->comm;
}
void Context::synchronize() const {
  int previous = 0;
  TPO_CUDA_CHECK(cudaGetDevice(&previous));
  TPO_CUDA_CHECK(cudaSetDevice(device_));
  TPO_CUDA_CHECK(cudaDeviceSynchronize());
  TPO_CUDA_CHECK(cudaSetDevice(previous));  // leave the caller's device current
}

bool Context::idle() const {
  for (void* s : {compute_stream(), comm_stream()}) {
    const cudaError_t e = cudaStreamQuery(S(s));
    if (e == cudaErrorNotReady) return false;
    TPO_CUDA_CHECK(e);
  }
  return true;
}

Event::Event() {
  cudaEvent_t e;
  TPO_CUDA_CHECK(cudaEventCreate(&e));
  e_ = e;
}
Event::~Event() {
  cudaEventDestroy(static_cast<cudaEvent_t>(e_));
}
void Event::record(void* stream, bool external) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (external) TPO_CUDA_CHECK(cudaStreamIsCapturing(S(stream), &capturing));
  if (capturing == cudaStreamCaptureStatusActive) {
    TPO_CUDA_CHECK(
        cudaEventRecordWithFlags(static_cast<cudaEvent_t>(e_), S(stream), cudaEventRecordExternal));
  } else {
    TPO_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(e_), S(stream)));
  }
}
void Event::make_wait(void* stream) const {
  TPO_CUDA_CHECK(cudaStreamWaitEvent(S(stream), static_cast<cudaEvent_t>(e_), 0));
}
bool Event::done() const {
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(e_));
  if (e == cudaErrorNotReady) return false;
  TPO_CUDA_CHECK(e);
  return true;
}
void Event::synchronize() const {
  TPO_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(e_)));
}
double Event::seconds_between(const Event& from, const Event& to) {
  float ms = 0;
  TPO_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from.e_),
                                      static_cast<cudaEvent_t>(to.e_)));
  return double(ms) * 1e-3;
}

void set_device(int device) {
  TPO_CUDA_CHECK(cudaSetDevice(device));
}

Graph::~Graph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}
void Graph::begin_capture(void* stream) {
  TPO_CUDA_CHECK(cudaStreamBeginCapture(S(stream), cudaStreamCaptureModeRelaxed));
}
void Graph::end_capture(void* stream) {
  cudaGraph_t g = nullptr;
  TPO_CUDA_CHECK(cudaStreamEndCapture(S(stream), &g));
  graph_ = g;
  cudaGraphExec_t e = nullptr;
  TPO_CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  exec_ = e;
  TPO_CUDA_CHECK(cudaGraphUpload(e, S(stream)));
}
void Graph::abandon_capture(void* origin, void* other) noexcept {
  auto capturing = [](void* s) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(S(s), &status) == cudaSuccess &&
           status != cudaStreamCaptureStatusNone;
  };
  // An unjoined fork makes ending the capture fail and can leave the forked stream capturing.
  if (capturing(other)) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess) {
      if (cudaEventRecord(e, S(other)) == cudaSuccess) cudaStreamWaitEvent(S(origin), e, 0);
      cudaEventDestroy(e);
    }
  }
  for (void* s : {origin, other}) {
    if (!capturing(s)) continue;
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(S(s), &g);
    if (g) cudaGraphDestroy(g);
  }
  cudaGetLastError();  // the capture's error is reported by whoever threw
}
void Graph::launch(void* stream) const {
  TPO_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), S(stream)));
}

void fill_random_bf16(void* p, std::size_t n, std::uint64_t seed, float scale, void* stream) {
  if (n == 0) return;  // a launch of no blocks is an error
  fill_kernel<<<blocks_for(n, 256), 256, 0, S(stream)>>>(static_cast<bf16*>(p), n, seed, scale);
  TPO_CUDA_CHECK(cudaGetLastError());
}

void copy_device(void* dst, const void* src, std::size_t bytes, void* stream) {
  if (bytes == 0) return;
  TPO_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, S(stream)));
}

void copy_rows(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
               std::size_t width_bytes, std::size_t height, void* stream) {
  if (height == 0 || width_bytes == 0) return;
  TPO_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width_bytes, height,
                                   cudaMemcpyDeviceToDevice, S(stream)));
}

void copy_from_host(const void* host, void* dev, std::size_t bytes) {
  if (bytes == 0) return;
  TPO_CUDA_CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
  // A pageable host-to-device copy may return before its DMA lands, and kernels on the
  // non-blocking streams are not ordered after it: wait for it here.
  TPO_CUDA_CHECK(cudaDeviceSynchronize());
}

void copy_to_host_bf16_as_float(const void* dev, float* host, std::size_t n) {
  std::vector<bf16> tmp(n);
  TPO_CUDA_CHECK(cudaMemcpy(tmp.data(), dev, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < n; ++i) host[i] = __bfloat162float(tmp[i]);
}

void copy_from_host_float_to_bf16(const float* host, void* dev, std::size_t n) {
  std::vector<bf16> tmp(n);
  for (std::size_t i = 0; i < n; ++i) tmp[i] = __float2bfloat16(host[i]);
  TPO_CUDA_CHECK(cudaMemcpy(dev, tmp.data(), n * sizeof(bf16), cudaMemcpyHostToDevice));
  TPO_CUDA_CHECK(cudaDeviceSynchronize());  // as in copy_from_host
}

}  // namespace tpo::validate::cuda
