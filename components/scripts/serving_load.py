"""The serving load test's client: wait for a model server, load it at a few concurrency levels, print
what it measured in `vllm bench serve`'s summary format, and judge the last level against floors.

Runs in the `serving-load` Job's Pod (standard library only, beside vllm_bench_judge.py):

    python3 serving_load.py --url http://chat.serve-chat.svc:8000 --model chat \
        --levels 1,4,16 --min-output-tok-s 120 --max-p99-ttft-ms 6000 --max-mean-tpot-ms 130

Each request is a streamed completion (`/v1/completions`) of a fixed prompt with `max_tokens` fixed and
`ignore_eos`, so every run asks for the same work. Time to first token is measured to the first chunk
that carries text; the token counts are the server's own (`usage`, which vLLM sends as the last chunk
with `stream_options.include_usage`). The last line is `SERVING-LOAD RESULT PASS|FAIL|ERROR ...`;
exit 0 on PASS, 1 on FAIL, 2 when the server never answered or sent something unreadable.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import time
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# Beside this script in the same ConfigMap (and in components/scripts/): found through sys.path above,
# which a type checker does not follow.
import vllm_bench_judge  # type: ignore[import-not-found]

# A fixed vocabulary and seed: every run sends the same prompts.
_WORDS = (
    *("cluster", "node", "pool", "accelerator", "tensor", "kernel", "memory", "bandwidth", "latency"),
    *("throughput", "scheduler", "queue", "replica", "gradient", "token", "context", "cache", "weights"),
    *("bucket", "stream", "request", "response", "model", "layer", "batch", "network", "policy"),
    *("namespace", "service", "metric", "alert", "dashboard", "quota", "borrow", "reclaim", "topology"),
)


@dataclass
class Outcome:
    """One request: when its first text came, when it ended, what the server counted."""

    ok: bool
    error: str = ""
    ttft_s: float = 0.0
    latency_s: float = 0.0
    prompt_tokens: int = 0
    output_tokens: int = 0
    chunk_gaps_s: list[float] = field(default_factory=list)


def prompts(count: int, words: int, seed: int = 2026) -> list[str]:
    """`count` distinct prompts of about `words` words each (roughly 1.3 tokens a word)."""
    rng = random.Random(seed)
    return [
        f"Request {i}. Continue this list of infrastructure terms: " + " ".join(rng.choices(_WORDS, k=words))
        for i in range(count)
    ]


def _connection(url: str, timeout: float) -> tuple[http.client.HTTPConnection, str]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url}")
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return cls(parts.hostname, parts.port, timeout=timeout), parts.path.rstrip("/")


def wait_ready(
    url: str,
    deadline_s: float,
    *,
    interval_s: float = 10.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Poll `/health` until it answers 200 or the deadline passes; '' when ready, else the last error."""
    end = clock() + deadline_s
    last = "no answer yet"
    while True:
        try:
            conn, base = _connection(url, timeout=10)
            conn.request("GET", f"{base}/health")
            status = conn.getresponse().status
            conn.close()
            if status == 200:
                return ""
            last = f"/health answered {status}"
        except (OSError, http.client.HTTPException) as exc:
            last = f"{type(exc).__name__}: {exc}"
        if clock() >= end:
            return last
        sleep(min(interval_s, max(0.0, end - clock())))


