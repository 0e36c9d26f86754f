// Row-wise and elementwise kernels (rmsnorm, SiLU*mul, add, the KV-cache write after qkv), the
// spin that holds a stream while the host queues work, and the SM-limited copy that emulates an
// all-reduce.
#include "validate/kernels/cuda_common.cuh"

namespace tpo::validate::cuda {

namespace {

// One block per row (of norm_threads threads); VEC: 8 values per load. With ADD, x += o first
// (rounded to bf16 and stored, as add_bf16 stores it) and the norm is of the sum: the fused add and
// norm. Each thread reads back in the second pass exactly the values it wrote in the first (the
// same columns), so no barrier is needed between them but block_sum's. Without ADD, x is only read
// (y may be x).
template <bool VEC, bool ADD>
__global__ void __launch_bounds__(1024)
    rmsnorm_kernel(bf16* x, const bf16* o, const bf16* w, bf16* y, std::int64_t cols,
                   std::int64_t pitch, float eps) {
  bf16* xr = x + blockIdx.x * pitch;
  const bf16* orow = ADD ? o + blockIdx.x * pitch : nullptr;
  bf16* yr = y + blockIdx.x * pitch;
  float ss = 0;
  if (VEC) {
    for (std::int64_t c = threadIdx.x * 8; c < cols; c += blockDim.x * 8) {
      Bf16x8 a = *reinterpret_cast<const Bf16x8*>(xr + c);
      if (ADD) {
        const Bf16x8 b = *reinterpret_cast<const Bf16x8*>(orow + c);
        for (int e = 0; e < 8; ++e) {
          a.v[e] = __float2bfloat16(__bfloat162float(a.v[e]) + __bfloat162float(b.v[e]));
        }
        *reinterpret_cast<Bf16x8*>(xr + c) = a;
      }
      for (int e = 0; e < 8; ++e) {
        const float v = __bfloat162float(a.v[e]);
        ss += v * v;
      }
    }
  } else {
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      if (ADD) xr[c] = __float2bfloat16(__bfloat162float(xr[c]) + __bfloat162float(orow[c]));
      const float v = __bfloat162float(xr[c]);
      ss += v * v;
    }
  }
  ss = block_sum(ss);
  const float inv = rsqrtf(ss / float(cols) + eps);
  if (VEC) {
    for (std::int64_t c = threadIdx.x * 8; c < cols; c += blockDim.x * 8) {
      const Bf16x8 a = *reinterpret_cast<const Bf16x8*>(xr + c);
      const Bf16x8 g = *reinterpret_cast<const Bf16x8*>(w + c);
      Bf16x8 r;
      for (int e = 0; e < 8; ++e) {
        r.v[e] = __float2bfloat16(__bfloat162float(a.v[e]) * inv * __bfloat162float(g.v[e]));
      }
      *reinterpret_cast<Bf16x8*>(yr + c) = r;
    }
  } else {
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      yr[c] = __float2bfloat16(__bfloat162float(xr[c]) * inv * __bfloat162float(w[c]));
    }
  }
}

// Threads per row for a norm of `rows` rows of `loads` loads each (8-value loads on the vector
// path): vLLM's rule for its rms_norm (csrc/layernorm_kernels.cu, read 2026-12-04): up to 1024
// threads below 256 rows, where a row is latency-bound and one block per row leaves SMs idle,
// 256 from 256 rows (more blocks per SM), and no more than the row has loads (its
// fused_add_rms_norm launches up to as many threads as the row has values, of which one in 8
// loads on its vector path: the same loads in flight); in whole warps (block_sum's shuffles).
// Before 2026-12-04 always 256: a one-row norm of hidden 8192 then made four dependent passes of 4
// KiB where vLLM makes one.
int norm_threads(std::int64_t rows, std::int64_t loads) {
  const std::int64_t most = rows < 256 ? 1024 : 256;
  const std::int64_t warps = std::max<std::int64_t>(1, (loads + 31) / 32);
  return static_cast<int>(std::min(most, 32 * warps));
}

