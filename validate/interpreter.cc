// The op interpreter: op code and token block -> kernel calls (see interpreter.h).
#include "validate/interpreter.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tpo::validate {

using sim::OpCode;

namespace {
void add_block(const sim::Op& op, const RowBlock& b, RankKernels& k) {
  k.residual_add(op.residual_of, b.row, b.len, op.layer, op.post_norm, op.norm_layer,
                 op.norm_after);
}
}  // namespace

void interpret_add(const ModelData& m, const RowLayout& l, const sim::Op& op, RankKernels& k) {
  if (op.residual_of < 0) return;
  for (const RowBlock& b : row_blocks(l, m.context, op)) add_block(op, b, k);
}

std::int64_t interpret(const ModelData& m, const RowLayout& l, const sim::Op& op, RankKernels& k) {
  // The final norm, the LM head and the logits gather: one call over the requests' last rows.
  if (op.code == OpCode::LmHead) {
    k.lm_head(head_rows(l, op));
    return 0;
  }
  if (op.code == OpCode::FinalNorm) {
    k.final_norm(head_rows(l, op));
    return 0;
  }
  // The gather takes the whole logits buffer, the embedding and its all-reduce every row (one
  // block whatever the layout's chunks: one kernel and one all-reduce, as the simulator counts
  // them): a graph with one per group of requests would need them cut, and is refused.
  const bool embed = op.code == OpCode::Embed || (op.code == OpCode::AllReduce && op.module < 0);
  const bool all_requests = op.req_begin == 0 && op.req_end == m.batch;
  const bool all_tokens = op.seq_begin == m.context && op.seq_end == m.context + m.seq;
  if ((op.code == OpCode::LogitsGather && !all_requests) ||
      (embed && !(all_requests && all_tokens))) {
    throw std::logic_error(std::string("runtime: a ") + sim::op_code_name(op.code) +
                           " op over part of the batch");
  }
  if (op.code == OpCode::LogitsGather) return k.gather_logits();
  if (op.code == OpCode::Embed) {
    k.embed(0, m.tokens);
    return 0;
  }
  if (embed) return k.allreduce(-1, 0, m.tokens);
  std::int64_t arrived = 0;
  for (const RowBlock& b : row_blocks(l, m.context, op)) {
    switch (op.code) {
      case OpCode::AttnNorm:
      case OpCode::MlpNorm:
        k.rmsnorm(op.layer, op.code == OpCode::MlpNorm, b.row, b.len);
        break;
      case OpCode::Qkv:
        k.gemm(Weight::Qkv, op.layer, op.module, b.row, b.len, false, op.bias);
        if (op.qk_norm) k.qk_norm(op.layer, b.row, b.len);
        if (op.rope_dim > 0) {
          if (op.rope_dim != m.rotary_dim) {
            throw std::logic_error("runtime: the data's rotary table does not fit the graph");
          }
          k.rope(b.row, b.per_request(), b.pos, b.requests);
        }
        // K and V of the block's requests into the cache in one call, as the simulator counts
        // one write per qkv op.
        k.store_kv(op.layer, b.row, b.per_request(), b.request, b.pos, b.requests);
        break;
      case OpCode::Attention:
        k.attention(op.layer, b.request, b.requests, b.row, b.per_request(), b.pos);
        break;
      case OpCode::OProj:
        k.gemm(Weight::O, op.layer, op.module, b.row, b.len, op.accumulate, op.bias);
        break;
      case OpCode::GateUp:
        k.gemm(Weight::GateUp, op.layer, op.module, b.row, b.len, false, op.bias);
        break;
      case OpCode::SiluMul:
        k.gated_act(b.row, b.len);
        break;
      case OpCode::Down:
        k.gemm(Weight::Down, op.layer, op.module, b.row, b.len, op.accumulate, op.bias);
        break;
      case OpCode::AllReduce: {
        const std::int64_t t = k.allreduce(op.module, b.row, b.len);
        if (arrived == 0) arrived = t;
        if (op.residual_of >= 0) add_block(op, b, k);
        break;
      }
      case OpCode::ResidualAdd:
        add_block(op, b, k);
        break;
      default:
        throw std::logic_error(std::string("runtime: unexpected op ") + sim::op_code_name(op.code));
    }
  }
  return arrived;
}

}  // namespace tpo::validate
