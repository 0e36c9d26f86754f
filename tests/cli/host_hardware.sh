#!/usr/bin/env bash
# validate/host-hardware.sh: nvidia-smi's GPU names to the shipped hardware file the device
# check and the GPU CLI test label profiles with; other parts of the same chip get none.
#   host_hardware.sh SOURCE_DIR
set -u
SRC=$1
fail=0
expect() {  # NAME FILE ("" = none, exit 1)
  local got rc
  got=$("$SRC/validate/host-hardware.sh" "$1")
  rc=$?
  if [ "$got" != "$2" ] || { [ -z "$2" ] && [ "$rc" != 1 ]; }; then
    echo "FAIL: '$1' -> '$got' (exit $rc), expected '$2'"
    fail=1
  elif [ -n "$2" ] && [ ! -e "$SRC/configs/hardware/$2.json" ]; then
    echo "FAIL: '$1' -> '$2', which is not a shipped hardware file"
    fail=1
  else
    echo "ok: '$1' -> '${2:-none}'"
  fi
}
expect "NVIDIA H200" h200x8
expect "NVIDIA H100 80GB HBM3" h100x8
expect "NVIDIA A100-SXM4-80GB" a100x8
expect "NVIDIA A800-SXM4-80GB" a800x8
expect "NVIDIA GeForce RTX 4090" rtx4090x8
expect "NVIDIA GeForce RTX 4090 D" ""
expect "NVIDIA A100-SXM4-40GB" ""
expect "NVIDIA H200 NVL" ""
expect "NVIDIA GH200 480GB" ""
expect "NVIDIA H100 PCIe" ""
expect "NVIDIA H100 NVL" ""
expect "Tesla T4" ""
exit $fail
