// Fused attention: cuDNN's scaled dot-product attention through the cudnn-frontend graph API
// (header-only C++). bf16 in and out, fp32 softmax; GQA (query heads sharing KV heads);
// causal with the diagonal aligned bottom-right, so a chunk of q tokens attends to the prefix
// in the KV cache and to itself; decode is the q = 1 case. Q, K, V and O are read and written
// in the runtime's own layouts through strides (no copies). An execution plan is built once
// per shape and device and kept. Built only with cuDNN and the frontend headers; never run on
// a GPU before the next device check. libcudnn is opened on first use (the frontend's dynamic
// loading), so tpo-gpu starts on machines without it and falls back to the cuBLAS attention.
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING 1
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cstdlib>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <cuda_runtime.h>

#include "validate/kernels/cuda_kernels.h"

// The frontend finds cuDNN's entry points through this handle.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace tpo::validate::cuda {

namespace {

namespace fe = cudnn_frontend;

// Opens libcudnn once: $TPO_CUDNN_LIB, else libcudnn.so.9 / libcudnn.so on the library path.
bool open_cudnn(std::string* why) {
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    std::vector<std::string> names;
    if (const char* env = std::getenv("TPO_CUDNN_LIB"); env && *env) names.push_back(env);
    names.push_back("libcudnn.so.9");
    names.push_back("libcudnn.so");
    for (const auto& n : names) {
      if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
        cudnn_frontend::cudnn_dlhandle = h;
        return;
      }
      const char* e = dlerror();
      error += (error.empty() ? "" : "; ") + n + ": " + (e ? e : "not found");
    }
  });
  if (why) *why = error;
  return cudnn_frontend::cudnn_dlhandle != nullptr;
}

constexpr std::int64_t kQ = 1, kK = 2, kV = 3, kO = 4;  // tensor uids of the variant pack

struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  void* workspace = nullptr;
  std::int64_t workspace_bytes = 0;
};

using Key = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                       std::int64_t, std::int64_t, std::int64_t>;

struct State {
  std::mutex mu;
  std::map<int, cudnnHandle_t> handles;  // per device
  std::map<Key, Plan> plans;
  ~State() {
    for (auto& [key, p] : plans) {
      if (p.workspace) cudaFree(p.workspace);
    }
    for (auto& [dev, h] : handles) fe::detail::destroy_handle(h);
  }
};

State& state() {
  static State s;
  return s;
}

void check(const fe::error_t& e, const char* what) {
  if (!e.is_good()) {
    throw std::runtime_error(std::string("cuDNN attention: ") + what + ": " +
                             const_cast<fe::error_t&>(e).get_message());
  }
}

Plan build(cudnnHandle_t handle, const AttentionShape& s) {
  const std::int64_t b = s.requests, hq = s.q_heads, hk = s.kv_heads, d = s.head_dim;
  const std::int64_t sq = s.q_tokens, skv = s.prefix + s.q_tokens, cap = s.kv_capacity;
  const std::int64_t qs = s.q_stride();
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // Logical dims (batch, heads, sequence, head dim); strides of the runtime's layouts:
  // q and o [request][token][head][d] (q's token rows qs apart: in place in the qkv rows),
  // the KV cache [request][capacity][kv head][d].
  auto Q = g->tensor(fe::graph::Tensor_attributes()
                         .set_name("Q")
                         .set_uid(kQ)
                         .set_dim({b, hq, sq, d})
                         .set_stride({sq * qs, d, qs, 1}));
  auto K = g->tensor(fe::graph::Tensor_attributes()
                         .set_name("K")
                         .set_uid(kK)
                         .set_dim({b, hk, skv, d})
                         .set_stride({cap * hk * d, d, hk * d, 1}));
  auto V = g->tensor(fe::graph::Tensor_attributes()
                         .set_name("V")
                         .set_uid(kV)
                         .set_dim({b, hk, skv, d})
                         .set_stride({cap * hk * d, d, hk * d, 1}));
  auto options = fe::graph::SDPA_attributes()
                     .set_name("prefix_causal_attention")
                     .set_generate_stats(false)
                     .set_attn_scale(1.0f / std::sqrt(static_cast<float>(d)))
                     .set_causal_mask_bottom_right(true);
  auto [O, stats] = g->sdpa(Q, K, V, options);
  (void)stats;
  O->set_output(true).set_uid(kO).set_dim({b, hq, sq, d}).set_stride({sq * hq * d, d, hq * d, 1});
  check(g->validate(), "validate");
  check(g->build_operation_graph(handle), "build_operation_graph");
  check(g->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
  check(g->check_support(handle), "check_support");
  check(g->build_plans(handle), "build_plans");
  Plan p;
  p.graph = g;
  check(g->get_workspace_size(p.workspace_bytes), "get_workspace_size");
  if (p.workspace_bytes > 0 &&
      cudaMalloc(&p.workspace, static_cast<std::size_t>(p.workspace_bytes)) != cudaSuccess) {
    throw std::runtime_error("cuDNN attention: cannot allocate its workspace");
  }
  return p;
}

}  // namespace

bool fused_attention_built() {
  return true;
}

bool fused_attention_available(std::string* why) {
  return open_cudnn(why);
}

void attention_fused_bf16(Context& ctx, const void* q, const void* k, const void* v, void* out,
                          const AttentionShape& s, void* stream) {
  std::string why;
  if (!open_cudnn(&why)) {
    throw std::runtime_error("cuDNN attention: cannot open libcudnn (" + why +
                             "); set TPO_CUDNN_LIB or use --attention cublas");
  }
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  const int dev = ctx.device();
  auto h = st.handles.find(dev);
  if (h == st.handles.end()) {
    cudnnHandle_t handle = nullptr;
    if (fe::detail::create_handle(&handle) != CUDNN_STATUS_SUCCESS) {
      throw std::runtime_error("cuDNN attention: cudnnCreate failed (is libcudnn installed?)");
    }
    h = st.handles.emplace(dev, handle).first;
  }
  if (fe::detail::set_stream(h->second, static_cast<cudaStream_t>(stream)) !=
      CUDNN_STATUS_SUCCESS) {
    throw std::runtime_error("cuDNN attention: cudnnSetStream failed");
  }
  const Key key{dev,        s.requests, s.q_heads,     s.kv_heads,  s.head_dim,
                s.q_tokens, s.prefix,   s.kv_capacity, s.q_stride()};
  auto it = st.plans.find(key);
  if (it == st.plans.end()) it = st.plans.emplace(key, build(h->second, s)).first;
  std::unordered_map<std::int64_t, void*> pack{{kQ, const_cast<void*>(q)},
                                               {kK, const_cast<void*>(k)},
                                               {kV, const_cast<void*>(v)},
                                               {kO, out}};
  check(it->second.graph->execute(h->second, pack, it->second.workspace), "execute");
}

}  // namespace tpo::validate::cuda
