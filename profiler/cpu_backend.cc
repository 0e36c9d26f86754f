// The CPU backend: fp32 kernels from validate/cpu_kernels, ranks as threads. "Comm" beside a
// GEMM is emulated by worker threads streaming memory copies (the CPU analogue of the GPU's
// SM-limited copy kernel); the all-reduce is the shared-memory one the CPU runtime uses.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "profiler/backend.h"
#include "sim/profile.h"
#include "validate/kernels/cpu_kernels.h"

namespace tpo::profiler {

namespace {

using Clock = std::chrono::steady_clock;
namespace k = tpo::validate::cpu;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<float> random_buffer(std::int64_t n, unsigned seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& x : v) x = u(rng);
  return v;
}

// A GEMM; for qkv (kv_heads > 0) followed by what the runtime's qkv op runs after it: the
// per-head norms (qk_norm: Qwen3, Gemma-3), the rotary kernel on its query and K heads (rope_dim >
// 0; positions 0 .. m - 1), then K and V of its m rows written into two caches.
class GemmRunner : public Runner {
 public:
  GemmRunner(std::int64_t m, std::int64_t n, std::int64_t kk) : GemmRunner(gemm_item(m, n, kk)) {}
  explicit GemmRunner(const Item& it) : it_(it) {
    const std::int64_t m = it.m, kk = it.k, n = it.n;
    if (it.qk_norm) norm_w_.assign(static_cast<std::size_t>(it.head_dim), 1.0f);
    if (it.bias) bias_ = random_buffer(n, 200u);
    if (it.rope_dim > 0) table_ = k::rope_table(m, it.rope_dim, 10000.0);  // angles: no matter
    sets_ = rotation_sets(4 * (m * kk + kk * n));
    for (int s = 0; s < sets_; ++s) {
      a_.push_back(random_buffer(m * kk, 1u + static_cast<unsigned>(s)));
      b_.push_back(random_buffer(kk * n, 100u + static_cast<unsigned>(s)));
    }
    c_.resize(static_cast<std::size_t>(m * n));
    kc_.resize(static_cast<std::size_t>(m * it.kv_width()));
    vc_.resize(static_cast<std::size_t>(m * it.kv_width()));
  }
  double run_once() override {
    const auto t0 = Clock::now();
    run_untimed();
    return seconds_since(t0);
  }
  void run_untimed() {
    const Item& it = it_;
    const std::int64_t m = it.m, n = it.n, hd = it.head_dim;
    const auto s = static_cast<std::size_t>(next_++ % sets_);
    k::gemm(a_[s].data(), b_[s].data(), c_.data(), m, n, it.k);
    if (!bias_.empty()) {  // the bias, as the runtime adds it
      for (std::int64_t r = 0; r < m; ++r) k::add_inplace(c_.data() + r * n, bias_.data(), n);
    }
    if (it.qk_norm) {
      k::head_rmsnorm(c_.data(), n, it.q_heads, hd, norm_w_.data(), m);
      k::head_rmsnorm(c_.data() + it.q_width(), n, it.kv_heads, hd, norm_w_.data(), m);
    }
    if (it.rope_dim > 0) {
      k::rope(c_.data(), n, it.q_heads + it.kv_heads, hd, it.rope_dim, m, 0, table_.data());
    }
    if (it.kv_width() > 0) {
      k::store_kv(c_.data(), n, it.q_width(), it.kv_width(), m, kc_.data(), vc_.data());
    }
  }

 private:
  const Item it_;
  int sets_ = 2, next_ = 0;
  std::vector<std::vector<float>> a_, b_;
  std::vector<float> c_, kc_, vc_, table_, norm_w_, bias_;
};

class AttentionRunner : public Runner {
 public:
  explicit AttentionRunner(const Item& it) : s_(attention_shape(it)) {
    // Q in place in qkv-wide rows, as the runtime reads it.
    const std::int64_t qn = s_.q_elements(), qin = s_.q_input_elements(), kvn = s_.kv_elements();
    sets_ = rotation_sets(4 * (qin + 2 * kvn));
    for (int s = 0; s < sets_; ++s) {
      q_.push_back(random_buffer(qin, 7u + static_cast<unsigned>(s)));
      k_.push_back(random_buffer(kvn, 70u + static_cast<unsigned>(s)));
      v_.push_back(random_buffer(kvn, 700u + static_cast<unsigned>(s)));
    }
    o_.resize(static_cast<std::size_t>(qn));
  }
  double run_once() override {
    const auto s = static_cast<std::size_t>(next_++ % sets_);
    const auto t0 = Clock::now();
    k::attention(q_[s].data(), k_[s].data(), v_[s].data(), o_.data(), s_);
    return seconds_since(t0);
  }

