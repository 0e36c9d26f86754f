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

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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

// The version of the libcudnn opened (major x 10000 + minor x 100 + patch), 0 before.
std::size_t& opened_version() {
  static std::size_t v = 0;
  return v;
}

// Opens libcudnn once: $TPO_CUDNN_LIB, else libcudnn.so.9 on the library path; refuses a
// cuDNN whose fused attention cudnn-frontend cannot run here: older than 9.6 (bottom-right
// causal masks at lengths off the 64-token grid) or 9.10.0 / 9.10.1 (refused by the frontend).
bool open_cudnn(std::string* why) {
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    std::vector<std::string> names;
    if (const char* env = std::getenv("TPO_CUDNN_LIB"); env && *env) names.push_back(env);
    names.push_back("libcudnn.so.9");
    for (const auto& n : names) {
      void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (!h) {
        const char* e = dlerror();
        error += (error.empty() ? "" : "; ") + n + ": " + (e ? e : "not found");
        continue;
      }
      using GetVersion = std::size_t (*)();
      const auto get_version = reinterpret_cast<GetVersion>(dlsym(h, "cudnnGetVersion"));
      const std::size_t v = get_version ? get_version() : 0;
      // cuDNN 9 numbers its versions major x 10000 + minor x 100 + patch; cuDNN 8 x 1000.
      const std::size_t major = v >= 10000 ? v / 10000 : v / 1000;
      const std::size_t minor = v >= 10000 ? v / 100 % 100 : v / 100 % 10;
      const std::string version =
          std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
      std::string refused;
      if (!get_version) {
        refused = "no cudnnGetVersion: not a cuDNN library";
      } else if (v < 90600) {
        refused =
            "cuDNN " + version + ": prefix-causal attention at any length needs cuDNN 9.6 or newer";
      } else if (v == 91000 || v == 91001) {
        refused = "cuDNN " + version + ": its fused attention is refused by cudnn-frontend";
      }
      if (!refused.empty()) {
        error += (error.empty() ? "" : "; ") + n + ": " + refused;
        dlclose(h);
        continue;
      }
      cudnn_frontend::cudnn_dlhandle = h;
      opened_version() = v;
      return;
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
                       std::int64_t, std::int64_t, std::int64_t, std::int64_t, float, float>;

// What cuDNN keeps per GPU, made on first use there.
struct Device {
  cudnnHandle_t handle = nullptr;
  std::shared_ptr<fe::KernelCache> kernel_cache;  // shared by its dynamic-shape plans
  bool dynamic_ok = true;                         // dynamic-shape plans not refused here
  // The same two for soft-capped graphs (Gemma-2's), another topology, kept apart so that a
  // refusal of theirs leaves the others' dynamic plans alone.
  std::shared_ptr<fe::KernelCache> capped_kernel_cache;
  bool capped_dynamic_ok = true;
  bool probed = false;
  std::string probe_error;  // why the probe call failed ("" = it ran)
};

struct State {
  std::mutex mu;
  std::map<int, Device> devices;
  std::map<Key, Plan> plans;
};

// Never destroyed: at exit the CUDA context and the streams the handles were set to may be gone
// already, and destroying cuDNN handles then can crash (the process frees everything anyway).
State& state() {
  static State& s = *new State;
  return s;
}

void check(const fe::error_t& e, const char* what) {
  if (!e.is_good()) {
    throw std::runtime_error(std::string("cuDNN attention: ") + what + ": " +
                             const_cast<fe::error_t&>(e).get_message());
  }
}

// The graph of one shape, built into an execution plan. With `cache`, a dynamic-shape graph
// whose compiled kernel the cache lends to later shapes of the same topology (cuDNN compiles
// its attention kernels at run time; a profile sweeps ~100 shapes).
std::shared_ptr<fe::graph::Graph> make_graph(cudnnHandle_t handle, const AttentionShape& s,
                                             const std::shared_ptr<fe::KernelCache>& cache) {
  const std::int64_t b = s.requests, hq = s.q_heads, hk = s.kv_heads, d = s.head_dim;
  const std::int64_t sq = s.q_tokens, skv = s.prefix + s.q_tokens, cap = s.kv_capacity;
  const std::int64_t qs = s.q_stride();
  const bool band = s.window > 0 && s.window < skv;
  // cudnn-frontend refuses a left bound with a bottom-right diagonal where the chunk has no
  // prefix (s_q == s_kv) on Hopper below cuDNN 9.10 (its SDPA support checks).
  if (band && sq == skv && opened_version() < 91000) {
    throw std::runtime_error(
        "a sliding window on a chunk with no prefix needs cuDNN 9.10 or "
        "newer on Hopper; use --attention cublas");
  }
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  if (cache) g->set_dynamic_shape_enabled(true).set_kernel_cache(cache);
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
                     .set_attn_scale(s.score_scale());
  // A sliding window: each query keeps the keys within `window` of its own position, itself
  // included (the frontend retains key + window - (skv - sq) > query row).
  if (s.softcap > 0) {
    // Gemma-2's soft cap on the scaled scores, as a score modifier: cap x tanh(score x scale /
    // cap), the scale inside it (the SDPA's own scale is 1), so that the order of the two does
    // not depend on which of cuDNN's SDPA nodes runs the graph. The frontend applies no
    // built-in mask beside a modifier, so the modifier masks too, after the cap, with the
    // helper its built-in bottom-right causal mask and left bound use (the same bounds as
    // below).
    options.set_attn_scale(1.0f);
    const float cap_value = s.softcap, pre = s.score_scale() / s.softcap;
    const std::optional<std::int64_t> left =
        band ? std::optional<std::int64_t>(s.window) : std::nullopt;
    options.set_score_mod(
        [cap_value, pre, left, sq, skv](std::shared_ptr<fe::graph::Graph> graph,
                                        std::shared_ptr<fe::graph::Tensor_attributes> score) {
          using fe::PointwiseMode_t;
          using fe::graph::Pointwise_attributes;
          auto scaled = graph->pointwise(
              score, std::make_shared<fe::graph::Tensor_attributes>(pre),
              Pointwise_attributes().set_name("scale_over_cap").set_mode(PointwiseMode_t::MUL));
          auto tanh = graph->pointwise(
              scaled,
              Pointwise_attributes().set_name("softcap_tanh").set_mode(PointwiseMode_t::TANH_FWD));
          auto capped = graph->pointwise(
              tanh, std::make_shared<fe::graph::Tensor_attributes>(cap_value),
              Pointwise_attributes().set_name("times_cap").set_mode(PointwiseMode_t::MUL));
          return fe::graph::attn::score_modifiers::sliding_window_mask(
              graph, capped, fe::DiagonalAlignment_t::BOTTOM_RIGHT, left, std::int64_t{0}, sq, skv,
              nullptr, nullptr, nullptr, nullptr);
        });
  } else {
    options.set_causal_mask_bottom_right(true);
    if (band) options.set_diagonal_band_left_bound(int(s.window));
  }
  auto [O, stats] = g->sdpa(Q, K, V, options);
  (void)stats;
  O->set_output(true).set_uid(kO).set_dim({b, hq, sq, d}).set_stride({sq * hq * d, d, hq * d, 1});
  check(g->validate(), "validate");
  check(g->build_operation_graph(handle), "build_operation_graph");
  check(g->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
  check(g->check_support(handle), "check_support");
  check(g->build_plans(handle), "build_plans");
  return g;
}

// A dynamic-shape plan through the device's kernel cache where cuDNN supports it (SDPA forward
// since cudnn-frontend 1.18), else a static one; TPO_CUDNN_STATIC=1 forces static plans. A build
// slower than half a second is reported on stderr (cuDNN compiles kernels at run time).
Plan build(cudnnHandle_t handle, const AttentionShape& s, std::shared_ptr<fe::KernelCache>& cache,
           bool& dynamic_ok) {
  const auto t0 = std::chrono::steady_clock::now();
  const char* force_static = std::getenv("TPO_CUDNN_STATIC");
  Plan p;
  std::string dynamic_error;
  if (dynamic_ok && !(force_static && std::string(force_static) == "1")) {
    try {
      if (!cache) cache = std::make_shared<fe::KernelCache>();
      p.graph = make_graph(handle, s, cache);
    } catch (const std::exception& e) {
      dynamic_error = e.what();
    }
  }
  if (!p.graph) {
    p.graph = make_graph(handle, s, nullptr);  // throws if this shape cannot run at all
    if (!dynamic_error.empty()) {
      dynamic_ok = false;  // the static plan built where the dynamic one did not: not again here
      std::fprintf(stderr,
                   "tpo: cuDNN attention: dynamic-shape plans unavailable%s (%s); building one "
                   "plan per shape\n",
                   s.softcap > 0 ? " with a soft cap" : "", dynamic_error.c_str());
    }
  }
  check(p.graph->get_workspace_size(p.workspace_bytes), "get_workspace_size");
  if (p.workspace_bytes > 0 &&
      cudaMalloc(&p.workspace, static_cast<std::size_t>(p.workspace_bytes)) != cudaSuccess) {
    throw std::runtime_error("cuDNN attention: cannot allocate its workspace");
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (sec > 0.5) {
    std::fprintf(stderr, "tpo: cuDNN attention plan for %lld x %lld queries, prefix %lld: %.2f s\n",
                 (long long)s.requests, (long long)s.q_tokens, (long long)s.prefix, sec);
  }
  return p;
}

// build() with the device's kernel cache and flag for the shape's topology.
Plan build(Device& d, const AttentionShape& s) {
  return s.softcap > 0 ? build(d.handle, s, d.capped_kernel_cache, d.capped_dynamic_ok)
                       : build(d.handle, s, d.kernel_cache, d.dynamic_ok);
}

}  // namespace

bool fused_attention_built() {
  return true;
}

namespace {

// The plan cache's key of a shape on device `dev`.
Key key_of(int dev, const AttentionShape& s) {
  return {dev,
          s.requests,
          s.q_heads,
          s.kv_heads,
          s.head_dim,
          s.q_tokens,
          s.prefix,
          s.kv_capacity,
          s.q_stride(),
          s.window < s.prefix + s.q_tokens ? s.window : 0,
          s.score_scale(),
          s.softcap};
}

// The device's cuDNN handle, made on first use; st.mu held.
void ensure_handle(Device& d) {
  if (!d.handle && fe::detail::create_handle(&d.handle) != CUDNN_STATUS_SUCCESS) {
    d.handle = nullptr;
    throw std::runtime_error("cuDNN attention: cudnnCreate failed (is libcudnn installed?)");
  }
}

// libcudnn opened and the current device in `dev`; else false with the reason in `why`.
bool open_on_current_device(int& dev, std::string* why) {
  if (!open_cudnn(why)) return false;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = "no CUDA device";
    return false;
  }
  return true;
}

// Runs one attention call on device `dev` (current) through its cached plan; st.mu held.
void run_locked(State& st, int dev, const void* q, const void* k, const void* v, void* out,
                const AttentionShape& s, cudaStream_t stream) {
  Device& d = st.devices[dev];
  ensure_handle(d);
  if (fe::detail::set_stream(d.handle, stream) != CUDNN_STATUS_SUCCESS) {
    throw std::runtime_error("cuDNN attention: cudnnSetStream failed");
  }
  const Key key = key_of(dev, s);
  auto it = st.plans.find(key);
  if (it == st.plans.end()) {
    it = st.plans.emplace(key, build(d, s)).first;
  }
  std::unordered_map<std::int64_t, void*> pack{{kQ, const_cast<void*>(q)},
                                               {kK, const_cast<void*>(k)},
                                               {kV, const_cast<void*>(v)},
                                               {kO, out}};
  check(it->second.graph->execute(d.handle, pack, it->second.workspace), "execute");
}

// One small call (GQA 8:1, 7 queries after a 5-token prefix, head dim 128) on the current
// device, so that `auto` falls back to the cuBLAS attention when cuDNN opens but cannot run
// this graph (an unsupported engine, a missing sub-library) instead of failing a whole run.
std::string probe(State& st, int dev) {
  AttentionShape sh;
  sh.requests = 1;
  sh.q_heads = 8;
  sh.kv_heads = 1;
  sh.head_dim = 128;
  sh.q_tokens = 7;
  sh.prefix = 5;
  sh.kv_capacity = 16;
  const std::size_t qb = std::size_t(sh.q_input_elements()) * 2;
  const std::size_t kvb = std::size_t(sh.kv_elements()) * 2;
  const std::size_t ob = std::size_t(sh.q_elements()) * 2;
  char* mem = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&mem), qb + 2 * kvb + ob) != cudaSuccess) {
    cudaGetLastError();
    return "cannot allocate the probe's buffers";
  }
  std::string error;
  try {
    cudaMemset(mem, 0, qb + 2 * kvb + ob);
    run_locked(st, dev, mem, mem + qb, mem + qb + kvb, mem + qb + 2 * kvb, sh, nullptr);
    if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
      error = std::string("probe call: ") + cudaGetErrorString(e);
    }
  } catch (const std::exception& e) {
    error = std::string("probe call: ") + e.what();
  }
  cudaFree(mem);
  return error;
}

}  // namespace

