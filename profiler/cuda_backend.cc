// The CUDA backend: bf16 kernels from validate/cuda_kernels on device 0, timed with CUDA
// events around back-to-back launches (one launch alone overstates a short kernel by the
// launch and event overhead, so each run launches the op enough times to last ~200 us and
// divides). Interference: the GEMM on the compute stream beside the SM-limited copy kernel on
// P CTAs on the high-priority comm stream, and the copy beside a running GEMM. The NCCL
// all-reduce is measured only when the machine has as many GPUs as ranks.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

#include "profiler/backend.h"
#include "profiler/interference_check.h"
#include "sim/error.h"
#include "sim/profile.h"
#include "validate/kernels/cpu_kernels.h"
#include "validate/kernels/cuda_kernels.h"

namespace tpo::profiler {

namespace {

namespace cu = tpo::validate::cuda;

constexpr double kTargetSeconds = 200e-6;
constexpr double kHostUsPerLaunch = 40;  // host time allowed per queued op (a generous bound)
constexpr double kHeadStartUs = kInterferenceHeadStartUs;  // the other op starts this much earlier

// Launches `op(set)` back to back on `stream`, rotating input sets; seconds per launch.
class Batched : public Runner {
 public:
  Batched(cu::Context& ctx, void* stream, int sets) : ctx_(ctx), stream_(stream), sets_(sets) {}
  void synchronize() { ctx_.synchronize(); }
  // One calibrated batch, enqueued and not waited for (an aggressor beside a victim).
  void enqueue_batch() {
    for (int i = 0; i < std::max(batch_, 1); ++i) launch(next_++ % sets_);
  }
  double run_once() override { return measure(true); }
  // Seconds per launch; `ahead`: hold the stream with a spin until the batch is queued.
  double measure(bool ahead) {
    if (batch_ == 0) {  // calibrate on the first call, after one untimed launch (plan
      launch(0);        // heuristics and lazy module loading happen there)
      synchronize();
      batch_ = 1;
      const double t = time_batch(true);
      batch_ =
          static_cast<int>(std::clamp(std::ceil(kTargetSeconds / std::max(t, 1e-7)), 1.0, 64.0));
    }
    return time_batch(ahead) / batch_;
  }
  int batch() const { return std::max(batch_, 1); }
  int sets() const { return sets_; }
  void launch_once() { launch(next_++ % sets_); }  // enqueued, not timed
  void* stream() const { return stream_; }

  // Host microseconds of one launch call as the CUDA runtime makes it (the launch and the two
  // events it records around every op): `n` of them timed on the host clock while a spin
  // holds the stream (so the queue never fills and the host never waits for the GPU).
  // If the spin ends before the host has queued them (a launch queue that filled makes the host
  // wait for the GPU, which would be timed), it is measured again with half as many.
  double host_us_per_launch(int n) {
    measure(true);  // warm: plans and modules loaded
    for (int attempt = 0;; ++attempt) {
      cu::spin(stream_, kHostUsPerLaunch * (n + 1));
      cu::Event held;  // reached when the spin ends
      held.record(stream_);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i) {
        start_.record(stream_);
        launch(next_++ % sets_);
        stop_.record(stream_);
      }
      const auto t1 = std::chrono::steady_clock::now();
      const bool outran = held.done();
      synchronize();
      if (!outran || attempt == 2 || n < 8) {
        if (outran) {
          std::fprintf(stderr,
                       "tpo: note: host time per launch measured while the GPU was not held "
                       "(the spin ended first): it may include waits for the GPU\n");
        }
        return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
      }
      n /= 2;
    }
  }
  // GPU-visible microseconds a CUDA graph launch adds: a graph of one launch, timed with
  // events around cudaGraphLaunch on an idle stream, less the op's own back-to-back time.
  double graph_launch_us() {
    const double op_us = measure(true) * 1e6;
    cu::Graph g;
    g.begin_capture(stream_);
    launch(0);
    g.end_capture(stream_);
    std::vector<double> us;
    for (int i = 0; i < 21; ++i) {
      synchronize();
      start_.record(stream_);
      g.launch(stream_);
      stop_.record(stream_);
      stop_.synchronize();
      us.push_back(cu::Event::seconds_between(start_, stop_) * 1e6 - op_us);
    }
    std::nth_element(us.begin(), us.begin() + 10, us.end());
    return std::max(0.0, us[10]);
  }

