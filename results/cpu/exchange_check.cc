// The CPU backend's all-reduce exchange (reduce-scatter then all-gather through shared memory,
// as validate/kernels/cpu_kernels.cc's SharedAllReduce runs it) between two threads, 2 ranks x
// 524,288 floats, each phase timed apart. The second thread is pinned to the CPU given (1: the
// other core, 0: the same core as rank 0). The C++ standard library and Linux's
// sched_setaffinity:
//   g++ -std=c++20 -O2 results/cpu/exchange_check.cc -o /tmp/exchange_check -lpthread
//   /tmp/exchange_check 1
// Prints rank 0's median phase times over 25 exchanges (after 5 untimed).
#include <sched.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  sched_setaffinity(0, sizeof s, &s);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t n = 524288;
  const int other_cpu = argc > 1 ? std::atoi(argv[1]) : 1;
  const int warmup = 5, reps = 25;
  std::vector<float> b0(n, 1.0f), b1(n, 2.0f);
  float* bufs[2] = {b0.data(), b1.data()};
  std::barrier<> sync(2);
  std::vector<double> rs, ag, total;
  auto rank = [&](int r) {
    pin(r == 0 ? 0 : other_cpu);
    for (int it = 0; it < warmup + reps; ++it) {
      sync.arrive_and_wait();
      const std::int64_t t0 = now_ns();
      float* buf = bufs[r];
      const float* src = bufs[1 - r];
      for (std::int64_t i = n * r / 2; i < n * (r + 1) / 2; ++i) buf[i] += src[i];
      const std::int64_t t1 = now_ns();
      sync.arrive_and_wait();
      const std::int64_t t2 = now_ns();
      std::copy(src + n * (1 - r) / 2, src + n * (2 - r) / 2, buf + n * (1 - r) / 2);
      const std::int64_t t3 = now_ns();
      sync.arrive_and_wait();
      const std::int64_t t4 = now_ns();
      for (std::int64_t i = n * r / 2; i < n * (r + 1) / 2; ++i) buf[i] *= 0.5f;  // no overflow
      if (r == 0 && it >= warmup) {
        rs.push_back((t1 - t0) * 1e-3);
        ag.push_back((t3 - t2) * 1e-3);
        total.push_back((t4 - t0) * 1e-3);
      }
    }
  };
  std::thread t(rank, 1);
  rank(0);
  t.join();
  std::printf("rank 1 on cpu %d: reduce-scatter %.1f us, all-gather %.1f us, exchange %.1f us\n",
              other_cpu, median(rs), median(ag), median(total));
}
