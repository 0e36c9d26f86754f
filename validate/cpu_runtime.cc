// CPU runtime and reference forward. Weights, inputs and the cached KV prefix come from one
// seed, so the runtime and the reference compute on identical data.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <random>
#include <thread>

#include "sim/error.h"
#include "validate/interpreter.h"
#include "validate/kernels/cpu_kernels.h"
#include "validate/kernels/model_data.h"
#include "validate/kernels/process_group.h"
#include "validate/runtime.h"

namespace tpo::validate {

namespace {

using sim::Op;
using sim::OpCode;

// One rank's activations.
struct RankState {
  std::vector<float> x, normed, qkv, attn, gu, act;
  std::vector<std::vector<float>> out;   // per module: its row-parallel partial output
  std::vector<std::vector<float>> k, v;  // per layer: KV cache [batch][cap][kv][d]
  std::vector<std::int32_t> ids;         // --embed-head: each row's token id
  std::vector<float> logits;             // --embed-head: [slice][batch][vocab]
};

RankState make_state(const ModelData& m, const RowLayout& l, std::int64_t rank,
                     std::size_t modules) {
  const auto& d = m.d;
  const auto T = static_cast<std::size_t>(m.tokens);
  RankState s;
  s.x = to_layout(l, m.x0, d.hidden);
  s.normed.assign(T * static_cast<std::size_t>(d.hidden), 0);
  s.qkv.assign(T * static_cast<std::size_t>(d.qkv_n()), 0);
  s.attn.assign(T * static_cast<std::size_t>(d.q_heads * d.head_dim), 0);
  s.gu.assign(T * static_cast<std::size_t>(2 * d.ffn), 0);
  s.act.assign(T * static_cast<std::size_t>(d.ffn), 0);
  s.out.assign(modules, std::vector<float>(T * static_cast<std::size_t>(d.hidden), 0));
  s.k = m.k0[static_cast<std::size_t>(rank)];
  s.v = m.v0[static_cast<std::size_t>(rank)];
  if (m.head) {
    s.ids = ids_in_layout(m, l);
    s.logits.assign(static_cast<std::size_t>(m.vocab_slices * m.batch * m.vocab), 0);
  }
  return s;
}

// The all-reduce among the ranks: threads of this process (shared memory), or one rank per
// process over MPI.
class Reducer {
 public:
  virtual ~Reducer() = default;
  // Sums buf over the ranks; returns when all ranks had arrived (steady_clock ns since its
  // epoch), or 0 where that is not known (MPI).
  virtual std::int64_t run(int rank, float* buf, std::int64_t n) = 0;
  // All-gather of `per_rank` floats at buf + rank * per_rank; returns as run() does.
  virtual std::int64_t gather(int rank, float* buf, std::int64_t per_rank) = 0;
  virtual void drop() = 0;  // a rank stopping early releases the others
};

class SharedReducer final : public Reducer {
 public:
  explicit SharedReducer(int ranks) : ar_(ranks) {}
  std::int64_t run(int rank, float* buf, std::int64_t n) override { return ar_.run(rank, buf, n); }
  std::int64_t gather(int rank, float* buf, std::int64_t per_rank) override {
    return ar_.gather(rank, buf, per_rank);
  }
  void drop() override { ar_.drop(); }

 private:
  cpu::SharedAllReduce ar_;
};

class MpiReducer final : public Reducer {
 public:
  std::int64_t run(int, float* buf, std::int64_t n) override {
    mpi::allreduce_sum(buf, n);
    return 0;
  }
  std::int64_t gather(int, float* buf, std::int64_t per_rank) override {
    mpi::allgather(buf, per_rank);
    return 0;
  }
  void drop() override {}  // the failure reaches the caller, which aborts every process
};

// The CPU kernels over one rank's host buffers (fp32).
class CpuKernels final : public RankKernels {
 public:
  CpuKernels(const ModelData& m, RankState& s, std::int64_t rank, Reducer& ar)
      : m_(m), s_(s), rank_(rank), ar_(ar) {}

  void rmsnorm(std::int64_t layer, bool mlp, std::int64_t row, std::int64_t len) override {
    const auto& lw = weights(layer);
    const std::int64_t H = m_.d.hidden;
    cpu::rmsnorm(s_.x.data() + row * H, (mlp ? lw.mlp_norm : lw.attn_norm).data(),
                 s_.normed.data() + row * H, len, H, m_.eps);
  }

