"""The serving load test's client (components/scripts/serving_load.py) against a fake OpenAI-compatible
server that streams like vLLM's `/v1/completions` (SSE `data:` chunks, a last chunk with `usage` when
`stream_options.include_usage` is set, then `data: [DONE]`)."""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.test_vllm_bench_judge import SCRIPT as JUDGE
from tests.test_vllm_bench_judge import judge_module as judge

# The client imports the judge by its name (sys.modules, where the judge's test put it) or from its
# own folder.
_spec = importlib.util.spec_from_file_location("serving_load", JUDGE.with_name("serving_load.py"))
assert _spec is not None and _spec.loader is not None
client = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = client  # dataclasses look their module up there
_spec.loader.exec_module(client)


@dataclass
class Behaviour:
    first_token_s: float = 0.005
    token_s: float = 0.001
    fail_every: int = 0  # answer HTTP 500 to every n-th completion
    unhealthy_first: int = 0  # /health answers 503 this many times
    no_usage: bool = False
    seen: list[dict] = field(default_factory=list)
    health_calls: int = 0


def _handler(behaviour: Behaviour) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            with lock:
                behaviour.health_calls += 1
                ready = behaviour.health_calls > behaviour.unhealthy_first
            self.send_response(200 if self.path == "/health" and ready else 503)
            self.end_headers()

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                behaviour.seen.append(body)
                count = len(behaviour.seen)
            if self.path != "/v1/completions" or (behaviour.fail_every and count % behaviour.fail_every == 0):
                self.send_response(500)
                self.end_headers()
                self.wfile.write(b'{"error": "boom"}')
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            time.sleep(behaviour.first_token_s)
            for i in range(body["max_tokens"]):
                if i:
                    time.sleep(behaviour.token_s)
                chunk = {"choices": [{"index": 0, "text": f" t{i}"}], "usage": None}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            if body.get("stream_options", {}).get("include_usage") and not behaviour.no_usage:
                usage = {"prompt_tokens": 40, "completion_tokens": body["max_tokens"], "total_tokens": 0}
                self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, Behaviour]]:
    behaviour = Behaviour()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(behaviour))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", behaviour
    httpd.shutdown()
    httpd.server_close()


def _run(
    url: str,
    capsys: pytest.CaptureFixture[str],
    *extra: str,
    floors: tuple[str, str, str] = ("1", "60000", "1000"),
) -> tuple[int, str]:
    argv = [
        *([f"--url={url}"] if url else []),
        "--model=chat",
        "--levels=1,3",
        "--requests-per-level=6",
        "--max-tokens=5",
        "--prompt-words=20",
        "--wait-s=5",
        f"--min-output-tok-s={floors[0]}",
        f"--max-p99-ttft-ms={floors[1]}",
        f"--max-mean-tpot-ms={floors[2]}",
        "--label=chat on test",
        *extra,
    ]
    code = client.main(argv)
    return code, capsys.readouterr().out


def test_a_healthy_server_passes_and_every_figure_is_measured(server, capsys) -> None:
    url, behaviour = server
    code, out = _run(url, capsys)
    assert code == 0, out
    assert out.splitlines()[-1].startswith("SERVING-LOAD RESULT PASS chat on test: output ")
    blocks = out.split("Serving Benchmark Result")[1:]
    assert len(blocks) == 2  # one summary per level
    last = judge.parse(blocks[-1])
    assert last["successful"] == 6 and last["failed"] == 0 and last["max_concurrency"] == 3
    assert "Total generated tokens:                  30" in blocks[-1]  # 6 x 5, the server's usage
    assert last["mean_ttft_ms"] >= 5  # the fake's first-token delay
    assert last["output_tok_s"] > 0 and last["request_throughput"] > 0
    # 1 warm-up + 6 + 6 requests, each a streamed completion asking for usage and a fixed length.
    assert len(behaviour.seen) == 13
    request = behaviour.seen[-1]
    assert request["model"] == "chat" and request["stream"] is True and request["ignore_eos"] is True
    assert request["stream_options"] == {"include_usage": True} and request["max_tokens"] == 5
    # The same prompts every run.
    assert [r["prompt"] for r in behaviour.seen[1:7]] == client.prompts(6, 20)


def test_floors_not_reached_fail(server, capsys) -> None:
    url, _ = server
    code, out = _run(url, capsys, floors=("1000000", "1", "0.001"))
    assert code == 1
    assert "FAIL output tok/s" in out and "FAIL p99 TTFT ms" in out and "FAIL mean TPOT ms" in out
    assert out.splitlines()[-1].startswith("SERVING-LOAD RESULT FAIL chat on test: ")


