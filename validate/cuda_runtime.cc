// The CUDA runtime: the schedule enqueued op by op on each GPU's compute and comm streams,
// with an event per op for cross-stream dependencies and timing. Nothing about strategies
// lives here: ops are interpreted from their code, layer/module and token block, exactly as
// on the CPU. Built only with CUDA; never run on a GPU before the first device check.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <thread>

#include "sim/error.h"
#include "validate/interpreter.h"
#include "validate/kernels/cuda_kernels.h"
#include "validate/kernels/model_data.h"
#include "validate/kernels/process_group.h"
#include "validate/runtime.h"

namespace tpo::validate {

bool cuda_runtime_built() {
  return true;
}

namespace {

namespace cu = tpo::validate::cuda;
using sim::Op;
using sim::OpCode;
constexpr std::size_t kB = 2;  // bytes per bf16 value

cu::Buffer upload(const std::vector<float>& v) {
  cu::Buffer b(std::max<std::size_t>(1, v.size()) * kB);
  if (!v.empty()) cu::copy_from_host_float_to_bf16(v.data(), b.get(), v.size());
  return b;
}

// An empty vector: no buffer (its get() is null).
cu::Buffer upload_or_none(const std::vector<float>& v) {
  return v.empty() ? cu::Buffer() : upload(v);
}

struct DeviceLayer {
  cu::Buffer attn_norm, wqkv, wo, mlp_norm, wgu, wd, k0, v0;
  cu::Buffer q_norm, k_norm;  // per-head norm weights (Qwen3, Gemma-3); 1 byte where none
  cu::Buffer post_attn_norm, post_mlp_norm;  // Gemma's post-norms; 1 byte where none
  cu::Buffer bqkv, bo, bgu, bd;              // biases; none (null) where this rank has none
};

// One rank on one GPU: weights, activations, KV caches, streams.
struct DeviceRank {
  std::unique_ptr<cu::Context> ctx;
  std::vector<DeviceLayer> layers;
  cu::Buffer x0, x, normed, qkv, attn, gu, act, scratch;
  cu::Buffer rope_table;  // bf16 [cap][rotary_dim], as vLLM keeps its cos_sin_cache
  std::vector<cu::Buffer> out, k, v;
  // --embed-head: each row's token id (int32), this rank's embedding slice and LM-head columns,
  // the final norm's weight, and the logits [slice][batch][vocab].
  cu::Buffer ids, embed, lm_head, final_norm, logits;
};

char* at(const cu::Buffer& b, std::int64_t elements) {
  return static_cast<char*>(b.get()) + static_cast<std::size_t>(elements) * kB;
}

// The CUDA kernels over one rank's device buffers (bf16), enqueued on one stream.
class CudaKernels final : public RankKernels {
 public:
  CudaKernels(const ModelData& m, DeviceRank& r, void* stream, bool fused, std::int64_t rank)
      : m_(m), r_(r), st_(stream), fused_(fused), rank_(rank) {}

  void rmsnorm(std::int64_t layer, bool mlp, std::int64_t row, std::int64_t len) override {
    const DeviceLayer& lw = r_.layers[std::size_t(layer)];
    const std::int64_t H = m_.d.hidden;
    cu::rmsnorm_bf16(at(r_.x, row * H), (mlp ? lw.mlp_norm : lw.attn_norm).get(),
                     at(r_.normed, row * H), len, H, m_.eps, st_);
  }

  void gemm(Weight w, std::int64_t layer, std::int64_t module, std::int64_t row, std::int64_t len,
            bool accumulate, bool bias) override {
    const auto& d = m_.d;
    const DeviceLayer& lw = r_.layers[std::size_t(layer)];
    const std::int64_t H = d.hidden, qd = d.q_heads * d.head_dim;
    const cu::Buffer& out = r_.out[std::size_t(std::max<std::int64_t>(module, 0))];
    // The epilogue's bias, where this rank holds one (a row-parallel GEMM's: rank 0).
    auto b = [&](const cu::Buffer& v) -> const void* { return bias ? v.get() : nullptr; };
    switch (w) {
      case Weight::Qkv:
        cu::gemm_bf16(*r_.ctx, at(r_.normed, row * H), lw.wqkv.get(), at(r_.qkv, row * d.qkv_n()),
                      len, d.qkv_n(), H, false, st_, b(lw.bqkv));
        break;
      case Weight::O:
        cu::gemm_bf16(*r_.ctx, at(r_.attn, row * qd), lw.wo.get(), at(out, row * H), len, H, qd,
                      accumulate, st_, b(lw.bo));
        break;
      case Weight::GateUp:
        cu::gemm_bf16(*r_.ctx, at(r_.normed, row * H), lw.wgu.get(), at(r_.gu, row * 2 * d.ffn),
                      len, 2 * d.ffn, H, false, st_, b(lw.bgu));
        break;
      case Weight::Down:
        cu::gemm_bf16(*r_.ctx, at(r_.act, row * d.ffn), lw.wd.get(), at(out, row * H), len, H,
                      d.ffn, accumulate, st_, b(lw.bd));
        break;
    }
  }