// rmsnorm_kernel<VEC, ADD> on `rows` rows `pitch` values apart (0: cols): the vector path
// where every pointer and the pitch allow it.
template <bool ADD>
void launch_rmsnorm(void* x, const void* o, const void* w, void* y, std::int64_t rows,
                    std::int64_t cols, float eps, void* stream, std::int64_t pitch = 0) {
  if (rows == 0) return;
  if (pitch <= 0) pitch = cols;
  auto* xb = static_cast<bf16*>(x);
  const auto* ob = static_cast<const bf16*>(o);
  const auto* wb = static_cast<const bf16*>(w);
  auto* yb = static_cast<bf16*>(y);
  if (cols % 8 == 0 && pitch % 8 == 0 && aligned16(x) && (!ADD || aligned16(o)) && aligned16(w) &&
      aligned16(y)) {
    rmsnorm_kernel<true, ADD>
        <<<unsigned(rows), unsigned(norm_threads(rows, cols / 8)), 0, S(stream)>>>(
            xb, ob, wb, yb, cols, pitch, eps);
  } else {
    rmsnorm_kernel<false, ADD>
        <<<unsigned(rows), unsigned(norm_threads(rows, cols)), 0, S(stream)>>>(xb, ob, wb, yb, cols,
                                                                               pitch, eps);
  }
  TPO_CUDA_CHECK(cudaGetLastError());
}

// The gate's activation: SiLU (SwiGLU), or GELU's tanh approximation (GeGLU, Gemma's
// gelu_pytorch_tanh; the CPU kernels' gelu_tanh).
template <bool GELU>
__device__ float gate_act(float g) {
  if (GELU) return 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)));
  return g / (1.0f + __expf(-g));
}

// Rows on grid y (strided), columns on x; VEC: 8 columns per thread.
template <bool VEC, bool GELU>
__global__ void silu_mul_kernel(const bf16* gu, bf16* out, std::int64_t rows, std::int64_t ffn) {
  const std::int64_t step = VEC ? 8 : 1;
  const std::int64_t c = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) * step;
  if (c >= ffn) return;
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const bf16* g = gu + r * 2 * ffn + c;
    const bf16* u = g + ffn;
    bf16* o = out + r * ffn + c;
    if (VEC) {
      const Bf16x8 a = *reinterpret_cast<const Bf16x8*>(g);
      const Bf16x8 b = *reinterpret_cast<const Bf16x8*>(u);
      Bf16x8 y;
      for (int e = 0; e < 8; ++e) {
        const float gv = __bfloat162float(a.v[e]);
        y.v[e] = __float2bfloat16(gate_act<GELU>(gv) * __bfloat162float(b.v[e]));
      }
      *reinterpret_cast<Bf16x8*>(o) = y;
    } else {
      const float gv = __bfloat162float(*g);
      *o = __float2bfloat16(gate_act<GELU>(gv) * __bfloat162float(*u));
    }
  }
}

// n counts elements, or groups of 8 with VEC.
template <bool VEC>
__global__ void add_kernel(bf16* acc, const bf16* x, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    if (VEC) {
      Bf16x8 a = reinterpret_cast<Bf16x8*>(acc)[i];
      const Bf16x8 b = reinterpret_cast<const Bf16x8*>(x)[i];
      for (int e = 0; e < 8; ++e) {
        a.v[e] = __float2bfloat16(__bfloat162float(a.v[e]) + __bfloat162float(b.v[e]));
      }
      reinterpret_cast<Bf16x8*>(acc)[i] = a;
    } else {
      acc[i] = __float2bfloat16(__bfloat162float(acc[i]) + __bfloat162float(x[i]));
    }
  }
}

// Holds its stream for `ns` nanoseconds of GPU time (one thread, no memory traffic).
// The SM cycle counter bounds it too (4 cycles per ns: about 2x the time at this GPU's top
// clock), should the global timer not advance.
__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  const long long c0 = clock64();
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns && (unsigned long long)(clock64() - c0) < 4 * ns);
}