def test_failed_requests_at_any_level_fail(server, capsys) -> None:
    url, behaviour = server
    behaviour.fail_every = 4  # the 4th request is at level 1, the 8th and 12th at level 3
    code, out = _run(url, capsys)
    assert code == 1
    assert "failed request: HTTP 500" in out
    assert "FAIL failed requests at concurrency 1, 3" in out
    assert out.splitlines()[-1].startswith("SERVING-LOAD RESULT FAIL")


def test_it_waits_for_health_then_runs(server, capsys, monkeypatch) -> None:
    url, behaviour = server
    behaviour.unhealthy_first = 2
    real = client.wait_ready
    monkeypatch.setattr(client, "wait_ready", lambda u, d: real(u, d, interval_s=0.01))
    code, out = _run(url, capsys)
    assert code == 0 and behaviour.health_calls == 3, out


def test_a_server_that_never_answers_is_an_error_not_a_hang(capsys) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ticks = iter(range(0, 10_000, 10))
    assert client.wait_ready(f"http://127.0.0.1:{port}", 30, clock=lambda: next(ticks), sleep=lambda s: None)
    code, out = _run(f"http://127.0.0.1:{port}", capsys, "--wait-s=0")
    assert code == 2
    assert out.splitlines()[-1].startswith(
        "SERVING-LOAD RESULT ERROR chat on test: the server did not become ready"
    )


def test_a_stream_without_token_counts_is_a_failed_request(server, capsys) -> None:
    url, behaviour = server
    behaviour.no_usage = True
    code, out = _run(url, capsys)
    assert code == 2  # the warm-up request already fails
    assert "the stream carried no usage" in out


def test_the_summary_is_the_format_the_judge_reads() -> None:
    outcome = client.Outcome(ok=True, ttft_s=0.1, latency_s=0.5, prompt_tokens=10, output_tokens=5)
    outcome.chunk_gaps_s = [0.1, 0.1, 0.1, 0.1]
    figures = judge.parse(client.summary([outcome, client.Outcome(ok=False, error="x")], 2, 1.0))
    assert figures["successful"] == 1 and figures["failed"] == 1
    assert figures["mean_ttft_ms"] == pytest.approx(100)
    assert figures["mean_tpot_ms"] == pytest.approx(100)  # (500 - 100) / (5 - 1)
    assert figures["output_tok_s"] == pytest.approx(5) and figures["request_throughput"] == pytest.approx(1)


# ---- Through the Inference Gateway (a disaggregated service) ------------------------------------


def test_the_gateway_s_address_is_read_once_gke_gives_it_one() -> None:
    answers = iter([{}, {"status": {"addresses": []}}, {"status": {"addresses": [{"value": "10.0.0.7"}]}}])
    paths: list[str] = []

    def read(path: str) -> dict:
        paths.append(path)
        return next(answers)

    address, error = client.gateway_address("serve-chat", "chat", 60, read=read, sleep=lambda s: None)
    assert (address, error) == ("10.0.0.7", "")
    assert paths == ["/apis/gateway.networking.k8s.io/v1/namespaces/serve-chat/gateways/chat"] * 3


def test_a_gateway_that_never_gets_an_address_is_an_error_not_a_hang(capsys, monkeypatch) -> None:
    ticks = iter(range(0, 10_000, 10))

    def refused(path: str) -> dict:
        raise OSError("connection refused")

    address, error = client.gateway_address(
        "serve-chat", "chat", 30, read=refused, clock=lambda: next(ticks), sleep=lambda s: None
    )
    assert address == "" and error == "OSError: connection refused"
    monkeypatch.setattr(client, "_read_api", lambda path: {})
    code = client.main(
        [
            "--gateway=serve-chat/chat",
            "--model=chat",
            "--wait-s=0",
            "--min-output-tok-s=1",
            "--max-p99-ttft-ms=1",
            "--max-mean-tpot-ms=1",
            "--label=chat",
        ]
    )
    out = capsys.readouterr().out
    assert code == 2
    assert out.splitlines()[-1] == (
        "SERVING-LOAD RESULT ERROR chat: the gateway has no address: gateway serve-chat/chat has no "
        "address yet"
    )


def test_through_the_gateway_it_loads_the_address_and_skips_health(server, capsys, monkeypatch) -> None:
    url, behaviour = server
    host = url.removeprefix("http://")
    monkeypatch.setattr(client, "_read_api", lambda path: {"status": {"addresses": [{"value": host}]}})
    code, out = _run("", capsys, "--gateway=serve-chat/chat")
    assert code == 0, out
    # No /health (the gateway sends every path to the picker): a completion proves it serves.
    assert behaviour.health_calls == 0
    assert len(behaviour.seen) == 14  # the readiness completion, the warm-up, 6 + 6


def test_url_and_gateway_are_one_or_the_other(capsys) -> None:
    with pytest.raises(SystemExit):
        client.main(["--model=chat", "--min-output-tok-s=1", "--max-p99-ttft-ms=1", "--max-mean-tpot-ms=1"])
    assert "give --url or --gateway" in capsys.readouterr().err