  void qk_norm(std::int64_t layer, std::int64_t row, std::int64_t rows) override {
    const auto& d = m_.d;
    const DeviceLayer& lw = r_.layers[std::size_t(layer)];
    char* q = at(r_.qkv, row * d.qkv_n());
    cu::head_rmsnorm_bf16(q, d.qkv_n(), d.q_heads, d.head_dim, lw.q_norm.get(), rows, m_.eps, st_);
    cu::head_rmsnorm_bf16(q + std::size_t(d.q_heads * d.head_dim) * kB, d.qkv_n(), d.kv_heads,
                          d.head_dim, lw.k_norm.get(), rows, m_.eps, st_);
  }

  void rope(std::int64_t row, std::int64_t len, std::int64_t pos, std::int64_t requests) override {
    const auto& d = m_.d;
    cu::rope_bf16(at(r_.qkv, row * d.qkv_n()), d.qkv_n(), d.q_heads + d.kv_heads, d.head_dim,
                  m_.rotary_dim, len, pos, r_.rope_table.get(), st_, requests);
  }

  void store_kv(std::int64_t layer, std::int64_t row, std::int64_t len, std::int64_t request,
                std::int64_t pos, std::int64_t requests) override {
    const auto& d = m_.d;
    const std::int64_t qd = d.q_heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
    const std::int64_t dst = (request * m_.cap + pos) * kvd;
    // One kernel for K and V (two strided cudaMemcpy2DAsync calls until 2026-12-02 cost the
    // H200 runs 6-12 us per qkv, results/h200/inschedule-gemms-2026-12-02.txt).
    cu::store_kv_bf16(at(r_.qkv, row * d.qkv_n()), d.qkv_n(), qd, kvd, len,
                      at(r_.k[std::size_t(layer)], dst), at(r_.v[std::size_t(layer)], dst), st_,
                      requests, m_.cap * kvd);
  }

  void attention(std::int64_t layer, std::int64_t request, std::int64_t requests, std::int64_t row,
                 std::int64_t len, std::int64_t pos) override {
    const auto& d = m_.d;
    const std::int64_t qd = d.q_heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
    // Q read in place in the fused qkv rows (its rows qkv_n apart), as serving engines do:
    // one call for every request. (Until 2026-12-02 a strided cudaMemcpy2DAsync gathered Q
    // first, which the profiler never timed: the suspect of the H200 runs' attention running
    // 1.05-1.22x its profile, results/h200/inschedule-attention-2026-12-02.txt.)
    AttentionShape a = chunk_attention(m_, layer, len, pos);
    a.requests = requests;
    a.q_row_stride = d.qkv_n();
    const auto L = std::size_t(layer);
    const void* q = at(r_.qkv, row * d.qkv_n());
    if (fused_) {
      cu::attention_fused_bf16(*r_.ctx, q, at(r_.k[L], request * m_.cap * kvd),
                               at(r_.v[L], request * m_.cap * kvd), at(r_.attn, row * qd), a, st_);
      return;
    }
    cu::attention_bf16(*r_.ctx, q, at(r_.k[L], request * m_.cap * kvd),
                       at(r_.v[L], request * m_.cap * kvd), at(r_.attn, row * qd), r_.scratch.get(),
                       a, st_);
  }

  void gated_act(std::int64_t row, std::int64_t len) override {
    const std::int64_t f = m_.d.ffn;
    cu::silu_mul_bf16(at(r_.gu, row * 2 * f), at(r_.act, row * f), len, f, st_, m_.gelu);
  }

  void residual_add(std::int64_t module, std::int64_t row, std::int64_t len, std::int64_t layer,
                    int post_norm, std::int64_t norm_layer, int norm_after) override {
    const std::int64_t H = m_.d.hidden;
    char* o = at(r_.out[std::size_t(module)], row * H);
    if (post_norm > 0) {  // in place: each thread rewrites the values it read
      const DeviceLayer& lw = r_.layers[std::size_t(layer)];
      cu::rmsnorm_bf16(o, (post_norm == 1 ? lw.post_attn_norm : lw.post_mlp_norm).get(), o, len, H,
                       m_.eps, st_);
    }
    if (norm_after > 0) {
      const void* w = norm_after == 3
                          ? r_.final_norm.get()
                          : (norm_after == 2 ? r_.layers[std::size_t(norm_layer)].mlp_norm
                                             : r_.layers[std::size_t(norm_layer)].attn_norm)
                                .get();
      cu::add_rmsnorm_bf16(at(r_.x, row * H), o, w, at(r_.normed, row * H), len, H, m_.eps, st_);
    } else {
      cu::add_bf16(at(r_.x, row * H), o, len * H, st_);
    }
  }

  std::int64_t allreduce(std::int64_t, std::int64_t, std::int64_t) override {
    // All ranks at once (one NCCL group call, or the emulating copy): CudaRun::collective.
    throw std::logic_error("cuda runtime: an all-reduce reached a rank's kernels");
  }

  void embed(std::int64_t row, std::int64_t len) override {
    const std::int64_t H = m_.d.hidden;
    cu::embed_bf16(static_cast<const std::int32_t*>(r_.ids.get()) + row, r_.embed.get(),
                   vocab_first(m_, rank_), m_.vocab, at(r_.x, row * H), len, H, st_);
  }

  void final_norm(const HeadRows& h) override {
    const std::int64_t H = m_.d.hidden;
    cu::rmsnorm_bf16(at(r_.x, h.row * H), r_.final_norm.get(), at(r_.normed, h.row * H), h.requests,
                     H, m_.eps, st_, h.stride * H);
  }