 protected:
  virtual void launch(int set) = 0;
  friend class Beside;
  cu::Context& ctx_;
  void* stream_;

 private:
  double time_batch(bool ahead) {
    // The GPU waits (a spin kernel) while the host queues the batch, so what is timed is the
    // GPU's work back to back, not the host's launch rate (cuBLAS calls cost microseconds of
    // host time each, longer than a small GEMM). A spin that ended before the batch was queued
    // (start_ reached already) would time the GPU waiting for launches: then again, with a
    // spin twice as long.
    for (double spin_us = kHostUsPerLaunch * (batch_ + 1);; spin_us *= 2) {
      if (ahead) cu::spin(stream_, spin_us);
      start_.record(stream_);
      for (int i = 0; i < batch_; ++i) launch(next_++ % sets_);
      const bool outran = ahead && start_.done();
      stop_.record(stream_);
      stop_.synchronize();
      if (!outran || spin_us > 20e3) return cu::Event::seconds_between(start_, stop_);
    }
  }
  int sets_;
  int batch_ = 0;
  int next_ = 0;
  cu::Event start_, stop_;
};

cu::Buffer random_buffer(std::size_t n, std::uint64_t seed, void* stream) {
  cu::Buffer b(n * 2);
  cu::fill_random_bf16(b.get(), n, seed, 1.0f, stream);
  return b;
}

// A GEMM; for qkv (kv_heads > 0) followed by what the runtime's qkv op runs after it: the
// per-head norms (qk_norm: Qwen3, Gemma-3), the rotary kernel on its query and K heads (rope_dim >
// 0; positions 0 .. m - 1), then K and V of its m rows written into two caches.
class GemmRunner : public Batched {
 public:
  GemmRunner(cu::Context& ctx, std::int64_t m, std::int64_t n, std::int64_t k)
      : GemmRunner(ctx, gemm_item(m, n, k)) {}
  GemmRunner(cu::Context& ctx, const Item& it)
      : Batched(ctx, ctx.compute_stream(), rotation_sets(2 * (it.m * it.k + it.k * it.n))),
        it_(it) {
    const std::int64_t m = it.m, n = it.n, k = it.k;
    if (it.bias) bias_ = random_buffer(std::size_t(n), 200, stream_);
    if (it.qk_norm) {  // weights of ones (the values do not change the time)
      const std::vector<float> ones(std::size_t(it.head_dim), 1.0f);
      norm_w_ = cu::Buffer(ones.size() * 2);
      cu::copy_from_host_float_to_bf16(ones.data(), norm_w_.get(), ones.size());
    }
    if (it.rope_dim > 0) {  // bf16 cosines and sines, as the runtime's table (angles: no matter)
      const std::vector<float> t = validate::cpu::rope_table(m, it.rope_dim, 10000.0);
      table_ = cu::Buffer(t.size() * 2);
      cu::copy_from_host_float_to_bf16(t.data(), table_.get(), t.size());
    }
    for (int s = 0; s < sets(); ++s) {
      a_.push_back(random_buffer(std::size_t(m * k), 1 + s, stream_));
      b_.push_back(random_buffer(std::size_t(k * n), 100 + s, stream_));
    }
    c_ = cu::Buffer(std::size_t(m * n) * 2);
    if (it.kv_width() > 0) {
      kc_ = cu::Buffer(std::size_t(m * it.kv_width()) * 2);
      vc_ = cu::Buffer(std::size_t(m * it.kv_width()) * 2);
    }
  }
  void launch(int s) override {
    const Item& it = it_;
    const std::int64_t m = it.m, n = it.n, hd = it.head_dim;
    cu::gemm_bf16(ctx_, a_[std::size_t(s)].get(), b_[std::size_t(s)].get(), c_.get(), m, n, it.k,
                  false, stream_, bias_.get());
    if (it.qk_norm) {
      cu::head_rmsnorm_bf16(c_.get(), n, it.q_heads, hd, norm_w_.get(), m, 1e-5f, stream_);
      cu::head_rmsnorm_bf16(static_cast<char*>(c_.get()) + std::size_t(it.q_width()) * 2, n,
                            it.kv_heads, hd, norm_w_.get(), m, 1e-5f, stream_);
    }
    if (it.rope_dim > 0) {
      cu::rope_bf16(c_.get(), n, it.q_heads + it.kv_heads, hd, it.rope_dim, m, 0, table_.get(),
                    stream_);
    }
    if (it.kv_width() > 0) {
      cu::store_kv_bf16(c_.get(), n, it.q_width(), it.kv_width(), m, kc_.get(), vc_.get(), stream_);
    }
  }
  std::string kernel() override {
    return cu::gemm_kernel(ctx_, a_.front().get(), b_.front().get(), c_.get(), it_.m, it_.n, it_.k,
                           bias_.get() != nullptr);
  }

