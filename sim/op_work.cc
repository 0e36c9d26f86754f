// An op's work — shape, FLOPs and HBM bytes — from its size. One set of formulas for the graph
// builder and for the profiler's analytical-vs-measured comparison.
#include "sim/schedule.h"

#include <algorithm>

namespace tpo::sim {

void set_gemm_work(Op& op, std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate,
                   bool bias) {
  op.m = m;
  op.n = n;
  op.k = k;
  op.accumulate = accumulate;
  const double mm = static_cast<double>(m), nn = static_cast<double>(n),
               kk = static_cast<double>(k);
  op.flops = 2.0 * mm * nn * kk;
  op.bytes = 2.0 * (mm * kk + kk * nn + mm * nn) + (accumulate ? 2.0 * mm * nn : 0.0);
  op.bias = bias;
  if (bias) {
    op.flops += mm * nn;
    op.bytes += 2.0 * nn;
  }
}

namespace {
// A norm of an add's rows and width, as an op of its own.
Op norm_of(const Op& add, OpCode code) {
  Op n = add;
  n.code = code;
  n.kind = OpKind::Norm;
  n.post_norm = 0;
  n.norm_after = 0;
  set_rowwise_work(n, add.m, add.n);
  return n;
}
}  // namespace

Op post_norm_op(const Op& add) {
  return norm_of(add, OpCode::MlpNorm);
}

double hbm_bytes(const Op& op) {
  switch (op.kind) {
    case OpKind::Gemm:
      return op.bytes + qk_norm_bytes(op) + rope_bytes(op) + kv_store_bytes(op);
    case OpKind::Norm:
    case OpKind::Elementwise:
      return (op.norm_after > 0 ? fused_norm_op(op).bytes : op.bytes) +
             (op.post_norm > 0 ? post_norm_op(op).bytes : 0.0);
    case OpKind::Attention:
    case OpKind::AllReduce:
      break;
  }
  return op.bytes;
}

Op allreduce_add_op(const Op& ar) {
  Op a = ar;
  a.code = OpCode::ResidualAdd;
  a.kind = OpKind::Elementwise;
  a.stream = StreamKind::Compute;
  const std::int64_t rows = std::max<std::int64_t>(1, ar.tokens());
  set_rowwise_work(a, rows, static_cast<std::int64_t>(ar.bytes / 2.0) / rows);
  return a;
}

Op fused_norm_op(const Op& add) {
  Op n = norm_of(add, add.norm_after == 3   ? OpCode::FinalNorm
                      : add.norm_after == 2 ? OpCode::MlpNorm
                                            : OpCode::AttnNorm);
  // The norm's bytes (rows read and written, the weight) less the residual's read, plus the
  // add's (residual and module output read, residual written).
  n.bytes += add.bytes - 2.0 * static_cast<double>(add.m) * static_cast<double>(add.n);
  return n;
}

void set_rowwise_work(Op& op, std::int64_t rows, std::int64_t width) {
  op.m = rows;
  op.n = width;
  const double e = static_cast<double>(rows) * static_cast<double>(width);
  switch (op.code) {
    case OpCode::AttnNorm:
    case OpCode::MlpNorm:
    case OpCode::FinalNorm:  // read x, write y, read the weight vector
      op.flops = 4.0 * e;
      op.bytes = 2.0 * 2.0 * e + norm_weight_bytes(op);
      break;
    case OpCode::ResidualAdd:  // read residual and update, write residual
      op.flops = e;
      op.bytes = 2.0 * 3.0 * e;
      break;
    case OpCode::SiluMul:  // read gate and up, write the product
      op.flops = 4.0 * e;
      op.bytes = 2.0 * 3.0 * e;
      break;
    case OpCode::Embed:  // gather rows of the table, write them
      op.flops = 0;
      op.bytes = 2.0 * 2.0 * e;
      break;
    default:
      break;
  }
}

double attention_pairs(std::int64_t q, std::int64_t prefix, std::int64_t window) {
  // Causal, bottom-right aligned: query i of the chunk (position prefix + i) sees prefix + i + 1
  // keys, or the window's where that is fewer.
  const double qq = static_cast<double>(q), p = static_cast<double>(prefix);
  if (window <= 0 || window >= prefix + q) return qq * p + qq * (qq + 1) / 2;
  const double w = static_cast<double>(window);
  if (window <= prefix + 1) return qq * w;  // every query sees a full window
  // Queries up to position window - 1 see all earlier keys (prefix + 1 .. window), the rest
  // the window's.
  const double a = p + 1;
  return (a + w) * (w - a + 1) / 2 + w * (p + qq - w);
}

void set_attention_work(Op& op, std::int64_t requests, std::int64_t q, std::int64_t prefix,
                        std::int64_t q_heads, std::int64_t kv_heads, std::int64_t head_dim,
                        std::int64_t window) {
  const double r = static_cast<double>(requests), qq = static_cast<double>(q),
               hq = static_cast<double>(q_heads), hkv = static_cast<double>(kv_heads),
               hd = static_cast<double>(head_dim);
  op.m = requests * q;
  op.n = q_heads;
  op.k = head_dim;
  op.kv_heads = static_cast<std::int32_t>(kv_heads);
  op.window = window;
  // QK^T and PV, 2 FLOPs per multiply-add each.
  op.flops = 4.0 * r * hq * hd * attention_pairs(q, prefix, window);
  // Keys read: from the first query's window start (position 0 without a window) to the end.
  const std::int64_t first = window > 0 ? std::max<std::int64_t>(0, prefix - window + 1) : 0;
  const double keys = static_cast<double>(prefix + q - first);
  // Q read + O write, K/V of those keys read, K/V of the chunk written to the cache.
  op.bytes = 2.0 * r * (2.0 * qq * hq * hd + 2.0 * keys * hkv * hd + 2.0 * qq * hkv * hd);
}

double attention_keys_per_query(const Op& op) {
  const std::int64_t q = op.seq_end - op.seq_begin;
  return q <= 0 ? 0.0 : attention_pairs(q, op.seq_begin, op.window) / static_cast<double>(q);
}

double attention_busiest_block_pairs(const Op& op, std::int64_t block) {
  const std::int64_t q = op.seq_end - op.seq_begin;
  if (q <= 0 || block <= 0) return 0.0;
  const std::int64_t blocks = (q + block - 1) / block;
  // Block b holds queries [b x block, min(q, (b + 1) x block)): the pairs of the queries up to
  // its end less those before its start (attention_pairs counts from the chunk's first query).
  auto pairs_of = [&](std::int64_t b) {
    const std::int64_t lo = b * block, hi = std::min(q, lo + block);
    return attention_pairs(hi, op.seq_begin, op.window) -
           attention_pairs(lo, op.seq_begin, op.window);
  };
  double most = pairs_of(blocks - 1);
  if (blocks > 1) most = std::max(most, pairs_of(blocks - 2));
  return most;
}

double attention_equivalent_prefix(const Op& op) {
  const std::int64_t q = op.seq_end - op.seq_begin;
  if (op.window <= 0 || op.window >= op.seq_end) return static_cast<double>(op.seq_begin);
  return std::max(0.0, attention_keys_per_query(op) - 0.5 * static_cast<double>(q + 1));
}

void set_allreduce_work(Op& op, std::int64_t elements) {
  op.bytes = 2.0 * static_cast<double>(elements);
}

void resegment(Op& op, std::int64_t seq_begin, std::int64_t seq_end) {
  const std::int64_t requests = op.req_end - op.req_begin;
  const std::int64_t old_rows = op.tokens();
  op.seq_begin = seq_begin;
  op.seq_end = seq_end;
  const std::int64_t rows = op.tokens();
  switch (op.kind) {
    case OpKind::Gemm:
      set_gemm_work(op, rows, op.n, op.k, op.accumulate, op.bias);
      break;
    case OpKind::Norm:
    case OpKind::Elementwise:
      set_rowwise_work(op, rows, op.n);
      break;
    case OpKind::Attention:
      set_attention_work(op, requests, seq_end - seq_begin, seq_begin, op.n, op.kv_heads, op.k,
                         op.window);
      break;
    case OpKind::AllReduce:  // a message of `width` values per row
      if (old_rows > 0) {
        set_allreduce_work(op, static_cast<std::int64_t>(op.bytes / 2.0) / old_rows * rows);
      }
      break;
  }
}

}  // namespace tpo::sim