  void lm_head(const HeadRows& h) override {
    const std::int64_t H = m_.d.hidden, V = m_.vocab;
    const std::int64_t slice = vocab_slice(m_, rank_);
    cu::gemm_bf16(*r_.ctx, at(r_.normed, h.row * H), r_.lm_head.get(),
                  at(r_.logits, (slice * m_.batch + h.request) * V), h.requests, V, H, false, st_,
                  nullptr, h.stride * H);
  }

  std::int64_t gather_logits() override {
    throw std::logic_error("cuda runtime: a logits gather reached a rank's kernels");
  }

 private:
  const ModelData& m_;
  DeviceRank& r_;
  void* st_;
  bool fused_;
  std::int64_t rank_;  // the TP rank whose shard this is
};

class CudaRun {
 public:
  // The emulated all-reduce's copy kernel as measured (0 where communication is not emulated).
  double copy_gbps() const { return emulated_ ? bytes_per_s_ / 1e9 : 0; }
  double copy_fixed_us() const { return emulated_ ? fixed_s_ * 1e6 : 0; }

  // The GEMM plans (shape and cuBLASLt algorithm) rank 0's context made.
  std::vector<cu::GemmPlanInfo> gemm_plans() {
    if (ranks_.empty()) return {};
    cu::set_device(ranks_[0].ctx->device());
    return cu::gemm_plans(*ranks_[0].ctx);
  }
  // mpi: this process runs rank mpi::rank() alone, on its node's GPU local_rank % GPUs.
  CudaRun(const ModelData& m, const sim::Schedule& s, const std::string& comm,
          const std::vector<std::int64_t>& target_ns, int ctas, bool mpi, bool fused,
          sim::ExecMode exec)
      : m_(m),
        s_(s),
        layout_(row_layout(m, s)),
        emulated_(comm == "emulated"),
        target_ns_(target_ns),
        ctas_(ctas),
        fused_(fused),
        exec_(exec) {
    // Ops are enqueued in order and wait on the events of those before them: an edge to a
    // later op would wait on an event not yet recorded and vanish (the CPU runtime honours it).
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      for (auto dep : s.ops[i].deps) {
        if (dep < 0 || std::size_t(dep) >= i) {
          throw RunFailure("the CUDA runtime runs ops in order, and op " + std::to_string(i) +
                           " depends on op " + std::to_string(dep) +
                           ", not before it (a schedule this runtime cannot run)");
        }
      }
    }
    const std::int64_t ranks = emulated_ || mpi ? 1 : m.tp;
    first_ = mpi ? mpi::rank() : 0;
    mpi_ = mpi;
    const int gpus = cu::device_count();
    if (mpi && mpi::local_size() > gpus) {
      throw RunFailure("--mpi: " + std::to_string(mpi::local_size()) +
                       " processes on this node but " + std::to_string(gpus) +
                       " GPUs; one process per GPU");
    }
    if (!emulated_ && !mpi && gpus < ranks) {
      throw RunFailure("--comm nccl at TP " + std::to_string(m.tp) + " needs " +
                       std::to_string(m.tp) +
                       " GPUs in this machine; use --comm emulated, "
                       "or one process per GPU with --mpi under mpirun");
    }
    const int mpi_device = mpi ? mpi::local_rank() % std::max(gpus, 1) : 0;
    std::size_t modules = 0;
    for (const auto& op : s.ops)
      modules = std::max<std::size_t>(modules, std::size_t(op.module + 1));
    const auto& d = m.d;
    const std::int64_t T = m.tokens, H = d.hidden, qd = d.q_heads * d.head_dim,
                       kvd = d.kv_heads * d.head_dim;
    // The cuBLAS attention's scores and probabilities (q x keys per head): only where it runs
    // (cuDNN's fused kernel needs none, and at 16k tokens and 64 heads this is ~100 GB).
    std::size_t scratch = 1;
    for (const auto& op : s.ops) {
      if (fused_ || op.kind != sim::OpKind::Attention) continue;
      cu::AttentionShape a;
      a.requests = op.req_end - op.req_begin;  // a chunk of every request: one call
      a.q_tokens = op.seq_end - op.seq_begin;
      a.prefix = op.seq_begin;
      a.q_heads = d.q_heads;
      scratch = std::max(scratch, cu::attention_scratch_bytes(a));
    }
    for (std::int64_t r = 0; r < ranks; ++r) {
      DeviceRank dr;
      dr.ctx = std::make_unique<cu::Context>(mpi ? mpi_device : int(r));
      const auto rank = std::size_t(first_ + r);  // the TP rank whose shard this is
      for (std::int64_t l = 0; l < m.layers; ++l) {
        const LayerWeights& lw = m.w[rank][std::size_t(l)];
        dr.layers.push_back({upload(lw.attn_norm), upload(lw.wqkv), upload(lw.wo),
                             upload(lw.mlp_norm), upload(lw.wgu), upload(lw.wd),
                             upload(m.k0[rank][std::size_t(l)]), upload(m.v0[rank][std::size_t(l)]),
                             upload(lw.q_norm), upload(lw.k_norm), upload(lw.post_attn_norm),
                             upload(lw.post_mlp_norm), upload_or_none(lw.bqkv),
                             upload_or_none(lw.bo), upload_or_none(lw.bgu), upload_or_none(lw.bd)});
        dr.k.emplace_back(std::size_t(m.batch * m.cap * kvd) * kB);
        dr.v.emplace_back(std::size_t(m.batch * m.cap * kvd) * kB);
      }
      dr.x0 = upload(to_layout(layout_, m.x0, H));
      dr.rope_table = upload(m.rope_table);
      dr.x = cu::Buffer(std::size_t(T * H) * kB);
      dr.normed = cu::Buffer(std::size_t(T * H) * kB);
      dr.qkv = cu::Buffer(std::size_t(T * d.qkv_n()) * kB);
      dr.attn = cu::Buffer(std::size_t(T * qd) * kB);
      dr.gu = cu::Buffer(std::size_t(T * 2 * d.ffn) * kB);
      dr.act = cu::Buffer(std::size_t(T * d.ffn) * kB);
      dr.scratch = cu::Buffer(scratch);
      for (std::size_t i = 0; i < modules; ++i) dr.out.emplace_back(std::size_t(T * H) * kB);
      if (m.head) {
        const std::vector<std::int32_t> ids = ids_in_layout(m, layout_);
        dr.ids = cu::Buffer(ids.size() * sizeof(std::int32_t));
        cu::copy_from_host(ids.data(), dr.ids.get(), ids.size() * sizeof(std::int32_t));
        dr.embed = upload(m.embed[rank]);
        dr.lm_head = upload(m.lm_head[rank]);
        dr.final_norm = upload(m.final_norm);
        // Zeros: a slice no rank here computes (emulated communication) stays zero.
        dr.logits = upload(std::vector<float>(std::size_t(m.vocab_slices * m.batch * m.vocab)));
      }
      ranks_.push_back(std::move(dr));
    }
    if (emulated_) {
      // Copy bandwidth of the copy kernel on `ctas` CTAs, to size each emulated all-reduce.
      const std::size_t probe = 256u << 20;
      comm_src_ = cu::Buffer(probe);
      comm_dst_ = cu::Buffer(probe);
      void* st = ranks_[0].ctx->comm_stream();
      // Warm up (clocks ramp), then the median of timed copies of the probe and of 16 bytes:
      // a copy takes fixed_s_ + bytes / bytes_per_s_ (the fixed part, a kernel's start and
      // drain, is a few µs: most of a decode all-reduce's 10-20 µs target).
      for (int i = 0; i < 3; ++i)
        cu::copy_on_ctas(comm_src_.get(), comm_dst_.get(), probe, ctas_, st);
      auto median_s = [&](std::size_t bytes, int n) {
        std::vector<double> secs;
        for (int i = 0; i < n; ++i) {
          cu::Event a, b;
          // A spin holds the stream while the host queues the copy: in a schedule the copy
          // is queued ahead too, so its fixed time must not include the host's launch.
          cu::spin(st, 50);
          a.record(st);
          cu::copy_on_ctas(comm_src_.get(), comm_dst_.get(), bytes, ctas_, st);
          b.record(st);
          b.synchronize();
          secs.push_back(cu::Event::seconds_between(a, b));
        }
        std::sort(secs.begin(), secs.end());
        return secs[secs.size() / 2];
      };
      const double big_s = median_s(probe, 5);
      fixed_s_ = std::clamp(median_s(16, 21), 0.0, 0.5 * big_s);
      bytes_per_s_ = double(probe) / (big_s - fixed_s_);
      std::size_t most = 16;
      for (auto t : target_ns) most = std::max(most, copy_bytes(t));
      if (most > probe) {
        comm_src_ = cu::Buffer(most);
        comm_dst_ = cu::Buffer(most);
      }
    } else if (mpi) {
      // Rank 0 makes the NCCL unique id; MPI carries it to every process.
      std::vector<char> id = mpi::rank() == 0 ? cu::nccl_unique_id() : std::vector<char>();
      std::int64_t bytes = std::int64_t(id.size());
      mpi::broadcast(&bytes, sizeof bytes, 0);
      id.resize(std::size_t(bytes));
      mpi::broadcast(id.data(), id.size(), 0);
      nccl_ = std::make_unique<cu::NcclGroup>(mpi::rank(), mpi::size(), id, mpi_device, ctas_);
    } else {
      nccl_ = std::make_unique<cu::NcclGroup>(int(ranks), ctas_);
    }
  }

