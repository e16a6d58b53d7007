"""Measures, on one real GPU, the memory the serving fit check (serving/fit.py `replica_need`) uses.

vLLM sizes its budget from the device: at start it takes `torch.cuda.mem_get_info()`'s total, multiplies it
by --gpu-memory-utilization (`requested_memory`), and stops if less than that is free; weights and the KV
cache must fit in it. This script reports, with no model server and no weights (none can be fetched where
it runs):

  1. the device's total memory as nvidia-smi and PyTorch report it, beside the catalogue's `memoryGb`
     (components/data/accelerators.yaml) read as GB (1e9 bytes) and as GiB (2**30 bytes);
  2. what a CUDA context and cuBLAS take before any tensor (total - free after the first matmul);
  3. vLLM's `requested_memory` at the catalogue's default utilisation, and that one tensor of
     `requested_memory - context` bytes (weights plus KV cache at their largest) is allocatable.

Usage (on a machine with PyTorch, PyYAML and one GPU):
    python tools/gpu_memory_check.py --gpu-type nvidia-h200-141gb [--utilization 0.92]
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch
import yaml

ACCELERATORS = Path(__file__).resolve().parent.parent / "components" / "data" / "accelerators.yaml"
GIB = 2**30


def nvidia_smi() -> dict[str, str]:
    fields = "name,memory.total,driver_version"
    line = subprocess.run(
        ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()[0]
    return dict(zip(fields.split(","), (part.strip() for part in line.split(",")), strict=True))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--gpu-type", required=True, help="the accelerator's GKE name, as in accelerators.yaml"
    )
    parser.add_argument("--utilization", type=float, default=0.92)
    args = parser.parse_args()
    catalogue = yaml.safe_load(ACCELERATORS.read_text(encoding="utf-8"))["accelerators"]
    memory_gb = catalogue[args.gpu_type]["memoryGb"]
    if not torch.cuda.is_available():
        print("FAIL: no CUDA device visible to PyTorch", file=sys.stderr)
        return 1
    smi = nvidia_smi()
    device = torch.device("cuda", 0)
    torch.cuda.init()
    free_at_init, total = torch.cuda.mem_get_info(device)
    a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    (a @ a).sum().item()
    del a
    torch.cuda.empty_cache()
    free_after_matmul, _ = torch.cuda.mem_get_info(device)
    context = total - free_after_matmul
    requested = int(total * args.utilization)
    largest = requested - context
    block = torch.empty(largest, dtype=torch.uint8, device=device)
    block[-1] = 1
    torch.cuda.synchronize(device)
    allocated = block.numel()
    del block
    torch.cuda.empty_cache()
    print(
        json.dumps(
            {
                "gpuType": args.gpu_type,
                "nvidiaSmi": smi,
                "torch": torch.__version__,
                "totalBytes": total,
                "totalMiB": total // 2**20,
                "totalGiB": round(total / GIB, 2),
                "catalogueMemoryGb": memory_gb,
                "catalogueAsGB_bytes": int(memory_gb * 1e9),
                "catalogueAsGiB_bytes": memory_gb * GIB,
                "totalOverCatalogueGB": round(total / (memory_gb * 1e9), 4),
                "totalOverCatalogueGiB": round(total / (memory_gb * GIB), 4),
                "contextBytesAtInit": total - free_at_init,
                "contextBytesAfterMatmul": context,
                "utilization": args.utilization,
                "vllmRequestedBytes": requested,
                "fitCheckUsableBytesToday": int(memory_gb * 1e9 * args.utilization),
                "allocatedOneTensorBytes": allocated,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