 private:
  k::AttentionShape s_;
  int sets_ = 2, next_ = 0;
  std::vector<std::vector<float>> q_, k_, v_;
  std::vector<float> o_;
};

class RowwiseRunner : public Runner {
 public:
  explicit RowwiseRunner(const Item& it)
      : name_(it.name), rows_(it.m), cols_(it.n), gelu_(it.gelu) {
    const std::int64_t in = name_ == "silu_mul" ? 2 * rows_ * cols_ : rows_ * cols_;
    const bool fused = name_ == sim::kAddNormName;  // x: the module's output, y: the residual
    sets_ = rotation_sets(4 * (2 * in + (fused ? rows_ * cols_ : 0)));
    for (int s = 0; s < sets_; ++s) {
      x_.push_back(random_buffer(in, 11u + static_cast<unsigned>(s)));
      y_.push_back(random_buffer(rows_ * cols_, 111u + static_cast<unsigned>(s)));
      if (fused) z_.push_back(random_buffer(rows_ * cols_, 211u + static_cast<unsigned>(s)));
    }
    w_ = random_buffer(cols_, 5u);
  }
  double run_once() override {
    const auto s = static_cast<std::size_t>(next_++ % sets_);
    const auto t0 = Clock::now();
    if (name_ == "rmsnorm") {
      k::rmsnorm(x_[s].data(), w_.data(), y_[s].data(), rows_, cols_);
    } else if (name_ == "silu_mul") {
      k::silu_mul(x_[s].data(), y_[s].data(), rows_, cols_, gelu_);
    } else if (name_ == sim::kAddNormName) {
      k::add_rmsnorm(y_[s].data(), x_[s].data(), w_.data(), z_[s].data(), rows_, cols_);
    } else {
      k::add_inplace(y_[s].data(), x_[s].data(), rows_ * cols_);
    }
    return seconds_since(t0);
  }

 private:
  std::string name_;
  std::int64_t rows_, cols_;
  bool gelu_;
  int sets_ = 2, next_ = 0;
  std::vector<std::vector<float>> x_, y_, z_;
  std::vector<float> w_;
};

// Ranks as threads; rank 0 is the calling thread. The collective is timed as the CPU runtime
// times it (validate): on rank 0, from when every rank has arrived (SharedAllReduce::run says
// when) to its own finish, so a thread's wake-up from the barrier between runs is rank skew, not
// all-reduce time (until 2026-12-05 rank 0 timed the whole hand-off).
class AllReduceRunner : public Runner {
 public:
  AllReduceRunner(std::int64_t elements, std::int64_t ranks)
      : n_(elements), ar_(static_cast<int>(ranks)), start_(ranks), done_(ranks) {
    for (std::int64_t r = 0; r < ranks; ++r)
      bufs_.push_back(random_buffer(n_, 3u + static_cast<unsigned>(r)));
    for (int r = 1; r < ranks; ++r) {
      threads_.emplace_back([this, r] {
        for (;;) {
          start_.arrive_and_wait();
          if (stop_) return;
          ar_.run(r, bufs_[static_cast<std::size_t>(r)].data(), n_);
          done_.arrive_and_wait();
        }
      });
    }
  }
  ~AllReduceRunner() override {
    stop_ = true;
    start_.arrive_and_wait();
    for (auto& t : threads_) t.join();
  }
  double run_once() override {
    start_.arrive_and_wait();
    const std::int64_t arrived = ar_.run(0, bufs_[0].data(), n_);
    const std::int64_t ended = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count();
    done_.arrive_and_wait();
    return static_cast<double>(ended - arrived) * 1e-9;
  }

 private:
  std::int64_t n_;
  std::vector<std::vector<float>> bufs_;
  k::SharedAllReduce ar_;
  std::barrier<> start_, done_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// Background workers that keep a resource busy until destroyed.
class Aggressor {
 public:
  template <class F>
  Aggressor(int workers, F make_work) {
    for (int w = 0; w < workers; ++w) {
      threads_.emplace_back([this, work = make_work(w)]() mutable {
        while (!stop_.load(std::memory_order_relaxed)) work();
      });
    }
  }
  ~Aggressor() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// A comm-sized copy: the CPU stand-in for moving an all-reduce's bytes.
class CopyRunner : public Runner {
 public:
  explicit CopyRunner(std::int64_t elements)
      : src_(random_buffer(elements, 9u)), dst_(static_cast<std::size_t>(elements)) {}
  double run_once() override {
    const auto t0 = Clock::now();
    std::memcpy(dst_.data(), src_.data(), src_.size() * sizeof(float));
    return seconds_since(t0);
  }

 private:
  std::vector<float> src_, dst_;
};

class GemmBesideCopy : public Runner {
 public:
  explicit GemmBesideCopy(const Item& it)
      : gemm_(it.m, it.n, it.k), agg_(static_cast<int>(it.workers), [n = it.m * it.n](int) {
          auto src = std::make_shared<std::vector<float>>(
              static_cast<std::size_t>(std::max<std::int64_t>(n, 1 << 22)), 1.0f);
          auto dst = std::make_shared<std::vector<float>>(src->size());
          return [src, dst] { std::memcpy(dst->data(), src->data(), src->size() * sizeof(float)); };
        }) {}
  double run_once() override { return gemm_.run_once(); }