  // One run. Queued: a run whose spin ended before the host had queued the schedule (the GPU
  // then waited for launches, which would be timed) is run again, with the spin sized from its
  // queueing time, up to twice; a third such run is kept and said on stderr.
  RunResult::Timeline run() {
    for (int attempt = 0;; ++attempt) {
      bool outran = false;
      RunResult::Timeline tl = run_attempt(&outran);
      if (exec_ == sim::ExecMode::Graph) tl.untimed_total_ns = run_untimed();
      if (!outran) return tl;
      if (attempt == 2) {
        std::fprintf(stderr,
                     "tpo: note: the host took %.0f us to queue the schedule, longer than the "
                     "GPU was held (at most 20 ms): this run's times include waits for "
                     "launches\n",
                     host_us_);
        return tl;
      }
    }
  }

  // How long the GPUs may make no progress on an NCCL run before it is aborted.
  void set_timeout(double seconds) { timeout_s_ = seconds; }

 private:
  // Fresh state: x from x0, the KV caches from the prefix.
  void reset() {
    const std::int64_t T = m_.tokens, H = m_.d.hidden, kvd = m_.d.kv_heads * m_.d.head_dim;
    for (auto& r : ranks_) {
      cu::set_device(r.ctx->device());
      void* st = r.ctx->compute_stream();
      cu::copy_device(r.x.get(), r.x0.get(), std::size_t(T * H) * kB, st);
      for (std::size_t l = 0; l < r.layers.size(); ++l) {
        const std::size_t bytes = std::size_t(m_.batch * m_.cap * kvd) * kB;
        cu::copy_device(r.k[l].get(), r.layers[l].k0.get(), bytes, st);
        cu::copy_device(r.v[l].get(), r.layers[l].v0.get(), bytes, st);
      }
      r.ctx->synchronize();
    }
  }