// K and V of each qkv row to the caches; T: one value (bf16) or eight (int4). Widths, offsets
// and strides in units of T; `rows` rows per request, request i's destination from i * stride.
template <typename T>
__global__ void store_kv_kernel(const T* qkv, std::int64_t pitch, std::int64_t q_width,
                                std::int64_t kv_width, std::int64_t rows, std::int64_t requests,
                                std::int64_t stride, T* k, T* v) {
  const std::size_t row_len = std::size_t(2 * kv_width);
  const std::size_t n = std::size_t(requests) * std::size_t(rows) * row_len;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t r = i / row_len, c = i % row_len;
    const std::size_t dst = (r / std::size_t(rows)) * std::size_t(stride) +
                            (r % std::size_t(rows)) * std::size_t(kv_width);
    const T x = qkv[r * std::size_t(pitch) + std::size_t(q_width) + c];
    if (c < std::size_t(kv_width)) {
      k[dst + c] = x;
    } else {
      v[dst + c - std::size_t(kv_width)] = x;
    }
  }
}

__global__ void add_bias_rows_kernel(bf16* c, const bf16* bias, std::size_t n, std::size_t total) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < total;
       i += std::size_t(gridDim.x) * blockDim.x) {
    c[i] = __float2bfloat16(__bfloat162float(c[i]) + __bfloat162float(bias[i % n]));
  }
}

// One block per token row: the table row of its id where this slice holds it, else zeros.
__global__ void embed_kernel(const std::int32_t* ids, const bf16* table, std::int64_t first,
                             std::int64_t rows, bf16* x, std::int64_t cols) {
  const std::int64_t r = std::int64_t(ids[blockIdx.x]) - first;
  bf16* xr = x + std::size_t(blockIdx.x) * std::size_t(cols);
  const bool held = r >= 0 && r < rows;
  const bf16* tr = held ? table + std::size_t(r) * std::size_t(cols) : nullptr;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    xr[c] = held ? tr[c] : __float2bfloat16(0.0f);
  }
}

// One warp per (row, head): its head_dim values summed over the warp's lanes, then scaled.
__global__ void head_rmsnorm_kernel(bf16* x, std::int64_t pitch, std::int64_t heads,
                                    std::int64_t head_dim, const bf16* w, std::int64_t rows,
                                    float eps) {
  const std::int64_t warp = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows * heads) return;  // a whole warp leaves together
  bf16* v = x + std::size_t(warp / heads) * std::size_t(pitch) +
            std::size_t(warp % heads) * std::size_t(head_dim);
  float ss = 0;
  for (std::int64_t c = lane; c < head_dim; c += 32) {
    const float a = __bfloat162float(v[c]);
    ss += a * a;
  }
  for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = rsqrtf(ss / float(head_dim) + eps);
  for (std::int64_t c = lane; c < head_dim; c += 32) {
    v[c] = __float2bfloat16(__bfloat162float(v[c]) * inv * __bfloat162float(w[c]));
  }
}

// One thread per (row, head, pair): rows request-major, request i's row t at position pos + t.
__global__ void rope_kernel(bf16* qkv, std::int64_t pitch, std::int64_t heads,
                            std::int64_t head_dim, std::int64_t half, std::int64_t rows,
                            std::int64_t requests, std::int64_t pos, const bf16* table) {
  const std::size_t per_row = std::size_t(heads) * std::size_t(half);
  const std::size_t n = std::size_t(requests) * std::size_t(rows) * per_row;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t r = i / per_row, h = i % per_row / std::size_t(half),
                      j = i % std::size_t(half);
    const bf16* cs = table + (std::size_t(pos) + r % std::size_t(rows)) * std::size_t(2 * half);
    bf16* x = qkv + r * std::size_t(pitch) + h * std::size_t(head_dim);
    const float a = __bfloat162float(x[j]), b = __bfloat162float(x[j + std::size_t(half)]);
    const float c = __bfloat162float(cs[j]), sn = __bfloat162float(cs[std::size_t(half) + j]);
    x[j] = __float2bfloat16(a * c - b * sn);
    x[j + std::size_t(half)] = __float2bfloat16(b * c + a * sn);
  }
}