  void gemm(Weight w, std::int64_t layer, std::int64_t module, std::int64_t row, std::int64_t len,
            bool accumulate, bool bias) override {
    const auto& d = m_.d;
    const auto& lw = weights(layer);
    const std::int64_t H = d.hidden, qd = d.q_heads * d.head_dim;
    float* out = s_.out[static_cast<std::size_t>(std::max<std::int64_t>(module, 0))].data();
    float* c = nullptr;
    std::int64_t n = 0;
    const std::vector<float>* b = nullptr;
    switch (w) {
      case Weight::Qkv:
        c = s_.qkv.data() + row * d.qkv_n();
        n = d.qkv_n();
        cpu::gemm(s_.normed.data() + row * H, lw.wqkv.data(), c, len, n, H);
        b = &lw.bqkv;
        break;
      case Weight::O:
        c = out + row * H;
        n = H;
        cpu::gemm(s_.attn.data() + row * qd, lw.wo.data(), c, len, H, qd, accumulate);
        b = &lw.bo;
        break;
      case Weight::GateUp:
        c = s_.gu.data() + row * 2 * d.ffn;
        n = 2 * d.ffn;
        cpu::gemm(s_.normed.data() + row * H, lw.wgu.data(), c, len, n, H);
        b = &lw.bgu;
        break;
      case Weight::Down:
        c = out + row * H;
        n = H;
        cpu::gemm(s_.act.data() + row * d.ffn, lw.wd.data(), c, len, H, d.ffn, accumulate);
        b = &lw.bd;
        break;
    }
    // The epilogue's bias, where this rank holds one (a row-parallel GEMM's: rank 0).
    if (bias && !b->empty()) {
      for (std::int64_t r = 0; r < len; ++r) cpu::add_inplace(c + r * n, b->data(), n);
    }
  }

  void qk_norm(std::int64_t layer, std::int64_t row, std::int64_t rows) override {
    const auto& d = m_.d;
    const auto& lw = weights(layer);
    float* q = s_.qkv.data() + row * d.qkv_n();
    cpu::head_rmsnorm(q, d.qkv_n(), d.q_heads, d.head_dim, lw.q_norm.data(), rows, m_.eps);
    cpu::head_rmsnorm(q + d.q_heads * d.head_dim, d.qkv_n(), d.kv_heads, d.head_dim,
                      lw.k_norm.data(), rows, m_.eps);
  }

  void rope(std::int64_t row, std::int64_t len, std::int64_t pos, std::int64_t requests) override {
    const auto& d = m_.d;
    cpu::rope(s_.qkv.data() + row * d.qkv_n(), d.qkv_n(), d.q_heads + d.kv_heads, d.head_dim,
              m_.rotary_dim, len, pos, m_.rope_table.data(), requests);
  }

  void store_kv(std::int64_t layer, std::int64_t row, std::int64_t len, std::int64_t request,
                std::int64_t pos, std::int64_t requests) override {
    const auto& d = m_.d;
    const std::int64_t qd = d.q_heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
    const auto L = static_cast<std::size_t>(layer);
    const std::int64_t dst = (request * m_.cap + pos) * kvd;
    cpu::store_kv(s_.qkv.data() + row * d.qkv_n(), d.qkv_n(), qd, kvd, len, s_.k[L].data() + dst,
                  s_.v[L].data() + dst, requests, m_.cap * kvd);
  }

  void attention(std::int64_t layer, std::int64_t request, std::int64_t requests, std::int64_t row,
                 std::int64_t len, std::int64_t pos) override {
    const auto& d = m_.d;
    const std::int64_t qd = d.q_heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
    const auto L = static_cast<std::size_t>(layer);
    // Q read in place in the fused qkv rows (no copy, as the CUDA runtime); K and V from the
    // cache.
    AttentionShape a = chunk_attention(m_, layer, len, pos);
    a.requests = requests;
    a.q_row_stride = d.qkv_n();
    cpu::attention(s_.qkv.data() + row * d.qkv_n(), s_.k[L].data() + request * m_.cap * kvd,
                   s_.v[L].data() + request * m_.cap * kvd, s_.attn.data() + row * qd, a);
  }

  void gated_act(std::int64_t row, std::int64_t len) override {
    const std::int64_t f = m_.d.ffn;
    cpu::silu_mul(s_.gu.data() + row * 2 * f, s_.act.data() + row * f, len, f, m_.gelu);
  }