  // The graph without its per-op timing events, from fresh state, timed on GPU 0 from before
  // its launch to its end (the timed graph's per-op event nodes may cost time of
  // their own: this is the check). Its output is not read.
  std::int64_t run_untimed() {
    reset();
    if (mpi_) mpi::barrier();
    cu::set_device(ranks_[0].ctx->device());
    cu::Event t0;
    t0.record(ranks_[0].ctx->compute_stream());
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      cu::set_device(ranks_[r].ctx->device());
      untimed_graphs_[r]->launch(ranks_[r].ctx->compute_stream());
    }
    // Rank 0's end, as the timed runs' totals are rank 0's (events of two GPUs do not compare).
    cu::set_device(ranks_[0].ctx->device());
    cu::Event end;
    end.record(ranks_[0].ctx->compute_stream());  // the comm stream joined it in the graph
    wait_done(false);
    return std::int64_t(cu::Event::seconds_between(t0, end) * 1e9);
  }

  RunResult::Timeline run_attempt(bool* outran) {
    const std::size_t n = s_.ops.size();
    const std::int64_t T = m_.tokens, H = m_.d.hidden;
    reset();
    make_events(n);
    if (exec_ == sim::ExecMode::Graph && graphs_.empty()) {
      // Once, eagerly first (library plans and kernel modules load outside the capture), then
      // the capture, from fresh state again.
      issue(false);
      wait_done();
      reset();
      capture(true);
      capture(false);
    }
    std::vector<std::unique_ptr<cu::Event>> go;  // queued: reached when each GPU's spin ends
    if (exec_ == sim::ExecMode::Queued) {
      // Every GPU waits on a spin while the host queues the whole graph, so the timeline is
      // the GPU's execution of the schedule, not the host's launch rate. The spin lasts 1.5x
      // the previous run's queueing time (a generous guess on the first run), capped: a
      // longer spin gains nothing once the launch queue is full (the host then blocks until
      // the GPU drains it, and that wait would grow the next spin).
      for (std::size_t r = 0; r < ranks_.size(); ++r) {
        cu::set_device(ranks_[r].ctx->device());
        cu::spin(ranks_[r].ctx->compute_stream(),
                 std::min(20e3, host_us_ > 0 ? 1.5 * host_us_ + 100 : 60.0 * double(n) + 500));
        go.push_back(std::make_unique<cu::Event>());
        go.back()->record(ranks_[r].ctx->compute_stream());
        go.back()->make_wait(ranks_[r].ctx->comm_stream());
      }
    }
    if (mpi_) mpi::barrier();  // every process starts together
    const auto host_start = std::chrono::steady_clock::now();
    cu::set_device(ranks_[0].ctx->device());
    cu::Event t0;
    t0.record(ranks_[0].ctx->compute_stream());
    t0.make_wait(ranks_[0].ctx->comm_stream());
    if (exec_ == sim::ExecMode::Graph) {
      // One launch per GPU; t0 precedes it on rank 0's stream, so the graph launch is timed.
      for (std::size_t r = 0; r < ranks_.size(); ++r) {
        cu::set_device(ranks_[r].ctx->device());
        graphs_[r]->launch(ranks_[r].ctx->compute_stream());
      }
    } else {
      // Queued: behind the spin. Eager: t0 is recorded as the host starts launching, so the
      // GPU waiting for the host's launches is timed.
      issue(false);
    }
    for (std::size_t r = 0; r < go.size(); ++r) {
      cu::set_device(ranks_[r].ctx->device());
      *outran = *outran || go[r]->done();
    }
    host_us_ =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - host_start)
            .count();
    // Under --mpi every process runs again or none does (each run is a sequence of
    // collectives that all must join).
    if (mpi_ && exec_ == sim::ExecMode::Queued) *outran = mpi::max(*outran ? 1 : 0) != 0;
    wait_done();
    RunResult::Timeline tl;
    for (std::size_t i = 0; i < n; ++i) {
      tl.start_ns.push_back(std::int64_t(cu::Event::seconds_between(t0, *start_[0][i]) * 1e9));
      tl.end_ns.push_back(std::int64_t(cu::Event::seconds_between(t0, *end_[0][i]) * 1e9));
      tl.total_ns = std::max(tl.total_ns, tl.end_ns.back());
    }
    cu::set_device(ranks_[0].ctx->device());
    tl.output.resize(std::size_t(T * H));
    cu::copy_to_host_bf16_as_float(ranks_[0].x.get(), tl.output.data(), tl.output.size());
    std::vector<float> logits;
    if (m_.head) {
      logits.resize(std::size_t(m_.vocab_slices * m_.batch * m_.vocab));
      cu::copy_to_host_bf16_as_float(ranks_[0].logits.get(), logits.data(), logits.size());
    }
    tl.output = run_output(m_, from_layout(layout_, tl.output, H), logits);
    return tl;
  }

  // Waits until every GPU finished what was enqueued. With NCCL the wait is bounded: an
  // asynchronous NCCL error, or no op finishing for the timeout, aborts the communicators and
  // names the rank and the first op that did not finish.
  // `per_op` false (the untimed graph, which records no per-op event): progress is not
  // tracked, so the timeout counts from the start of the wait.
  void wait_done(bool per_op = true) {
    if (!nccl_) {
      for (auto& r : ranks_) r.ctx->synchronize();
      return;
    }
    auto finished = [&] {
      std::size_t n = 0;
      for (auto& ev : end_) {
        for (auto& e : ev) n += per_op && e->done();
      }
      return n;
    };
    std::size_t progress = finished();
    auto last = std::chrono::steady_clock::now();
    for (;;) {
      bool idle = true;
      for (auto& r : ranks_) idle = idle && r.ctx->idle();
      if (idle) return;
      const std::string err = nccl_->async_error();
      const std::size_t now_done = finished();
      if (now_done != progress) {
        progress = now_done;
        last = std::chrono::steady_clock::now();
      }
      const double stalled =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - last).count();
      if (!err.empty() || stalled > timeout_s_) {
        // Aborted communicators leave their kernels queued: freeing memory or destroying
        // streams after this can hang, so the failure is reported and the process ends here
        // (under mpirun the other ranks are ended by the launcher).
        const std::string what =
            "NCCL: " +
            (err.empty() ? "no progress for " + std::to_string(int(stalled)) + " s" : err) +
            " at " +
            (per_op ? first_unfinished()
                    : std::string("the graph launched without its timing events")) +
            "; the communicators were aborted (--nccl-timeout sets the limit)";
        nccl_->abort();
        std::fprintf(stderr, "tpo: error: %s\n", what.c_str());
        std::fflush(nullptr);
        std::_Exit(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // "op 57 (all_reduce, layer 3, chunk 1) on rank 2": the first op some GPU has not finished.
  std::string first_unfinished() const {
    for (std::size_t i = 0; i < s_.ops.size(); ++i) {
      for (std::size_t r = 0; r < end_.size(); ++r) {
        if (i < end_[r].size() && !end_[r][i]->done()) {
          const Op& op = s_.ops[i];
          return "op " + std::to_string(i) + " (" + sim::op_code_name(op.code) + ", layer " +
                 std::to_string(op.layer) + ", chunk " + std::to_string(op.chunk) + ") on rank " +
                 std::to_string(first_ + std::int64_t(r));
        }
      }
    }
    return "the end of the schedule";
  }

  // Per rank and op: a start and an end event (timing); in a graph also a dependency event
  // (an event recorded as a timing node does not order other streams of the capture).
  void make_events(std::size_t n) {
    if (!start_.empty()) return;
    start_.resize(ranks_.size());
    end_.resize(ranks_.size());
    dep_.resize(ranks_.size());
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      cu::set_device(ranks_[r].ctx->device());
      for (std::size_t i = 0; i < n; ++i) {
        start_[r].push_back(std::make_unique<cu::Event>());
        end_[r].push_back(std::make_unique<cu::Event>());
        if (exec_ == sim::ExecMode::Graph) dep_[r].push_back(std::make_unique<cu::Event>());
      }
    }
  }

  // Enqueues the schedule op by op on every rank's streams. `graph`: inside a capture (the
  // timing events become graph nodes; dependencies use their own events).
  void issue(bool graph, bool timed = true) {
    for (std::size_t i = 0; i < s_.ops.size(); ++i) {
      const Op& op = s_.ops[i];
      auto stream_of = [&](std::size_t r) {
        return op.stream == sim::StreamKind::Compute ? ranks_[r].ctx->compute_stream()
                                                     : ranks_[r].ctx->comm_stream();
      };
      auto& deps = graph ? dep_ : end_;
      for (std::size_t r = 0; r < ranks_.size(); ++r) {
        cu::set_device(ranks_[r].ctx->device());
        for (auto dep : op.deps) {
          if (s_.ops[std::size_t(dep)].stream != op.stream)
            deps[r][std::size_t(dep)]->make_wait(stream_of(r));
        }
        if (timed) start_[r][i]->record(stream_of(r), graph);
        if (op.kind != sim::OpKind::AllReduce) execute(r, op, stream_of(r));
      }
      if (op.kind == sim::OpKind::AllReduce) {  // an all-reduce or the logits gather
        collective(op, i);
        // --allreduce-fusion add-norm: the add (and norms) after the sum, on the comm stream.
        for (std::size_t r = 0; op.residual_of >= 0 && r < ranks_.size(); ++r) {
          cu::set_device(ranks_[r].ctx->device());
          CudaKernels k(m_, ranks_[r], stream_of(r), fused_, first_ + std::int64_t(r));
          interpret_add(m_, layout_, op, k);
        }
      }
      for (std::size_t r = 0; r < ranks_.size(); ++r) {
        cu::set_device(ranks_[r].ctx->device());
        if (timed) end_[r][i]->record(stream_of(r), graph);
        if (graph) dep_[r][i]->record(stream_of(r));
      }
    }
  }

  // Captures the schedule once per GPU: the comm stream forks from the compute stream and
  // joins it again before the capture ends. The warm-up run before it was eager (plans and
  // kernels loaded outside the capture).
  // `timed` false: without the per-op timing events (the graph a serving engine would launch),
  // into untimed_graphs_.
  void capture(bool timed) {
    auto& graphs = timed ? graphs_ : untimed_graphs_;
    std::vector<std::unique_ptr<cu::Event>> fork, join;
    for (auto& r : ranks_) {
      cu::set_device(r.ctx->device());
      graphs.push_back(std::make_unique<cu::Graph>());
      graphs.back()->begin_capture(r.ctx->compute_stream());
      fork.push_back(std::make_unique<cu::Event>());
      fork.back()->record(r.ctx->compute_stream());
      fork.back()->make_wait(r.ctx->comm_stream());
    }
    try {
      issue(true, timed);
    } catch (...) {
      // Streams left capturing would fail every later call and hide this error.
      for (auto& r : ranks_) {
        cu::set_device(r.ctx->device());
        cu::Graph::abandon_capture(r.ctx->compute_stream(), r.ctx->comm_stream());
      }
      graphs.clear();
      throw;
    }
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      cu::set_device(ranks_[r].ctx->device());
      join.push_back(std::make_unique<cu::Event>());
      join.back()->record(ranks_[r].ctx->comm_stream());
      join.back()->make_wait(ranks_[r].ctx->compute_stream());
      graphs[r]->end_capture(ranks_[r].ctx->compute_stream());
    }
  }

  // The bytes a copy on ctas_ CTAs moves in `ns` (at least 16: a target shorter than the copy's
  // fixed time runs over it).
  std::size_t copy_bytes(std::int64_t ns) const {
    return std::max<std::size_t>(
        16, std::size_t(std::max(0.0, double(ns) * 1e-9 - fixed_s_) * bytes_per_s_));
  }

  // An all-reduce (of a module's output, or with module -1 of the embedding's rows in x), or
  // the logits gather.
  void collective(const Op& op, std::size_t i) {
    const std::int64_t H = m_.d.hidden;
    if (emulated_) {
      cu::set_device(ranks_[0].ctx->device());
      const std::size_t bytes = copy_bytes(i < target_ns_.size() ? target_ns_[i] : 0);
      cu::copy_on_ctas(comm_src_.get(), comm_dst_.get(), bytes, ctas_,
                       ranks_[0].ctx->comm_stream());
      return;
    }
    if (op.code == OpCode::LogitsGather) {
      std::vector<void*> bufs, streams;
      for (auto& r : ranks_) {
        bufs.push_back(r.logits.get());
        streams.push_back(r.ctx->comm_stream());
      }
      nccl_->allgather_bf16_on(bufs, std::size_t(m_.batch * m_.vocab), streams);
      return;
    }
    // The embedding's all-reduce: every row of x at once (as the interpreter runs it).
    const std::vector<RowBlock> blocks =
        op.module < 0 ? std::vector<RowBlock>{{0, m_.tokens, 0, m_.context, m_.batch}}
                      : row_blocks(layout_, m_.context, op);
    for (const RowBlock& b : blocks) {
      std::vector<void*> bufs, streams;
      for (auto& r : ranks_) {
        bufs.push_back(at(op.module < 0 ? r.x : r.out[std::size_t(op.module)], b.row * H));
        streams.push_back(r.ctx->comm_stream());
      }
      nccl_->allreduce_bf16_on(bufs, std::size_t(b.len * H), streams);
    }
  }

  void execute(std::size_t rank, const Op& op, void* st) {
    CudaKernels k(m_, ranks_[rank], st, fused_, first_ + std::int64_t(rank));
    interpret(m_, layout_, op, k);
  }

  const ModelData& m_;
  const sim::Schedule& s_;
  RowLayout layout_;  // where each token's row lives (model_data.h)
  bool emulated_;
  std::vector<std::int64_t> target_ns_;
  int ctas_;
  double bytes_per_s_ = 1;
  double fixed_s_ = 0;      // a copy kernel's time beyond its bytes (emulated comm)
  double host_us_ = 0;      // host time the last run took to queue the graph
  double timeout_s_ = 300;  // NCCL: seconds without progress before aborting
  std::int64_t first_ = 0;  // TP rank of ranks_[0]
  bool mpi_ = false;
  bool fused_ = false;  // cuDNN's fused attention (else the cuBLAS one)
  sim::ExecMode exec_ = sim::ExecMode::Queued;
  std::vector<DeviceRank> ranks_;
  std::vector<std::vector<std::unique_ptr<cu::Event>>> start_, end_, dep_;  // [rank][op]
  cu::Buffer comm_src_, comm_dst_;
  std::unique_ptr<cu::NcclGroup> nccl_;
  // Per GPU (graph). Declared after nccl_ so destroyed before it: NCCL's communicator
  // destruction waits until every graph that captured it is gone (it would hang).
  std::vector<std::unique_ptr<cu::Graph>> graphs_, untimed_graphs_;
};