__global__ void copy_kernel(const int4* src, int4* dst, std::size_t n16, const char* src_tail,
                            char* dst_tail, std::size_t tail) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n16;
       i += std::size_t(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
  if (blockIdx.x == 0 && threadIdx.x < tail) dst_tail[threadIdx.x] = src_tail[threadIdx.x];
}

}  // namespace

void spin(void* stream, double microseconds) {
  if (microseconds <= 0) return;
  spin_kernel<<<1, 1, 0, S(stream)>>>((unsigned long long)(microseconds * 1e3));
  TPO_CUDA_CHECK(cudaGetLastError());
}

void rmsnorm_bf16(const void* x, const void* w, void* y, std::int64_t rows, std::int64_t cols,
                  float eps, void* stream, std::int64_t pitch) {
  // Without ADD the kernel does not write x.
  launch_rmsnorm<false>(const_cast<void*>(x), nullptr, w, y, rows, cols, eps, stream, pitch);
}

void add_rmsnorm_bf16(void* x, const void* o, const void* w, void* y, std::int64_t rows,
                      std::int64_t cols, float eps, void* stream) {
  launch_rmsnorm<true>(x, o, w, y, rows, cols, eps, stream);
}

void silu_mul_bf16(const void* gate_up, void* out, std::int64_t rows, std::int64_t ffn,
                   void* stream, bool gelu) {
  const std::size_t n = std::size_t(rows) * ffn;
  if (n == 0) return;
  const bool vec = ffn % 8 == 0 && aligned16(gate_up) && aligned16(out);
  const std::int64_t per_row = vec ? ffn / 8 : ffn;
  const dim3 grid(unsigned((per_row + 255) / 256), unsigned(std::min<std::int64_t>(rows, 65535)));
  const auto* g = static_cast<const bf16*>(gate_up);
  auto* o = static_cast<bf16*>(out);
  if (vec && gelu) {
    silu_mul_kernel<true, true><<<grid, 256, 0, S(stream)>>>(g, o, rows, ffn);
  } else if (vec) {
    silu_mul_kernel<true, false><<<grid, 256, 0, S(stream)>>>(g, o, rows, ffn);
  } else if (gelu) {
    silu_mul_kernel<false, true><<<grid, 256, 0, S(stream)>>>(g, o, rows, ffn);
  } else {
    silu_mul_kernel<false, false><<<grid, 256, 0, S(stream)>>>(g, o, rows, ffn);
  }
  TPO_CUDA_CHECK(cudaGetLastError());
}

void add_bf16(void* acc, const void* x, std::int64_t n, void* stream) {
  if (n == 0) return;
  if (n % 8 == 0 && aligned16(acc) && aligned16(x)) {
    add_kernel<true><<<blocks_for(std::size_t(n) / 8, 256), 256, 0, S(stream)>>>(
        static_cast<bf16*>(acc), static_cast<const bf16*>(x), std::size_t(n) / 8);
  } else {
    add_kernel<false><<<blocks_for(std::size_t(n), 256), 256, 0, S(stream)>>>(
        static_cast<bf16*>(acc), static_cast<const bf16*>(x), std::size_t(n));
  }
  TPO_CUDA_CHECK(cudaGetLastError());
}

void add_bias_rows_bf16(void* c, const void* bias, std::int64_t rows, std::int64_t n,
                        void* stream) {
  const std::size_t total = std::size_t(rows) * std::size_t(n);
  if (total == 0) return;
  add_bias_rows_kernel<<<blocks_for(total, 256), 256, 0, S(stream)>>>(
      static_cast<bf16*>(c), static_cast<const bf16*>(bias), std::size_t(n), total);
  TPO_CUDA_CHECK(cudaGetLastError());
}

