// The op interpreter: op code and token block -> kernel calls (see interpreter.h).
#include "validate/interpreter.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tpo::validate {

using sim::OpCode;

std::int64_t interpret(const ModelData& m, const sim::Op& op, RankKernels& k) {
  std::int64_t arrived = 0;
  const std::int64_t requests = op.req_end - op.req_begin;
  for (const RowBlock& b : row_blocks(m, op)) {
    switch (op.code) {
      case OpCode::AttnNorm:
      case OpCode::MlpNorm:
        k.rmsnorm(op.layer, op.code == OpCode::MlpNorm, b.row, b.len);
        break;
      case OpCode::Qkv:
        k.gemm(Weight::Qkv, op.layer, op.module, b.row, b.len, false);
        // K and V of these rows into the cache: whole sequences of several requests (decode,
        // an unsplit batch) in one call, as the simulator counts one write per qkv op; else
        // one request at a time.
        if (b.row % m.seq == 0 && b.len % m.seq == 0 && b.len > m.seq) {
          k.store_kv(op.layer, b.row, m.seq, b.row / m.seq, m.context, b.len / m.seq);
          break;
        }
        for (std::int64_t row = b.row; row < b.row + b.len;) {
          const std::int64_t request = row / m.seq, first = row % m.seq;
          const std::int64_t len = std::min(b.row + b.len - row, m.seq - first);
          k.store_kv(op.layer, row, len, request, m.context + first, 1);
          row += len;
        }
        break;
      case OpCode::Attention:
        if (b.len == requests * m.seq && requests > 1) {
          // Whole sequences of several requests (decode, or an unsplit batch): one call.
          k.attention(op.layer, op.req_begin, requests, b.row, m.seq, m.context);
        } else {
          k.attention(op.layer, b.request, 1, b.row, b.len, b.pos);
        }
        break;
      case OpCode::OProj:
        k.gemm(Weight::O, op.layer, op.module, b.row, b.len, op.accumulate);
        break;
      case OpCode::GateUp:
        k.gemm(Weight::GateUp, op.layer, op.module, b.row, b.len, false);
        break;
      case OpCode::SiluMul:
        k.gated_act(b.row, b.len);
        break;
      case OpCode::Down:
        k.gemm(Weight::Down, op.layer, op.module, b.row, b.len, op.accumulate);
        break;
      case OpCode::AllReduce: {
        const std::int64_t t = k.allreduce(op.module, b.row, b.len);
        if (arrived == 0) arrived = t;
        break;
      }
      case OpCode::ResidualAdd:
        k.residual_add(op.residual_of, b.row, b.len);
        break;
      default:  // check_runnable let nothing else through
        throw std::logic_error(std::string("runtime: unexpected op ") + sim::op_code_name(op.code));
    }
  }
  return arrived;
}

}  // namespace tpo::validate