 private:
  const Item it_;
  std::vector<cu::Buffer> a_, b_;
  cu::Buffer c_, kc_, vc_, table_, norm_w_, bias_;  // bias_: null without one
};

class AttentionRunner : public Batched {
 public:
  AttentionRunner(cu::Context& ctx, const Item& it, bool fused)
      : Batched(ctx, ctx.compute_stream(),
                rotation_sets(2 * (attention_shape(it).q_input_elements() +
                                   2 * attention_shape(it).kv_elements()))),
        s_(attention_shape(it)),
        fused_(fused) {
    // Q in place in qkv-wide rows (attention_shape), as the runtime reads it.
    const std::size_t qn = std::size_t(s_.q_elements()), kvn = std::size_t(s_.kv_elements());
    for (int s = 0; s < sets(); ++s) {
      q_.push_back(random_buffer(std::size_t(s_.q_input_elements()), 7 + s, stream_));
      k_.push_back(random_buffer(kvn, 70 + s, stream_));
      v_.push_back(random_buffer(kvn, 700 + s, stream_));
    }
    o_ = cu::Buffer(qn * 2);
    if (!fused_) scratch_ = cu::Buffer(cu::attention_scratch_bytes(s_));
  }
  void launch(int s) override {
    if (fused_) {
      cu::attention_fused_bf16(ctx_, q_[std::size_t(s)].get(), k_[std::size_t(s)].get(),
                               v_[std::size_t(s)].get(), o_.get(), s_, stream_);
    } else {
      cu::attention_bf16(ctx_, q_[std::size_t(s)].get(), k_[std::size_t(s)].get(),
                         v_[std::size_t(s)].get(), o_.get(), scratch_.get(), s_, stream_);
    }
  }

 private:
  cu::AttentionShape s_;
  bool fused_ = false;
  std::vector<cu::Buffer> q_, k_, v_;
  cu::Buffer o_, scratch_;
};

class RowwiseRunner : public Batched {
  static const std::string& name_of(const Item& it) {
    if (it.name != "rmsnorm" && it.name != "silu_mul" && it.name != "residual_add" &&
        it.name != sim::kAddNormName) {
      throw std::runtime_error("cuda backend: unknown row-wise op " + it.name);
    }
    return it.name;
  }

 public:
  RowwiseRunner(cu::Context& ctx, const Item& it)
      : Batched(
            ctx, ctx.compute_stream(),
            rotation_sets(2 * (name_of(it) == "silu_mul" || it.name == sim::kAddNormName ? 3 : 2) *
                          it.m * it.n)),
        name_(name_of(it)),
        rows_(it.m),
        cols_(it.n),
        gelu_(it.gelu) {
    const std::size_t in = std::size_t(name_ == "silu_mul" ? 2 * rows_ * cols_ : rows_ * cols_);
    for (int s = 0; s < sets(); ++s) {
      x_.push_back(random_buffer(in, 11 + s, stream_));
      y_.push_back(random_buffer(std::size_t(rows_ * cols_), 111 + s, stream_));
      // The fused add and norm: x the module's output, y the residual, z the normalized rows.
      if (name_ == sim::kAddNormName) {
        z_.push_back(random_buffer(std::size_t(rows_ * cols_), 211 + s, stream_));
      }
    }
    w_ = random_buffer(std::size_t(cols_), 5, stream_);
  }
  void launch(int s) override {
    const auto i = std::size_t(s);
    if (name_ == "rmsnorm") {
      cu::rmsnorm_bf16(x_[i].get(), w_.get(), y_[i].get(), rows_, cols_, 1e-5f, stream_);
    } else if (name_ == "silu_mul") {
      cu::silu_mul_bf16(x_[i].get(), y_[i].get(), rows_, cols_, stream_, gelu_);
    } else if (name_ == sim::kAddNormName) {
      cu::add_rmsnorm_bf16(y_[i].get(), x_[i].get(), w_.get(), z_[i].get(), rows_, cols_, 1e-5f,
                           stream_);
    } else {
      cu::add_bf16(y_[i].get(), x_[i].get(), rows_ * cols_, stream_);
    }
  }