void store_kv_bf16(const void* qkv, std::int64_t qkv_n, std::int64_t q_width, std::int64_t kv_width,
                   std::int64_t rows, void* k, void* v, void* stream, std::int64_t requests,
                   std::int64_t dst_stride) {
  if (rows <= 0 || kv_width <= 0 || requests <= 0) return;
  const bool vec = qkv_n % 8 == 0 && q_width % 8 == 0 && kv_width % 8 == 0 && dst_stride % 8 == 0 &&
                   aligned16(qkv) && aligned16(k) && aligned16(v);
  const std::int64_t e = vec ? 8 : 1;
  const std::size_t n = std::size_t(requests * rows) * std::size_t(2 * kv_width / e);
  if (vec) {
    store_kv_kernel<int4><<<blocks_for(n, 256), 256, 0, S(stream)>>>(
        static_cast<const int4*>(qkv), qkv_n / e, q_width / e, kv_width / e, rows, requests,
        dst_stride / e, static_cast<int4*>(k), static_cast<int4*>(v));
  } else {
    store_kv_kernel<bf16><<<blocks_for(n, 256), 256, 0, S(stream)>>>(
        static_cast<const bf16*>(qkv), qkv_n, q_width, kv_width, rows, requests, dst_stride,
        static_cast<bf16*>(k), static_cast<bf16*>(v));
  }
  TPO_CUDA_CHECK(cudaGetLastError());
}

void embed_bf16(const void* ids, const void* table, std::int64_t first, std::int64_t rows, void* x,
                std::int64_t tokens, std::int64_t cols, void* stream) {
  if (tokens <= 0 || cols <= 0) return;
  embed_kernel<<<unsigned(tokens), 256, 0, S(stream)>>>(static_cast<const std::int32_t*>(ids),
                                                        static_cast<const bf16*>(table), first,
                                                        rows, static_cast<bf16*>(x), cols);
  TPO_CUDA_CHECK(cudaGetLastError());
}

void head_rmsnorm_bf16(void* x, std::int64_t pitch, std::int64_t heads, std::int64_t head_dim,
                       const void* w, std::int64_t rows, float eps, void* stream) {
  if (rows <= 0 || heads <= 0 || head_dim <= 0) return;
  const std::size_t threads = std::size_t(rows * heads) * 32;
  head_rmsnorm_kernel<<<unsigned((threads + 255) / 256), 256, 0, S(stream)>>>(
      static_cast<bf16*>(x), pitch, heads, head_dim, static_cast<const bf16*>(w), rows, eps);
  TPO_CUDA_CHECK(cudaGetLastError());
}

void rope_bf16(void* qkv, std::int64_t qkv_n, std::int64_t heads, std::int64_t head_dim,
               std::int64_t rot, std::int64_t rows, std::int64_t pos, const void* table,
               void* stream, std::int64_t requests) {
  if (rows <= 0 || heads <= 0 || rot < 2 || requests <= 0) return;
  const std::size_t n = std::size_t(requests * rows) * std::size_t(heads * (rot / 2));
  rope_kernel<<<blocks_for(n, 256), 256, 0, S(stream)>>>(static_cast<bf16*>(qkv), qkv_n, heads,
                                                         head_dim, rot / 2, rows, requests, pos,
                                                         static_cast<const bf16*>(table));
  TPO_CUDA_CHECK(cudaGetLastError());
}

void copy_on_ctas(const void* src, void* dst, std::size_t bytes, int ctas, void* stream) {
  const std::size_t n16 = bytes / 16, tail = bytes % 16;
  copy_kernel<<<std::max(1, ctas), 512, 0, S(stream)>>>(
      static_cast<const int4*>(src), static_cast<int4*>(dst), n16,
      static_cast<const char*>(src) + n16 * 16, static_cast<char*>(dst) + n16 * 16, tail);
  TPO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tpo::validate::cuda