 private:
  GemmRunner gemm_;
  Aggressor agg_;
};

class CopyBesideGemm : public Runner {
 public:
  explicit CopyBesideGemm(const Item& it)
      : copy_(it.elements), agg_(static_cast<int>(it.workers), [it](int) {
          auto g = std::make_shared<GemmRunner>(it.m, it.n, it.k);
          return [g] { g->run_untimed(); };
        }) {}
  double run_once() override { return copy_.run_once(); }

 private:
  CopyRunner copy_;
  Aggressor agg_;
};

// The in-schedule fragment: attention then o_proj, timed, with `workers` copying threads
// beside (none for the fragment alone); the copy of the other chunk's all-reduce alone is
// timed once for other_seconds().
class Fragment : public Runner {
 public:
  Fragment(const Item& it, bool with_copy)
      : attn_(it), oproj_(it.m, it.n, it.k), copy_(it.elements) {
    if (with_copy) {
      std::vector<double> t;
      for (int i = 0; i < 3; ++i) t.push_back(copy_.run_once());
      std::sort(t.begin(), t.end());
      other_s_ = t[1];
      agg_ = std::make_unique<Aggressor>(static_cast<int>(it.workers), [n = it.elements](int) {
        auto src = std::make_shared<std::vector<float>>(static_cast<std::size_t>(n), 1.0f);
        auto dst = std::make_shared<std::vector<float>>(src->size());
        return [src, dst] { std::memcpy(dst->data(), src->data(), src->size() * sizeof(float)); };
      });
    }
  }
  double run_once() override { return attn_.run_once() + oproj_.run_once(); }
  double other_seconds() const override { return other_s_; }

 private:
  AttentionRunner attn_;
  GemmRunner oproj_;
  CopyRunner copy_;
  double other_s_ = 0;
  std::unique_ptr<Aggressor> agg_;
};

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto p = line.find(':');
      return p == std::string::npos ? line : line.substr(p + 2);
    }
  }
  return "unknown CPU";
}

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::string dtype() const override { return "fp32"; }
  nlohmann::json device() const override {
    return {{"backend", "cpu"},
            {"name", cpu_model_name()},
            {"hardware_threads", std::thread::hardware_concurrency()},
            {"kernels",
             "Eigen GEMM (single-threaded per rank), reference attention, "
             "shared-memory all-reduce across rank threads"}};
  }
  std::unique_ptr<Runner> prepare(const Item& it) override {
    switch (it.kind) {
      case ItemKind::Gemm:
        return std::make_unique<GemmRunner>(it);
      case ItemKind::Attention:
        return std::make_unique<AttentionRunner>(it);
      case ItemKind::Rowwise:
        return std::make_unique<RowwiseRunner>(it);
      case ItemKind::AllReduce:
        return std::make_unique<AllReduceRunner>(it.elements, it.ranks);
      case ItemKind::GemmBesideComm:
        return std::make_unique<GemmBesideCopy>(it);
      case ItemKind::CommBesideGemm:
        if (it.beside != "gemm") {
          throw std::runtime_error("cpu backend: comm beside " + it.beside + " is not measured");
        }
        return std::make_unique<CopyBesideGemm>(it);
      case ItemKind::Fragment:
        return std::make_unique<Fragment>(it, true);
    }
    throw std::runtime_error("cpu backend: unknown item " + it.key);
  }
  std::unique_ptr<Runner> prepare_alone(const Item& it) override {
    if (it.kind == ItemKind::CommBesideGemm) return std::make_unique<CopyRunner>(it.elements);
    if (it.kind == ItemKind::Fragment) return std::make_unique<Fragment>(it, false);
    return std::make_unique<GemmRunner>(it.m, it.n, it.k);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

std::vector<std::int64_t> comm_workers(const std::string& backend) {
  if (backend == "cuda") return {8, 16, 32};  // CTAs of the copy kernel
  return {1};  // one copying thread beside the GEMM's (ranks are threads; CI has 2 cores)
}

std::vector<std::string> comm_beside_more(const std::string& backend) {
  // An all-reduce in a schedule mostly overlaps attention and memory-bound ops, and on a GPU
  // a copy beside those is slowed far less than beside a GEMM holding every SM.
  if (backend == "cuda") return {"attention", "rowwise"};
  return {};
}

std::vector<std::int64_t> comm_lengths(const std::string& backend) {
  // On a GPU a short transfer waits for the GEMM's thread blocks to leave the SMs and a long
  // one shares them: the slowdown depends on the length, so three lengths are measured.
  if (backend == "cuda") return {1, 8, 64};
  return {1};
}

int rotation_sets(std::int64_t bytes_per_set) {
  const std::int64_t target = 64ll << 20;
  return static_cast<int>(
      std::clamp<std::int64_t>(target / std::max<std::int64_t>(1, bytes_per_set) + 1, 2, 8));
}

}  // namespace tpo::profiler
