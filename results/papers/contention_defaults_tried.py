# The contention blocks tried as datasheet defaults on the other GPUs (results/README.md, "Tried
# and not shipped"). Writes a copy of each shipped GPU file but h200x8 (which carries
# its fitted one) with the block added into OUT_DIR; the shipped files are not touched.
# Usage: python3 results/papers/contention_defaults_tried.py OUT_DIR
import collections, json, os, sys
OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
RULES = ("extra_wave (a kernel of W waves beside a comm kernel takes (W+1)/W of its time, at "
         "least S/(S-P)), gemm_cta 256x256 and compute_extra 0: TRANSFERRED from the H200 fit "
         "(h200x8.json, `tpo calibrate --fit-ops --wave-rule extra-wave` on Llama-3.1-8B, held out "
         "on Llama-2-70B: median 2.0%, mean signed -0.1%), an ASSUMPTION on this GPU, never "
         "measured here; REFERENCES.md supports the wave rule on H100 (a 132-CTA GEMM beside a "
         "24-CTA collective spilled into a second wave). hbm_gbps and sms come from the gpu and "
         "efficiency blocks (datasheet). comm_hbm_gbps_per_cta: 2.5 x the link's busbw_gbps / "
         "comm_ctas, an ASSUMPTION from 'NCCL traffic costs 2-3x its link rate in memory traffic' "
         "(NVIDIA/nccl#1428, REFERENCES.md). memory_bound_share 0.75: as h200x8.json, an ASSUMPTION. ")
NVL_EXTRA = (0.3, "comm_extra 0.3: TRANSFERRED from the H200 fit (the emulated copy kernel beside "
             "compute on NVLink-class SM copies), an ASSUMPTION here. ")
PCIE_EXTRA = (0.1, "comm_extra 0.1: this file's earlier fixed comm-beside-GEMM factor (1.1), an "
              "ASSUMPTION: the comm is bound by PCIe and host memory, not by the SMs or HBM it "
              "shares. ")
# Sentences several files share.
NCCL_FULL = ("NCCL launches the fewest SMs that reach the platform's bandwidth "
             "(NVIDIA/nccl#689)")
TOKENWEAVE = "ASSUMPTION as in h200x8.json (TokenWeave, arXiv 2505.11329"
PCI_TWO = "launches few SMs ('a PCI system ... should just launch 2 SMs', NVIDIA/nccl#689)"
FILES = {
  "a100x8": (24, 24, NVL_EXTRA,
             "comm_ctas 24: NCCL's all-reduce on a DGX A100 (12 NVLinks) runs 24 CTAs "
             "(NVIDIA/nccl#1225). comm_ctas_full 24: " + NCCL_FULL + ", so its default budget "
             "is taken as full. "),
  "a800x8": (16, 16, NVL_EXTRA,
             "comm_ctas 16: ASSUMPTION, two CTAs per NVLink as on a DGX A100 (24 CTAs for 12 "
             "NVLinks, NVIDIA/nccl#1225) over the A800's 8 NVLinks (400 GB/s). comm_ctas_full 16: "
             + NCCL_FULL + ". "),
  "h100x8": (16, 8, NVL_EXTRA,
             "comm_ctas 16: NCCL's NVLS all-reduce needs at most 16 channels for peak bandwidth "
             "(NVIDIA/nccl#1041; the ring algorithm may use 24, REFERENCES.md). comm_ctas_full 8: "
             + TOKENWEAVE + ", ran NVLink multimem all-reduce on 2-8 SMs of an H100). "),
  "h100x16": (16, 8, NVL_EXTRA,
              "comm_ctas 16: NCCL on a DGX with 8 NICs launches 16 SMs (NVIDIA/nccl#689), as "
              "its NVLS all-reduce inside the node (NVIDIA/nccl#1041). comm_ctas_full 8: "
              + TOKENWEAVE + "). The HBM draw uses the NVLink busbw (the intra-node part). "),
  "h100x8-nop2p": (2, 2, PCIE_EXTRA,
                   "comm_ctas 2: ASSUMPTION, NCCL through host memory is bound by PCIe and "
                   + PCI_TWO + ". comm_ctas_full 2: the same. "),
  "rtx4090x8": (2, 2, PCIE_EXTRA,
                "comm_ctas 2: ASSUMPTION, NCCL on a PCIe system without P2P is bound by PCIe and "
                + PCI_TWO + ". comm_ctas_full 2: the same. "),
}
for name, (ctas, full, (extra, extra_text), ctas_text) in FILES.items():
    path = f"configs/hardware/{name}.json"
    d = json.load(open(path), object_pairs_hook=collections.OrderedDict)
    busbw = d["node"]["link"]["busbw_gbps"]
    d["contention"] = collections.OrderedDict([
        ("comm_ctas", ctas), ("comm_ctas_full", full), ("gemm_cta_m", 256), ("gemm_cta_n", 256),
        ("extra_wave", True), ("comm_hbm_gbps_per_cta", round(2.5 * busbw / ctas, 2)),
        ("compute_extra", 0.0), ("comm_extra", extra), ("memory_bound_share", 0.75),
        ("source", "DATASHEET DEFAULTS AND ASSUMPTIONS, not measured on this machine (2026-12-02). "
                   + ctas_text + RULES + extra_text +
                   "Not fitted to any published result. TRIED, NOT SHIPPED (results/README.md).")])
    open(os.path.join(OUT, name + ".json"), "w").write(json.dumps(d, indent=2, ensure_ascii=False) + "\n")
    print(name, dict((k, v) for k, v in d["contention"].items() if k != "source"))
