#!/usr/bin/env bash
# Prints the shipped hardware file (configs/hardware/NAME.json) of a GPU, by its name as
# nvidia-smi gives it: the argument, else this machine's first GPU. Prints nothing, and exits 1,
# for a GPU none of the files describes (another form factor of the same chip included: an
# H100 PCIe or NVL, an H200 NVL, a GH200 are not the SXM parts the files hold).
#
#   validate/host-hardware.sh                          # this machine's GPU
#   validate/host-hardware.sh "NVIDIA H100 80GB HBM3"  # -> h100x8
name=${1-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)}
case "$name" in
  *GH200* | *"H200 NVL"* | *"H100 PCIe"* | *"H100 NVL"* | *"A100-PCIE"* | *"A100 PCIe"*) exit 1 ;;
  *H200*) echo h200x8 ;;
  *"H100 80GB HBM3"* | *"H100 SXM"*) echo h100x8 ;;
  *A100-SXM4-80GB*) echo a100x8 ;;  # (an A100 40GB is another file's)
  *A800-SXM4-80GB*) echo a800x8 ;;
  "NVIDIA GeForce RTX 4090") echo rtx4090x8 ;;  # exactly: a 4090 D has fewer SMs
  *) exit 1 ;;
esac
