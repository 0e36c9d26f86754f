// Names of op kinds and codes, as they appear in reports and traces.
#include "sim/schedule.h"

namespace tpo::sim {

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::Gemm:
      return "gemm";
    case OpKind::Attention:
      return "attention";
    case OpKind::Norm:
      return "norm";
    case OpKind::Elementwise:
      return "elementwise";
    case OpKind::AllReduce:
      return "allreduce";
  }
  return "?";
}

const char* op_code_name(OpCode c) {
  switch (c) {
    case OpCode::Embed:
      return "embed";
    case OpCode::AttnNorm:
      return "attn_norm";
    case OpCode::Qkv:
      return "qkv";
    case OpCode::Attention:
      return "attention";
    case OpCode::OProj:
      return "o_proj";
    case OpCode::MlpNorm:
      return "mlp_norm";
    case OpCode::GateUp:
      return "gate_up";
    case OpCode::SiluMul:
      return "silu_mul";
    case OpCode::Down:
      return "down";
    case OpCode::AllReduce:
      return "allreduce";
    case OpCode::ResidualAdd:
      return "residual_add";
    case OpCode::FinalNorm:
      return "final_norm";
    case OpCode::LmHead:
      return "lm_head";
    case OpCode::LogitsGather:
      return "logits_gather";
  }
  return "?";
}

OpKind op_code_kind(OpCode c) {
  switch (c) {
    case OpCode::Qkv:
    case OpCode::OProj:
    case OpCode::GateUp:
    case OpCode::Down:
    case OpCode::LmHead:
      return OpKind::Gemm;
    case OpCode::Attention:
      return OpKind::Attention;
    case OpCode::AttnNorm:
    case OpCode::MlpNorm:
    case OpCode::FinalNorm:
      return OpKind::Norm;
    case OpCode::AllReduce:
    case OpCode::LogitsGather:  // a collective on the comm stream
      return OpKind::AllReduce;
    case OpCode::Embed:
    case OpCode::SiluMul:
    case OpCode::ResidualAdd:
      return OpKind::Elementwise;
  }
  return OpKind::Elementwise;
}

double Schedule::total_flops() const {
  double f = 0;
  for (const auto& op : ops) f += op.flops;
  return f;
}

}  // namespace tpo::sim
