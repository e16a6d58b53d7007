"""Checks, on one real GPU, the model behind the serving load test's floors (serving/load_floors.py).

The floors assume that a decode step of a model of up to 8B parameters in 16 bits reads every weight
once, so at the load test's reference load (16 concurrent streams, ~260-token prompts, 128 output
tokens) a step takes about weights / memory bandwidth. This script measures, with no model server and
no downloaded weights (none can be fetched where it runs):

  1. the weight pass: one batch-16 matmul through every weight matrix of a Llama-3-8B-shaped model,
     captured in a CUDA graph, so the time is the GPU's and not Python's: the bound a server's
     decode step cannot beat;
  2. a real model: Hugging Face transformers' Llama with that shape and random weights, generating
     exactly 128 tokens for 16 prompts of 260 tokens, eagerly (no CUDA graphs, no paged attention):
     a server slower than any tuned one. Its output tokens a second, time to first token (the batch's
     prefill) and time per output token are comparable with the floors.

Usage (on a machine with PyTorch and transformers and one GPU):
    python tools/gpu_decode_check.py [--gpu-type nvidia-h200-141gb] [--layers 32]
Prints one line per figure and, last, the floors of the given GPU type for comparison.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

# Llama 3 8B: hidden 4096, MLP 14336, 32 layers, 32 query heads and 8 key/value heads of 128, vocab 128256.
HIDDEN, MLP, HEADS, KV_HEADS, VOCAB = 4096, 14336, 32, 8, 128256
BATCH, PROMPT_TOKENS, OUTPUT_TOKENS = 16, 260, 128


def weight_shapes(layers: int) -> list[tuple[int, int]]:
    head = HIDDEN // HEADS
    per_layer = [
        (HIDDEN, HIDDEN),  # q
        (KV_HEADS * head, HIDDEN),  # k
        (KV_HEADS * head, HIDDEN),  # v
        (HIDDEN, HIDDEN),  # o
        (MLP, HIDDEN),  # gate
        (MLP, HIDDEN),  # up
        (HIDDEN, MLP),  # down
    ]
    return per_layer * layers + [(VOCAB, HIDDEN)]


def weight_pass(layers: int, repeats: int = 20) -> tuple[float, float]:
    """Seconds per batch-16 pass through every weight, and the weights' bytes."""
    shapes = weight_shapes(layers)
    weights = [torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16) for rows, cols in shapes]
    inputs = {cols: torch.randn(BATCH, cols, device="cuda", dtype=torch.bfloat16) for _, cols in shapes}
    outputs: list[torch.Tensor] = []

    def step() -> None:
        outputs.clear()
        for weight in weights:
            outputs.append(inputs[weight.shape[1]] @ weight.T)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        graph.replay()
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / repeats
    return seconds, sum(rows * cols for rows, cols in shapes) * 2


def hf_generate(layers: int) -> dict[str, float]:
    """Eager transformers generation of the reference load with random weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=HIDDEN,
        intermediate_size=MLP,
        num_hidden_layers=layers,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        vocab_size=VOCAB,
        max_position_embeddings=8192,
    )
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).eval()
    torch.set_default_dtype(previous)
    parameters = sum(p.numel() for p in model.parameters())
    prompts = torch.randint(1000, VOCAB - 1, (BATCH, PROMPT_TOKENS), device="cuda")
    mask = torch.ones_like(prompts)
    with torch.inference_mode():
        model.generate(
            prompts, attention_mask=mask, max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=0
        )
        torch.cuda.synchronize()
        start = time.perf_counter()
        model(prompts, attention_mask=mask)
        torch.cuda.synchronize()
        prefill = time.perf_counter() - start
        start = time.perf_counter()
        out = model.generate(
            prompts,
            attention_mask=mask,
            max_new_tokens=OUTPUT_TOKENS,
            min_new_tokens=OUTPUT_TOKENS,
            do_sample=False,
            pad_token_id=0,
        )
        torch.cuda.synchronize()
        total = time.perf_counter() - start
    generated = (out.shape[1] - PROMPT_TOKENS) * BATCH
    return {
        "parameters": parameters,
        "generated": generated,
        "seconds": total,
        "output_tok_s": generated / total,
        "ttft_ms": prefill * 1000,
        "tpot_ms": (total - prefill) * 1000 / (OUTPUT_TOKENS - 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu-type", default="", help="catalog name whose floors to print")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--skip-generate", action="store_true")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("FAIL: no CUDA device", file=sys.stderr)
        return 1
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}", flush=True)

    seconds, size = weight_pass(args.layers)
    torch.cuda.empty_cache()
    bound = BATCH / seconds
    print(
        f"weight pass: {size / 1e9:.2f} GB of bf16 weights in {seconds * 1000:.2f} ms at batch {BATCH} "
        f"= {size / seconds / 1e12:.2f} TB/s read; bound {bound:.0f} output tok/s, "
        f"{seconds * 1000:.2f} ms a token",
        flush=True,
    )
    if not args.skip_generate:
        figures = hf_generate(args.layers)
        print(
            f"transformers eager, {figures['parameters'] / 1e9:.2f}B random weights, {BATCH} x "
            f"{PROMPT_TOKENS}-token prompts, {OUTPUT_TOKENS} output tokens each: "
            f"{figures['generated']:.0f} tokens in {figures['seconds']:.2f} s = "
            f"{figures['output_tok_s']:.0f} output tok/s, prefill (TTFT) {figures['ttft_ms']:.0f} ms, "
            f"TPOT {figures['tpot_ms']:.1f} ms",
            flush=True,
        )
    if args.gpu_type:
        # By file: the package's __init__ needs pulumi, which a GPU machine need not have.
        path = Path(__file__).resolve().parent.parent / "components" / "serving" / "load_floors.py"
        spec = importlib.util.spec_from_file_location("load_floors", path)
        assert spec and spec.loader
        load_floors = importlib.util.module_from_spec(spec)
        sys.modules["load_floors"] = load_floors  # dataclasses looks the module up
        spec.loader.exec_module(load_floors)
        floors = load_floors.default_floors(args.gpu_type)
        print(
            f"floors for {args.gpu_type}: at least {floors.min_output_tok_s:g} output tok/s, "
            f"P99 TTFT at most {floors.max_p99_ttft_ms:g} ms, "
            f"mean TPOT at most {floors.max_mean_tpot_ms:g} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
