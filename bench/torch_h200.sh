#!/usr/bin/env bash
# The torch backend on an NVIDIA H200 (torch 2.11, triton 3.6, nvcc 13): NOT YET RUN.
# 1. The conformance behaviours on the GPU: the seed, a Triton point of torch/gemm's space and
#    a hostile module per fault (illegal address, out of memory, a kernel that never ends).
# 2. Every built-in torch task's seed against its baselines and comparisons (`ksearch eval`).
# 3. The cross-check the issue asks for: the same kernels timed by triton.testing.do_bench.
# 4. The builtin proposer on torch/gemm (target: 0.8x of torch.matmul at M=4096).
# Results go to bench/results/torch-h200/ as JSON beside their logs; summarise them in
# bench/RESULTS.md with the date, the GPU (nvidia-smi) and these commands.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results/torch-h200
mkdir -p "$out"
nvidia-smi | tee "$out/nvidia-smi.txt"
python3 -c 'import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())' | tee "$out/versions.txt"
cargo build --release --locked
K=target/release/ksearch

for task in torch/gemm torch/rmsnorm torch/gqa_paged_decode torch/kb_l1_softmax torch/kb_l1_rmsnorm \
  torch/kb_l1_matmul torch/kb_l2_conv2d_relu_biasadd torch/kb_l2_gemm_multiply_leakyrelu; do
  name=${task#torch/}
  $K eval "$task" --target cuda --json > "$out/eval-$name.json" 2> "$out/eval-$name.log" || true
done

# A Triton point of the GEMM space, evaluated like any candidate, then timed by do_bench.
$K space check torch/gemm --limit 200 > "$out/space-check.txt" 2>&1 || true
python3 bench/torch_do_bench.py "$out" > "$out/do_bench.json" 2> "$out/do_bench.log" || true

$K run torch/gemm --model builtin --iterations 30 --target cuda --run-dir "$out/runs" --json \
  > "$out/run-gemm.json" 2> "$out/run-gemm.log" || true
echo "done: $out (write bench/RESULTS.md from it)"