  void residual_add(std::int64_t module, std::int64_t row, std::int64_t len, std::int64_t layer,
                    int post_norm, std::int64_t norm_layer, int norm_after) override {
    const std::int64_t H = m_.d.hidden;
    float* o = s_.out[static_cast<std::size_t>(module)].data() + row * H;
    if (post_norm > 0) {
      const auto& lw = weights(layer);
      cpu::rmsnorm(o, (post_norm == 1 ? lw.post_attn_norm : lw.post_mlp_norm).data(), o, len, H,
                   m_.eps);
    }
    if (norm_after > 0) {
      const float* w = norm_after == 3 ? m_.final_norm.data()
                                       : (norm_after == 2 ? weights(norm_layer).mlp_norm
                                                          : weights(norm_layer).attn_norm)
                                             .data();
      cpu::add_rmsnorm(s_.x.data() + row * H, o, w, s_.normed.data() + row * H, len, H, m_.eps);
    } else {
      cpu::add_inplace(s_.x.data() + row * H, o, len * H);
    }
  }

  std::int64_t allreduce(std::int64_t module, std::int64_t row, std::int64_t len) override {
    const std::int64_t H = m_.d.hidden;
    float* buf = module < 0 ? s_.x.data() : s_.out[static_cast<std::size_t>(module)].data();
    return ar_.run(static_cast<int>(rank_), buf + row * H, len * H);
  }

  void embed(std::int64_t row, std::int64_t len) override {
    const std::int64_t H = m_.d.hidden;
    cpu::embed(s_.ids.data() + row, m_.embed[static_cast<std::size_t>(rank_)].data(),
               vocab_first(m_, rank_), m_.vocab, s_.x.data() + row * H, len, H);
  }

  void final_norm(const HeadRows& h) override {
    const std::int64_t H = m_.d.hidden;
    for (std::int64_t i = 0; i < h.requests; ++i) {
      const std::int64_t row = h.row + i * h.stride;
      cpu::rmsnorm(s_.x.data() + row * H, m_.final_norm.data(), s_.normed.data() + row * H, 1, H,
                   m_.eps);
    }
  }

  void lm_head(const HeadRows& h) override {
    const std::int64_t H = m_.d.hidden, V = m_.vocab;
    const std::int64_t slice = vocab_slice(m_, rank_);
    cpu::gemm(s_.normed.data() + h.row * H, m_.lm_head[static_cast<std::size_t>(rank_)].data(),
              s_.logits.data() + (slice * m_.batch + h.request) * V, h.requests, V, H, false,
              h.stride * H);
  }

  // Every rank's slice of the logits ([slice][batch][vocab], slice = rank) to every rank.
  std::int64_t gather_logits() override {
    return ar_.gather(static_cast<int>(rank_), s_.logits.data(), m_.batch * m_.vocab);
  }

 private:
  const LayerWeights& weights(std::int64_t layer) const {
    return m_.w[static_cast<std::size_t>(rank_)][static_cast<std::size_t>(layer)];
  }
  const ModelData& m_;
  RankState& s_;
  std::int64_t rank_;
  Reducer& ar_;
};

std::size_t module_count(const sim::Schedule& s) {
  std::int32_t mx = -1;
  for (const auto& op : s.ops) mx = std::max(mx, op.module);
  return static_cast<std::size_t>(mx + 1);
}

using Timeline = RunResult::Timeline;

// Ranks [first, first + count) of the TP group run here, as threads.
Timeline run_once(const ModelData& m, const sim::Schedule& s, std::int64_t first,
                  std::int64_t count, bool mpi) {
  const std::size_t n = s.ops.size();
  const std::size_t modules = module_count(s);
  const RowLayout layout = row_layout(m, s);
  std::vector<RankState> ranks;
  for (std::int64_t r = first; r < first + count; ++r) {
    ranks.push_back(make_state(m, layout, r, modules));
  }
  // done[local rank][op]
  std::vector<std::unique_ptr<std::atomic<std::uint8_t>[]>> done;
  for (std::int64_t r = 0; r < count; ++r) {
    done.emplace_back(new std::atomic<std::uint8_t>[n]);
    for (std::size_t i = 0; i < n; ++i) done.back()[i].store(0);
  }
  std::unique_ptr<Reducer> reducer;
  if (mpi) {
    mpi::barrier();  // every process starts the run together: skew is not counted as comm
    reducer = std::make_unique<MpiReducer>();
  } else {
    reducer = std::make_unique<SharedReducer>(static_cast<int>(count));
  }
  Reducer& ar = *reducer;
  Timeline tl;
  tl.start_ns.assign(n, 0);
  tl.end_ns.assign(n, 0);
  tl.wait_ns.assign(n, 0);
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  std::mutex err_mu;
  const auto t0 = std::chrono::steady_clock::now();
  auto now_ns = [&] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                t0)
        .count();
  };
  const auto epoch_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
  // Abort: every flag is set to 2 (so no thread sleeps on it), then woken.
  auto abort_all = [&] {
    failed = true;
    for (auto& d2 : done) {
      for (std::size_t j = 0; j < n; ++j) {
        std::uint8_t zero = 0;
        d2[j].compare_exchange_strong(zero, 2);
        d2[j].notify_all();
      }
    }
  };
  auto stream_worker = [&](std::int64_t rank, sim::StreamKind stream) {
    auto& dn = done[static_cast<std::size_t>(rank - first)];
    auto stop = [&] {  // a comm thread that stops early releases the other ranks' barriers
      if (stream == sim::StreamKind::Comm) ar.drop();
    };
    for (std::size_t i = 0; i < n; ++i) {
      const Op& op = s.ops[i];
      if (op.stream != stream) continue;
      for (auto dep : op.deps) dn[static_cast<std::size_t>(dep)].wait(0, std::memory_order_acquire);
      if (failed.load()) return stop();
      const std::int64_t a = now_ns();
      std::int64_t arrived = 0;
      try {
        CpuKernels k(m, ranks[static_cast<std::size_t>(rank - first)], rank, ar);
        arrived = interpret(m, layout, op, k);
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(err_mu);
          if (!error) error = std::current_exception();
        }
        abort_all();
        return stop();
      }
      if (rank == first) {  // this process's first rank (rank 0 without --mpi)
        // An all-reduce starts when the last rank arrives; the wait before is skew.
        tl.start_ns[i] = arrived > 0 ? arrived - epoch_ns : a;
        tl.wait_ns[i] = arrived > 0 ? arrived - epoch_ns - a : 0;
        tl.end_ns[i] = now_ns();
      }
      dn[i].store(1, std::memory_order_release);
      dn[i].notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (std::int64_t r = first; r < first + count; ++r) {
    threads.emplace_back(stream_worker, r, sim::StreamKind::Compute);
    threads.emplace_back(stream_worker, r, sim::StreamKind::Comm);
  }
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  tl.total_ns = now_ns();
  tl.output = run_output(m, from_layout(layout, ranks[0].x, m.d.hidden), ranks[0].logits);
  return tl;
}

}  // namespace