 private:
  std::string name_;
  std::int64_t rows_, cols_;
  bool gelu_;
  std::vector<cu::Buffer> x_, y_, z_;
  cu::Buffer w_;
};

class CopyRunner : public Batched {
 public:
  CopyRunner(cu::Context& ctx, std::size_t bytes, int ctas)
      : Batched(ctx, ctx.comm_stream(), 1), bytes_(bytes), ctas_(ctas), src_(bytes), dst_(bytes) {}
  void launch(int) override { cu::copy_on_ctas(src_.get(), dst_.get(), bytes_, ctas_, stream_); }

 private:
  std::size_t bytes_;
  int ctas_;
  cu::Buffer src_, dst_;
};

class AllReduceRunner : public Runner {
 public:
  AllReduceRunner(std::int64_t elements, std::int64_t ranks) : n_(std::size_t(elements)) {
    if (cu::device_count() < ranks) {
      throw SkipItem("an all-reduce over " + std::to_string(ranks) + " ranks needs " +
                     std::to_string(ranks) + " GPUs (use `tpo profile import-nccl-tests`)");
    }
    group_ = std::make_unique<cu::NcclGroup>(int(ranks));
    for (int r = 0; r < ranks; ++r) {
      cu::set_device(r);  // each rank's buffer on its own GPU
      bufs_.push_back(random_buffer(n_, 3 + r, group_->stream(r)));
      ptrs_.push_back(bufs_.back().get());
    }
    cu::set_device(0);
    group_->synchronize();
  }
  double run_once() override {
    start_.record(group_->stream(0));
    group_->allreduce_bf16(ptrs_, n_);
    stop_.record(group_->stream(0));
    stop_.synchronize();
    const double t = cu::Event::seconds_between(start_, stop_);
    group_->synchronize();
    return t;
  }

 private:
  std::size_t n_;
  std::unique_ptr<cu::NcclGroup> group_;
  std::vector<cu::Buffer> bufs_;
  std::vector<void*> ptrs_;
  cu::Event start_, stop_;
};

// The victim timed on its stream while the aggressor keeps the other stream busy for longer
// than the victim's batch.
class Beside : public Runner {
 public:
  Beside(std::unique_ptr<Batched> victim, std::unique_ptr<Batched> aggressor)
      : victim_(std::move(victim)), aggressor_(std::move(aggressor)) {
    // Calibrate both; the aggressor then runs for 8x the victim's batch alone (a slowed
    // victim must still finish beside it).
    const double victim_batch = victim_->run_once() * victim_->batch();
    const double aggressor_batch = aggressor_->run_once() * aggressor_->batch();
    // At most ~512 aggressor launches, so the victim is queued before the aggressor starts.
    const double most = std::max(4.0, std::floor(512.0 / aggressor_->batch()));
    aggressor_batches_ = static_cast<int>(
        std::clamp(std::ceil(8 * victim_batch / std::max(aggressor_batch, 1e-7)), 4.0, most));
  }
  double run_once() override {
    // Both streams wait on a spin until everything is queued; then the aggressor (batches
    // lasting 8x the victim's alone) starts, and the timed victim kHeadStartUs later: the
    // victim arrives while the other op already runs, as in a schedule. The order matters
    // on a GPU: thread blocks are not preempted, so whichever kernel holds the SMs first
    // keeps them (the first H200 runs measured a GEMM slowed 1.23x when the copy started
    // first, and 1.006x when both started together).
    cu::spin(victim_->stream_,
             std::min(20e3, kHostUsPerLaunch *
                                (aggressor_batches_ * aggressor_->batch() + victim_->batch() + 1)));
    cu::Event go;
    go.record(victim_->stream_);
    go.make_wait(aggressor_->stream_);
    cu::spin(victim_->stream_, kHeadStartUs);
    for (int i = 0; i < aggressor_batches_; ++i) aggressor_->enqueue_batch();
    cu::Event aggressor_end;
    aggressor_end.record(aggressor_->stream_);
    const double t = victim_->measure(false);
    cu::Event victim_end;
    victim_end.record(victim_->stream_);
    aggressor_->synchronize();  // no backlog leaks into the next measurement
    victim_end.synchronize();
    // The aggressor must outlast the victim, or part of the victim ran alone: then give it
    // twice the work and measure again (up to ~4096 launches).
    if (cu::Event::seconds_between(victim_end, aggressor_end) < 0 &&
        aggressor_batches_ * aggressor_->batch() < 4096) {
      aggressor_batches_ *= 2;
      return run_once();
    }
    return t;
  }

