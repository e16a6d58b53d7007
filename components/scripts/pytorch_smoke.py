"""PyTorch GPU smoke test: proves CUDA works and reports what the GPU delivers.

Exits 0 only if a CUDA device is visible, a matmul on it matches the CPU result, and a timed
matmul completes; prints the device, its memory, the CUDA/driver versions and the throughput.
Environment: SMOKE_MATMUL_SIZE (default 8192), SMOKE_ITERATIONS (default 50),
SMOKE_ALLOW_CPU=1 runs on the CPU (for testing this script without a GPU).
"""

import os
import sys
import time

import torch


def pick_dtype(device: torch.device) -> torch.dtype:
    if device.type != "cuda":
        return torch.float32
    major, _ = torch.cuda.get_device_capability(device)
    return torch.bfloat16 if major >= 8 else torch.float16  # T4/V100 have no fast bf16


def check_correctness(device: torch.device) -> float:
    torch.backends.cuda.matmul.allow_tf32 = False
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(512, 512, generator=generator)
    b = torch.randn(512, 512, generator=generator)
    expected = a @ b
    got = (a.to(device) @ b.to(device)).cpu()
    return (got - expected).abs().max().item()


def measure(device: torch.device, size: int, iterations: int) -> tuple[float, torch.dtype]:
    dtype = pick_dtype(device)
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    synchronize(device)
    start = time.perf_counter()
    for _ in range(iterations):
        c = a @ b
    synchronize(device)
    elapsed = time.perf_counter() - start
    if not torch.isfinite(c.float()).all():
        raise RuntimeError("matmul produced non-finite values")
    return 2 * size**3 * iterations / elapsed / 1e12, dtype


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> int:
    size = int(os.environ.get("SMOKE_MATMUL_SIZE", "8192"))
    iterations = int(os.environ.get("SMOKE_ITERATIONS", "50"))
    print(f"torch {torch.__version__}, built for CUDA {torch.version.cuda}")
    if torch.cuda.is_available():
        device = torch.device("cuda", 0)
        props = torch.cuda.get_device_properties(device)
        print(
            f"device: {props.name}, compute capability {props.major}.{props.minor}, "
            f"{props.total_memory / 2**30:.1f} GiB, {torch.cuda.device_count()} visible"
        )
    elif os.environ.get("SMOKE_ALLOW_CPU") == "1":
        device = torch.device("cpu")
        print("device: cpu (SMOKE_ALLOW_CPU=1)")
    else:
        print("FAIL: no CUDA device visible to PyTorch", file=sys.stderr)
        return 1

    error = check_correctness(device)
    print(f"correctness: max |gpu - cpu| = {error:.2e} on a 512x512 float32 matmul")
    if error > 1e-3:
        print("FAIL: the device computed a wrong matmul", file=sys.stderr)
        return 1

    tflops, dtype = measure(device, size, iterations)
    name = str(dtype).removeprefix("torch.")
    print(f"throughput: {tflops:.1f} TFLOP/s ({size}x{size} {name} matmul, {iterations} iterations)")
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