# In a Pod: the Kubernetes API's address and the Pod's service account token and CA (Kubernetes'
# "Accessing the Kubernetes API from a Pod").
API = "https://kubernetes.default.svc"
ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def gateway_address(
    namespace: str,
    name: str,
    deadline_s: float,
    *,
    read: Callable[[str], dict] | None = None,
    interval_s: float = 10.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[str, str]:
    """(the Gateway's first address, '') once GKE has given it one, or ('', the last error) at the
    deadline. `read` reads a path of the Kubernetes API (default: as the Pod's service account)."""
    read = read or _read_api
    path = f"/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/gateways/{name}"
    end = clock() + deadline_s
    last = "no address yet"
    while True:
        try:
            addresses = (read(path).get("status") or {}).get("addresses") or []
            if addresses and addresses[0].get("value"):
                return str(addresses[0]["value"]), ""
            last = f"gateway {namespace}/{name} has no address yet"
        except (OSError, ValueError, http.client.HTTPException) as exc:
            last = f"{type(exc).__name__}: {exc}"
        if clock() >= end:
            return "", last
        sleep(min(interval_s, max(0.0, end - clock())))


def _read_api(path: str) -> dict:
    import ssl
    import urllib.request

    token = Path(ACCOUNT_DIR, "token").read_text(encoding="utf-8").strip()
    context = ssl.create_default_context(cafile=f"{ACCOUNT_DIR}/ca.crt")
    request = urllib.request.Request(f"{API}{path}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        return json.loads(response.read())


def wait_serving(url: str, model: str, deadline_s: float, *, interval_s: float = 10.0) -> str:
    """Through a gateway (where /health is not the server's): retry one short completion until it
    succeeds or the deadline passes; '' when served, else the last error."""
    end = time.monotonic() + deadline_s
    while True:
        outcome = complete(url, model, "Hello", 8, 60)
        if outcome.ok:
            return ""
        if time.monotonic() >= end:
            return outcome.error
        time.sleep(min(interval_s, max(0.0, end - time.monotonic())))


def complete(url: str, model: str, prompt: str, max_tokens: int, timeout_s: float) -> Outcome:
    """One streamed completion, timed."""
    body = json.dumps(
        {
            "model": model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    start = time.perf_counter()
    outcome = Outcome(ok=False)
    try:
        conn, base = _connection(url, timeout=timeout_s)
        conn.request(
            "POST", f"{base}/v1/completions", body=body, headers={"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        if response.status != 200:
            outcome.error = f"HTTP {response.status}: {response.read(300).decode('utf-8', 'replace')}"
            conn.close()
            return outcome
        last_text_at = None
        for raw in response:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if chunk.get("error"):
                outcome.error = str(chunk["error"])[:300]
                conn.close()
                return outcome
            now = time.perf_counter()
            if any(choice.get("text") for choice in chunk.get("choices") or ()):
                if last_text_at is None:
                    outcome.ttft_s = now - start
                else:
                    outcome.chunk_gaps_s.append(now - last_text_at)
                last_text_at = now
            usage = chunk.get("usage")
            if usage:
                outcome.prompt_tokens = int(usage.get("prompt_tokens") or 0)
                outcome.output_tokens = int(usage.get("completion_tokens") or 0)
        conn.close()
        outcome.latency_s = time.perf_counter() - start
        if last_text_at is None:
            outcome.error = "the stream carried no text"
        elif not outcome.output_tokens:
            outcome.error = "the stream carried no usage (token counts)"
        else:
            outcome.ok = True
    except (OSError, http.client.HTTPException, ValueError) as exc:
        outcome.error = f"{type(exc).__name__}: {exc}"[:300]
    return outcome


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(outcomes: list[Outcome], concurrency: int, duration_s: float) -> str:
    """The figures, in `vllm bench serve`'s summary format (the labels vllm_bench_judge reads)."""
    done = [o for o in outcomes if o.ok]
    ttft = [o.ttft_s * 1000 for o in done]
    # Time per output token after the first, per request; vLLM's definition.
    tpot = [(o.latency_s - o.ttft_s) * 1000 / (o.output_tokens - 1) for o in done if o.output_tokens > 1]
    itl = [gap * 1000 for o in done for gap in o.chunk_gaps_s]
    inputs = sum(o.prompt_tokens for o in done)
    outputs = sum(o.output_tokens for o in done)
    duration = max(duration_s, 1e-9)
    rows = [
        ("Successful requests", len(done)),
        ("Failed requests", len(outcomes) - len(done)),
        ("Maximum request concurrency", concurrency),
        ("Benchmark duration (s)", round(duration_s, 2)),
        ("Total input tokens", inputs),
        ("Total generated tokens", outputs),
        ("Request throughput (req/s)", round(len(done) / duration, 2)),
        ("Output token throughput (tok/s)", round(outputs / duration, 2)),
        ("Total token throughput (tok/s)", round((inputs + outputs) / duration, 2)),
    ]
    sections = [
        ("Time to First Token", "TTFT", ttft),
        ("Time per Output Token (excl. 1st token)", "TPOT", tpot),
        ("Inter-token Latency", "ITL", itl),
    ]
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    lines += [f"{label + ':':<40} {value}" for label, value in rows]
    for title, short, values in sections:
        lines.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        lines.append(f"{'Mean ' + short + ' (ms):':<40} {statistics.fmean(values) if values else 0.0:.2f}")
        lines.append(f"{'Median ' + short + ' (ms):':<40} {_percentile(values, 50):.2f}")
        lines.append(f"{'P99 ' + short + ' (ms):':<40} {_percentile(values, 99):.2f}")
    lines.append("=" * 50)
    return "\n".join(lines)


def run_level(
    url: str, model: str, texts: list[str], concurrency: int, max_tokens: int, timeout_s: float
) -> tuple[list[Outcome], float]:
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        outcomes = list(pool.map(lambda text: complete(url, model, text, max_tokens, timeout_s), texts))
    return outcomes, time.perf_counter() - start


def _result(verdict: str, label: str, text: str) -> str:
    """The last line, which the Job's log is searched for."""
    return f"SERVING-LOAD RESULT {verdict}{' ' + label if label else ''}: {text}"


def _levels(text: str) -> list[int]:
    levels = [int(part) for part in text.split(",") if part.strip()]
    if not levels or any(level < 1 or level > 256 for level in levels):
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of concurrencies, 1 to 256")
    return levels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="", help="the service, e.g. http://chat.serve-chat.svc:8000")
    parser.add_argument(
        "--gateway", default="", help="instead of --url: <namespace>/<name> of the Inference Gateway to load"
    )
    parser.add_argument("--model", required=True, help="the served model name")
    parser.add_argument("--levels", type=_levels, default=[1, 4, 16])
    parser.add_argument(
        "--requests-per-level", type=int, default=0, help="default: 4 x concurrency, at least 16"
    )
    parser.add_argument("--prompt-words", type=int, default=200)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--wait-s", type=float, default=2700, help="how long to wait for /health")
    parser.add_argument("--request-timeout-s", type=float, default=600)
    parser.add_argument("--min-output-tok-s", type=float, required=True)
    parser.add_argument("--max-p99-ttft-ms", type=float, required=True)
    parser.add_argument("--max-mean-tpot-ms", type=float, required=True)
    parser.add_argument("--label", default="")
    args = parser.parse_args(argv)
    if bool(args.url) == bool(args.gateway):
        parser.error("give --url or --gateway (one of them)")

    if args.gateway:
        namespace, _, name = args.gateway.partition("/")
        print(f"waiting up to {args.wait_s:g} s for gateway {args.gateway}'s address", flush=True)
        address, error = gateway_address(namespace, name, args.wait_s)
        if error:
            print(
                f"SERVING-LOAD RESULT ERROR {args.label}: the gateway has no address: {error}".replace(
                    "  ", " "
                )
            )
            return 2
        args.url = f"http://{address}"
        print(f"waiting up to {args.wait_s:g} s for {args.url} to serve a completion", flush=True)
        error = wait_serving(args.url, args.model, args.wait_s)
    else:
        print(f"waiting up to {args.wait_s:g} s for {args.url}/health", flush=True)
        error = wait_ready(args.url, args.wait_s)
    if error:
        print(
            f"SERVING-LOAD RESULT ERROR {args.label}: the server did not become ready: {error}".replace(
                "  ", " "
            )
        )
        return 2
    # One short request first: it pays for the CUDA graphs' and caches' first use, not the levels.
    warm = complete(args.url, args.model, "Hello", 8, args.request_timeout_s)
    if not warm.ok:
        print(
            f"SERVING-LOAD RESULT ERROR {args.label}: the warm-up request failed: {warm.error}".replace(
                "  ", " "
            )
        )
        return 2
    floors = vllm_bench_judge.Floors(args.min_output_tok_s, args.max_p99_ttft_ms, args.max_mean_tpot_ms)
    failed_levels: list[str] = []
    text = ""
    for concurrency in args.levels:
        count = args.requests_per_level or max(16, 4 * concurrency)
        outcomes, duration = run_level(
            args.url,
            args.model,
            prompts(count, args.prompt_words),
            concurrency,
            args.max_tokens,
            args.request_timeout_s,
        )
        text = summary(outcomes, concurrency, duration)
        print(f"\nconcurrency {concurrency}, {count} requests of {args.max_tokens} output tokens", flush=True)
        print(text, flush=True)
        for o in outcomes:
            if not o.ok:
                print(f"failed request: {o.error}")
                break
        if len(outcomes) != sum(o.ok for o in outcomes):
            failed_levels.append(str(concurrency))
    # The floors hold at the last (highest) level: the reference load. Every level's requests must succeed.
    figures = vllm_bench_judge.parse(text)
    passed, lines = vllm_bench_judge.judge(figures, floors)
    print(f"\njudged at concurrency {args.levels[-1]} against the floors:")
    for line in lines:
        print(line)
    if failed_levels:
        passed = False
        print(f"FAIL failed requests at concurrency {', '.join(failed_levels)}")
    result = (
        f"output {figures['output_tok_s']:g} tok/s, {figures['request_throughput']:g} req/s, "
        f"TTFT mean {figures['mean_ttft_ms']:g} ms p99 {figures['p99_ttft_ms']:g} ms, "
        f"TPOT mean {figures['mean_tpot_ms']:g} ms at concurrency {args.levels[-1]}"
    )
    print(_result("PASS" if passed else "FAIL", args.label, result))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
