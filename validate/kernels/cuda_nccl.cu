// The NCCL group: a communicator over this process's GPUs or one rank of one across
// processes, and its all-reduce. Builds without NCCL get a group that says so.
#include "validate/kernels/cuda_common.cuh"

namespace tpo::validate::cuda {

#if TPO_WITH_NCCL
struct NcclGroup::Impl {
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<int> devices;  // of each local rank
};

namespace {
// The CTA budget when one is given. Communicators stay blocking: a non-blocking one launches
// each collective from a background thread and the host must poll for it, which delays every
// launch (and would be timed). Hangs are caught by the caller's watchdog instead
// (async_error, abort).
ncclConfig_t group_config(int ctas) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  if (ctas > 0) {
    c.minCTAs = ctas;
    c.maxCTAs = ctas;
  }
  return c;
}

cudaStream_t high_priority_stream(int device) {
  TPO_CUDA_CHECK(cudaSetDevice(device));
  int least = 0, greatest = 0;
  TPO_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s;
  TPO_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
  return s;
}
}  // namespace

std::vector<char> nccl_unique_id() {
  ncclUniqueId id;
  TPO_NCCL_CHECK(ncclGetUniqueId(&id));
  return std::vector<char>(id.internal, id.internal + sizeof(id.internal));
}

NcclGroup::NcclGroup(int rank, int nranks, const std::vector<char>& unique_id, int device, int ctas)
    : impl_(std::make_unique<Impl>()) {
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal)) {
    throw std::runtime_error("NCCL unique id of " + std::to_string(unique_id.size()) +
                             " bytes; expected " + std::to_string(sizeof(id.internal)));
  }
  std::copy(unique_id.begin(), unique_id.end(), id.internal);
  int previous = 0;
  TPO_CUDA_CHECK(cudaGetDevice(&previous));
  TPO_CUDA_CHECK(cudaSetDevice(device));
  ncclComm_t comm;
  ncclConfig_t config = group_config(ctas);
  TPO_NCCL_CHECK(ncclCommInitRankConfig(&comm, nranks, id, rank, &config));
  impl_->comms.push_back(comm);
  impl_->streams.push_back(high_priority_stream(device));
  impl_->devices.push_back(device);
  TPO_CUDA_CHECK(cudaSetDevice(previous));
}

NcclGroup::NcclGroup(int ranks, int ctas) : impl_(std::make_unique<Impl>()) {
  int previous = 0;
  TPO_CUDA_CHECK(cudaGetDevice(&previous));
  std::string why;
  const int n = device_count(&why);
  if (n < ranks) {
    throw std::runtime_error("NCCL group of " + std::to_string(ranks) + " ranks needs " +
                             std::to_string(ranks) + " GPUs; this machine has " +
                             std::to_string(n));
  }
  impl_->comms.resize(std::size_t(ranks));
  {  // one rank per device of this process
    ncclUniqueId id;
    TPO_NCCL_CHECK(ncclGetUniqueId(&id));
    ncclConfig_t config = group_config(ctas);
    TPO_NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < ranks; ++r) {
      TPO_CUDA_CHECK(cudaSetDevice(r));
      TPO_NCCL_CHECK(ncclCommInitRankConfig(&impl_->comms[std::size_t(r)], ranks, id, r, &config));
    }
    TPO_NCCL_CHECK(ncclGroupEnd());
  }
  for (int r = 0; r < ranks; ++r) {
    impl_->streams.push_back(high_priority_stream(r));
    impl_->devices.push_back(r);
  }
  TPO_CUDA_CHECK(cudaSetDevice(previous));  // leave the caller's device current
}

NcclGroup::~NcclGroup() {
  for (auto c : impl_->comms) ncclCommDestroy(c);
  for (auto s : impl_->streams) cudaStreamDestroy(s);
}

int NcclGroup::ranks() const {
  return int(impl_->comms.size());
}
void* NcclGroup::stream(int rank) const {
  return impl_->streams[std::size_t(rank)];
}

void NcclGroup::allreduce_bf16(const std::vector<void*>& bufs, std::size_t count) {
  allreduce_bf16_on(bufs, count, std::vector<void*>(impl_->streams.begin(), impl_->streams.end()));
}