RunResult run_cpu(const sim::Workload& w, const sim::Schedule& s, const RunOptions& o) {
  // Under --mpi this process is one rank; otherwise every rank is a thread here.
  const std::int64_t first = o.mpi ? mpi::rank() : 0, count = o.mpi ? 1 : w.tp;
  // Rank 0 also computes the reference, which needs every shard: it generates them all once.
  const auto data = shared_data(w, o.seed, 0, o.mpi && first != 0 ? first : -1);
  const ModelData& m = *data;
  for (int i = 0; i < o.warmup; ++i) run_once(m, s, first, count, o.mpi);
  std::vector<Timeline> runs;
  for (int i = 0; i < std::max(1, o.repeat); ++i)
    runs.push_back(run_once(m, s, first, count, o.mpi));
  if (o.mpi) {
    for (auto& t : runs) t.wait_ns.clear();  // under MPI the arrival of the last rank is not known
  }
  return median_of_runs(std::move(runs));
}

RunResult median_of_runs(std::vector<RunResult::Timeline> runs) {
  std::vector<std::size_t> order(runs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return runs[a].total_ns < runs[b].total_ns; });
  RunResult::Timeline& med = runs[order[order.size() / 2]];
  RunResult r;
  for (const auto& t : runs) {
    r.totals_ns.push_back(t.total_ns);
    if (t.untimed_total_ns >= 0) r.untimed_totals_ns.push_back(t.untimed_total_ns);
  }
  r.start_ns = std::move(med.start_ns);
  r.end_ns = std::move(med.end_ns);
  r.wait_ns = std::move(med.wait_ns);
  r.total_ns = med.total_ns;
  r.output = std::move(med.output);
  return r;
}

double output_error(const std::vector<float>& got, const std::vector<float>& want,
                    std::size_t logits) {
  if (logits == 0 || got.size() != want.size() || got.size() < logits) {
    return relative_error(got, want);
  }
  const auto split = [&](const std::vector<float>& v, bool tail) {
    const auto cut = v.end() - static_cast<std::ptrdiff_t>(logits);
    return tail ? std::vector<float>(cut, v.end()) : std::vector<float>(v.begin(), cut);
  };
  return std::max(relative_error(split(got, false), split(want, false)),
                  relative_error(split(got, true), split(want, true)));
}

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double scale = 0, worst = 0;
  for (float v : b) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (std::isnan(e)) return std::numeric_limits<double>::infinity();  // NaN: wrong
    worst = std::max(worst, e);
  }
  return scale > 0 ? worst / scale : worst;
}

}  // namespace tpo::validate