// The attention shapes a schedule calls, exactly as CudaRank::attention makes them: the
// interpreter's row blocks, nothing run.
class AttentionShapes final : public RankKernels {
 public:
  explicit AttentionShapes(const ModelData& m) : m_(m) {}
  std::vector<cu::AttentionShape> shapes;
  void rmsnorm(std::int64_t, bool, std::int64_t, std::int64_t) override {}
  void gemm(Weight, std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool, bool) override {}
  void qk_norm(std::int64_t, std::int64_t, std::int64_t) override {}
  void rope(std::int64_t, std::int64_t, std::int64_t, std::int64_t) override {}
  void store_kv(std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                std::int64_t) override {}
  void attention(std::int64_t layer, std::int64_t, std::int64_t requests, std::int64_t,
                 std::int64_t len, std::int64_t pos) override {
    cu::AttentionShape a = chunk_attention(m_, layer, len, pos);
    a.requests = requests;
    a.q_row_stride = m_.d.qkv_n();
    shapes.push_back(a);
  }
  void gated_act(std::int64_t, std::int64_t) override {}
  void residual_add(std::int64_t, std::int64_t, std::int64_t, std::int64_t, int, std::int64_t,
                    int) override {}
  std::int64_t allreduce(std::int64_t, std::int64_t, std::int64_t) override { return 0; }
  void embed(std::int64_t, std::int64_t) override {}
  void final_norm(const HeadRows&) override {}
  void lm_head(const HeadRows&) override {}
  std::int64_t gather_logits() override { return 0; }