bool fused_attention_available(std::string* why) {
  int dev = 0;
  if (!open_on_current_device(dev, why)) return false;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  Device& d = st.devices[dev];
  if (!d.probed) {
    d.probe_error = probe(st, dev);
    d.probed = true;
  }
  if (why) *why = d.probe_error;
  return d.probe_error.empty();
}

bool fused_attention_plans(const std::vector<AttentionShape>& shapes, std::string* why) {
  int dev = 0;
  if (!open_on_current_device(dev, why)) return false;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  Device& d = st.devices[dev];
  try {
    ensure_handle(d);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return false;
  }
  std::vector<Key> built;  // by this call: freed again when a later shape is refused
  for (const AttentionShape& s : shapes) {
    const Key key = key_of(dev, s);
    if (st.plans.count(key)) continue;
    try {
      st.plans.emplace(key, build(d, s));
      built.push_back(key);
    } catch (const std::exception& e) {
      cudaGetLastError();  // a failed workspace allocation must not fail a later, cuBLAS, kernel
      for (const Key& k : built) {
        if (st.plans[k].workspace) cudaFree(st.plans[k].workspace);
        st.plans.erase(k);
      }
      if (why) {
        *why = "no plan for " + std::to_string(s.requests) + " x " + std::to_string(s.q_tokens) +
               " queries after a " + std::to_string(s.prefix) + "-token prefix, " +
               std::to_string(s.q_heads) + "/" + std::to_string(s.kv_heads) + " heads of " +
               std::to_string(s.head_dim) +
               (s.window > 0 && s.window < s.prefix + s.q_tokens
                    ? ", a sliding window of " + std::to_string(s.window)
                    : std::string()) +
               (s.softcap > 0 ? ", a soft cap of " + std::to_string(s.softcap) : std::string()) +
               " (" + e.what() + ")";
      }
      return false;
    }
  }
  return true;
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
  run_locked(st, ctx.device(), q, k, v, out, s, static_cast<cudaStream_t>(stream));
}

}  // namespace tpo::validate::cuda