namespace {
// One buffer and one stream per rank of the group, else a clear error.
void check_ranks(const char* what, const std::vector<void*>& bufs,
                 const std::vector<void*>& streams, std::size_t ranks) {
  if (bufs.size() != ranks || streams.size() != ranks) {
    throw std::runtime_error(std::string("NCCL ") + what + ": " + std::to_string(bufs.size()) +
                             " buffers and " + std::to_string(streams.size()) + " streams for " +
                             std::to_string(ranks) + " ranks");
  }
}
}  // namespace

void NcclGroup::allreduce_bf16_on(const std::vector<void*>& bufs, std::size_t count,
                                  const std::vector<void*>& streams) {
  check_ranks("all-reduce", bufs, streams, impl_->comms.size());
  TPO_NCCL_CHECK(ncclGroupStart());
  for (std::size_t r = 0; r < impl_->comms.size(); ++r) {
    TPO_NCCL_CHECK(ncclAllReduce(bufs[r], bufs[r], count, ncclBfloat16, ncclSum, impl_->comms[r],
                                 S(streams[r])));
  }
  TPO_NCCL_CHECK(ncclGroupEnd());
}

void NcclGroup::allgather_bf16_on(const std::vector<void*>& bufs, std::size_t count,
                                  const std::vector<void*>& streams) {
  check_ranks("all-gather", bufs, streams, impl_->comms.size());
  TPO_NCCL_CHECK(ncclGroupStart());
  for (std::size_t r = 0; r < impl_->comms.size(); ++r) {
    int rank = 0;
    TPO_NCCL_CHECK(ncclCommUserRank(impl_->comms[r], &rank));
    // In place: the rank's own values already sit at its place in the gathered buffer.
    const auto* own = static_cast<const char*>(bufs[r]) + std::size_t(rank) * count * 2;
    TPO_NCCL_CHECK(
        ncclAllGather(own, bufs[r], count, ncclBfloat16, impl_->comms[r], S(streams[r])));
  }
  TPO_NCCL_CHECK(ncclGroupEnd());
}

std::string NcclGroup::async_error() const {
  for (std::size_t r = 0; r < impl_->comms.size(); ++r) {
    ncclResult_t st = ncclSuccess;
    if (ncclCommGetAsyncError(impl_->comms[r], &st) != ncclSuccess) return "rank query failed";
    if (st != ncclSuccess && st != ncclInProgress) {
      int rank = int(r);
      ncclCommUserRank(impl_->comms[r], &rank);
      return "rank " + std::to_string(rank) + ": " + ncclGetErrorString(st);
    }
  }
  return "";
}

void NcclGroup::abort() {
  for (auto c : impl_->comms) ncclCommAbort(c);
  impl_->comms.clear();
}

void NcclGroup::synchronize() const {
  int previous = 0;
  TPO_CUDA_CHECK(cudaGetDevice(&previous));
  for (std::size_t r = 0; r < impl_->streams.size(); ++r) {
    TPO_CUDA_CHECK(cudaSetDevice(impl_->devices[r]));
    TPO_CUDA_CHECK(cudaStreamSynchronize(impl_->streams[r]));
  }
  TPO_CUDA_CHECK(cudaSetDevice(previous));
}

#else  // built without NCCL
struct NcclGroup::Impl {};
std::vector<char> nccl_unique_id() {
  throw std::runtime_error("this build has no NCCL (configure where nccl.h and libnccl are found)");
}
NcclGroup::NcclGroup(int, int) {
  throw std::runtime_error("this build has no NCCL (configure where nccl.h and libnccl are found)");
}
NcclGroup::NcclGroup(int, int, const std::vector<char>&, int, int) {
  throw std::runtime_error("this build has no NCCL (configure where nccl.h and libnccl are found)");
}
NcclGroup::~NcclGroup() = default;
int NcclGroup::ranks() const {
  return 0;
}
void* NcclGroup::stream(int) const {
  return nullptr;
}
void NcclGroup::allreduce_bf16(const std::vector<void*>&, std::size_t) {}
void NcclGroup::allreduce_bf16_on(const std::vector<void*>&, std::size_t,
                                  const std::vector<void*>&) {}
void NcclGroup::allgather_bf16_on(const std::vector<void*>&, std::size_t,
                                  const std::vector<void*>&) {}
void NcclGroup::synchronize() const {}
std::string NcclGroup::async_error() const {
  return "";
}
void NcclGroup::abort() {}
#endif

}  // namespace tpo::validate::cuda