 private:
  const ModelData& m_;
};

// --attention auto: cuDNN's plan for every attention shape of the schedule, built before the
// run on each GPU in `devices` (plans are per GPU); one it cannot build makes the whole run use
// the cuBLAS attention (said on stderr), so that a run never mixes kernels and never fails half
// way for a shape cuDNN refuses. Leaves devices.front() current.
// The GPU a run of this process uses first: under --mpi its local rank's, else GPU 0.
int first_device(bool mpi) {
  return mpi ? mpi::local_rank() % std::max(cu::device_count(), 1) : 0;
}

bool fused_plans_for(const ModelData& m, const sim::Schedule& s, const std::vector<int>& devices) {
  AttentionShapes collect(m);
  const RowLayout layout = row_layout(m, s);
  for (const Op& op : s.ops) {
    if (op.code == OpCode::Attention) interpret(m, layout, op, collect);
  }
  std::string why;
  bool ok = true;
  for (int d : devices) {
    cu::set_device(d);
    if (!cu::fused_attention_plans(collect.shapes, &why)) {
      ok = false;
      break;
    }
  }
  cu::set_device(devices.front());
  if (ok) return true;
  std::fprintf(stderr, "tpo: --attention auto: %s; using the cuBLAS attention for this run\n",
               why.c_str());
  return false;
}

}  // namespace