 private:
  std::unique_ptr<Batched> victim_, aggressor_;
  int aggressor_batches_ = 4;
};

// The in-schedule fragment, as ISO runs it: one chunk's attention then its o_proj on the
// compute stream while the other chunk's all-reduce (the copy on P CTAs) starts at the same
// moment on the comm stream; both are released by one event after a spin. Timed: the compute
// part (`with_copy` false: the fragment alone). The copy alone is timed once (other_seconds).
class Fragment : public Runner {
 public:
  Fragment(cu::Context& ctx, const Item& it, bool fused, bool with_copy)
      : ctx_(ctx),
        attn_(ctx, it, fused),
        oproj_(ctx, it.m, it.n, it.k),
        copy_(ctx, std::size_t(it.elements) * 2, int(it.workers)),
        with_copy_(with_copy) {
    attn_.run_once();  // plans and modules loaded outside the timed runs
    oproj_.run_once();
    if (with_copy_) other_s_ = copy_.run_once();
  }
  double run_once() override {
    void* cs = attn_.stream();
    // The launches below queue before the GPU starts; if the spin ended first (go reached), the
    // fragment did not start as one: again with a spin twice as long.
    for (double spin_us = 3 * kHostUsPerLaunch;; spin_us *= 2) {
      cu::spin(cs, spin_us);
      cu::Event go;
      go.record(cs);
      go.make_wait(copy_.stream());
      start_.record(cs);
      attn_.launch_once();
      oproj_.launch_once();
      stop_.record(cs);
      if (with_copy_) copy_.launch_once();
      const bool outran = go.done();
      stop_.synchronize();
      ctx_.synchronize();
      if (!outran || spin_us > 20e3) return cu::Event::seconds_between(start_, stop_);
    }
  }
  double other_seconds() const override { return other_s_; }