std::string cuda_device_name(bool mpi) {
  if (cu::device_count() == 0) return "";
  try {
    return cu::device_info(first_device(mpi)).value("name", std::string());
  } catch (const std::exception&) {
    return "";
  }
}

RunResult run_cuda(const sim::Workload& w, const sim::Schedule& s, const RunOptions& o,
                   const std::string& comm, const std::vector<std::int64_t>& allreduce_target_ns,
                   int comm_ctas) {
  std::string why;
  if (cu::device_count(&why) == 0) {
    throw RunFailure("no usable CUDA device on this machine (the CUDA runtime says: " + why +
                     "); validate on the CPU with --backend cpu");
  }
  if (o.mpi && comm == "emulated") {
    throw InputError("--mpi", "", "runs one rank per process over NCCL; not with --comm emulated");
  }
  // Under --mpi rank 0 also computes the reference, which needs every shard.
  const auto data = o.mpi ? shared_data(w, o.seed, 0, mpi::rank() != 0 ? mpi::rank() : -1)
                          : shared_data(w, o.seed, comm == "emulated" ? 1 : 0);
  const ModelData& m = *data;
  bool fused = false;
  std::string device;
  try {
    // cuDNN is probed on the current GPU: under --mpi this rank's, as CudaRun will pick it.
    // Otherwise on GPU 0, which every run uses (a previous run may have left another current).
    const int first = first_device(o.mpi);
    cu::set_device(first);
    device = cu::device_info(first).value("name", std::string());
    fused = cu::use_fused_attention(o.attention);
    // The GPUs this process runs: its own under --mpi, one with emulated communication, else
    // one per TP rank.
    std::vector<int> devices{first};
    for (int d = 1; !o.mpi && comm != "emulated" && d < w.tp && d < cu::device_count(); ++d) {
      devices.push_back(d);
    }
    if (fused && o.attention == "auto") fused = fused_plans_for(m, s, devices);
    // Under --mpi every process runs the same attention kernel: cuBLAS for all if one refused.
    if (o.mpi && o.attention == "auto") fused = mpi::max(fused ? 0 : 1) == 0;
  } catch (const std::invalid_argument&) {
    throw InputError("--attention", o.attention, "must be auto, cudnn or cublas");
  } catch (const std::runtime_error& e) {
    throw RunFailure(e.what());
  }
  CudaRun run(m, s, comm, allreduce_target_ns, comm_ctas, o.mpi, fused, o.exec);
  run.set_timeout(o.nccl_timeout_s);
  for (int i = 0; i < o.warmup; ++i) run.run();
  std::vector<RunResult::Timeline> runs;
  for (int i = 0; i < std::max(1, o.repeat); ++i) runs.push_back(run.run());
  RunResult r = median_of_runs(std::move(runs));
  r.attention_kernel = cu::attention_kernel_name(fused);
  r.device = device;
  for (auto& g : run.gemm_plans()) r.gemm_kernels.push_back({g.m, g.n, g.k, std::move(g.kernel)});
  r.copy_gbps = run.copy_gbps();
  r.copy_fixed_us = run.copy_fixed_us();
  r.copy_ctas = r.copy_gbps > 0 ? comm_ctas : 0;
  return r;
}

}  // namespace tpo::validate