 private:
  cu::Context& ctx_;
  AttentionRunner attn_;
  GemmRunner oproj_;
  CopyRunner copy_;
  bool with_copy_;
  double other_s_ = 0;
  cu::Event start_, stop_;
};

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(bool fused) : ctx_(0), fused_(fused) {}
  std::string name() const override { return "cuda"; }
  std::string dtype() const override { return "bf16"; }
  nlohmann::json device() const override {
    nlohmann::json d = cu::device_info(0);
    d["attention_kernel"] = cu::attention_kernel_name(fused_);  // what the runtime runs too
    return d;
  }
  std::unique_ptr<Runner> prepare(const Item& it) override {
    switch (it.kind) {
      case ItemKind::Gemm:
        return std::make_unique<GemmRunner>(ctx_, it);
      case ItemKind::Attention:
        return std::make_unique<AttentionRunner>(ctx_, it, fused_);
      case ItemKind::Rowwise:
        return std::make_unique<RowwiseRunner>(ctx_, it);
      case ItemKind::AllReduce:
        return std::make_unique<AllReduceRunner>(it.elements, it.ranks);
      case ItemKind::GemmBesideComm:
        return std::make_unique<Beside>(
            std::make_unique<GemmRunner>(ctx_, it.m, it.n, it.k),
            std::make_unique<CopyRunner>(ctx_, std::size_t(it.m * it.n) * 2, int(it.workers)));
      case ItemKind::CommBesideGemm:
        return std::make_unique<Beside>(
            std::make_unique<CopyRunner>(ctx_, std::size_t(it.elements) * 2, int(it.workers)),
            compute_aggressor(it));
      case ItemKind::Fragment:
        return std::make_unique<Fragment>(ctx_, it, fused_, true);
    }
    throw std::runtime_error("cuda backend: unknown item " + it.key);
  }
  // The op the comm victim runs beside (Item::beside).
  std::unique_ptr<Batched> compute_aggressor(const Item& it) {
    if (it.beside == "attention") return std::make_unique<AttentionRunner>(ctx_, it, fused_);
    if (it.beside == "rowwise") {
      Item r = it;
      r.name = "rmsnorm";
      return std::make_unique<RowwiseRunner>(ctx_, r);
    }
    return std::make_unique<GemmRunner>(ctx_, it.m, it.n, it.k);
  }
  nlohmann::json measure_launch(const std::vector<Item>& items) override {
    // The smallest item of each kind: its GPU time is shortest, so the host never waits.
    const Item* first[4] = {nullptr, nullptr, nullptr, nullptr};
    auto size = [](const Item& it) {
      return it.kind == ItemKind::Attention ? it.q_tokens * (it.q_tokens + it.prefix) : it.m;
    };
    for (const auto& it : items) {
      const auto k = static_cast<std::size_t>(it.kind);
      if (k < 4 && (!first[k] || size(it) < size(*first[k]))) first[k] = &it;
    }
    constexpr int kLaunches = 200;
    nlohmann::json eager = nlohmann::json::object();
    std::string how;
    if (first[std::size_t(ItemKind::Gemm)]) {
      const Item& g = *first[std::size_t(ItemKind::Gemm)];
      eager["gemm"] = GemmRunner(ctx_, g.m, g.n, g.k).host_us_per_launch(kLaunches);
      how += "gemm " + g.key + "; ";
    }
    if (first[std::size_t(ItemKind::Attention)]) {
      const Item& a = *first[std::size_t(ItemKind::Attention)];
      eager["attention"] = AttentionRunner(ctx_, a, fused_).host_us_per_launch(kLaunches);
      how += "attention " + a.key + "; ";
    }
    double graph_us = 0;
    if (first[std::size_t(ItemKind::Rowwise)]) {
      Item r = *first[std::size_t(ItemKind::Rowwise)];
      r.name = "rmsnorm";
      RowwiseRunner norm(ctx_, r);
      eager["norm"] = norm.host_us_per_launch(kLaunches);
      graph_us = norm.graph_launch_us();
      r.name = "silu_mul";
      eager["elementwise"] = RowwiseRunner(ctx_, r).host_us_per_launch(kLaunches);
      how += "norm and elementwise " + std::to_string(r.m) + " rows; ";
    }
    // The all-reduce's launch: the copy kernel that stands in for it on one GPU (NCCL's own
    // host cost is not measured here; it needs the ranks).
    eager["allreduce"] = CopyRunner(ctx_, std::size_t(1) << 16, 16).host_us_per_launch(kLaunches);
    how += "all-reduce: the emulating copy kernel (NCCL's host cost not measured)";
    return {{"eager_us", eager},
            {"graph_launch_us", graph_us},
            {"source",
             "measured by tpo profile: host time per launch call (with the two timing "
             "events the runtime records around each op) over " +
                 std::to_string(kLaunches) +
                 " launches queued behind a spin; graph launch on the GPU, a "
                 "one-node graph less its node (" +
                 how + ")"}};
  }
  std::optional<double> interference_head_start_us() const override { return kHeadStartUs; }
  std::unique_ptr<Runner> prepare_alone(const Item& it) override {
    if (it.kind == ItemKind::Fragment) return std::make_unique<Fragment>(ctx_, it, fused_, false);
    if (it.kind == ItemKind::CommBesideGemm) {
      return std::make_unique<CopyRunner>(ctx_, std::size_t(it.elements) * 2, int(it.workers));
    }
    return std::make_unique<GemmRunner>(ctx_, it.m, it.n, it.k);
  }

 private:
  cu::Context ctx_;
  bool fused_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const std::string& attention) {
  std::string why;
  if (cu::device_count(&why) == 0) {
    throw RunFailure("no usable CUDA device on this machine (the CUDA runtime says: " + why +
                     "); profile the CPU with --backend cpu");
  }
  bool fused = false;
  try {
    fused = cu::use_fused_attention(attention);
  } catch (const std::invalid_argument& e) {
    throw InputError("--attention", attention, "must be auto, cudnn or cublas");
  } catch (const std::runtime_error& e) {
    throw RunFailure(e.what());
  }
  return std::make_unique<CudaBackend>(fused);
}

}  // namespace tpo::profiler
