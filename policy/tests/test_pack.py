"""The pack as the Pulumi CLI runs it: `python -m pulumi.policy` on policy/, driven over gRPC.

No Pulumi CLI needed: the test starts the pack the way `pulumi-analyzer-policy-python` does, then
makes the engine's calls (GetAnalyzerInfo, Configure, Analyze, AnalyzeStack) with the properties a
preview sends, unknowns as pulumi-policy's sentinel strings.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from policy.gke_gpu_policies import rules
from policy.tests.factories import gpu_pool, urn

PACK_DIR = Path(rules.__file__).resolve().parent.parent
NODE_POOL = "gcp:container/nodePool:NodePool"


@pytest.fixture(scope="module")
def analyzer() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    env = {**os.environ, "PULUMI_STACK": "prod", "PULUMI_PROJECT": "gke-gpu", "PULUMI_DRY_RUN": "true"}
    env.pop("PULUMI_CONFIG", None)
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:0", "."],
        cwd=PACK_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None  # stdout=PIPE
        ready, _, _ = select.select([process.stdout], [], [], 60)
        line = process.stdout.readline() if ready else ""
        if not line.strip().isdigit():
            process.kill()
            pytest.fail(f"the policy pack did not start: {line!r} {process.communicate(timeout=10)[1]}")
        channel = grpc.insecure_channel(f"127.0.0.1:{int(line)}")
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
        channel.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(value)
    return message


def test_the_pack_describes_its_policies(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == rules.PACK_NAME and info.supportsConfig
    assert [p.name for p in info.policies] == [p.name for p in rules.POLICIES]
    assert {p.enforcementLevel for p in info.policies} == {analyzer_pb2.MANDATORY}
    budget = next(p for p in info.policies if p.name == rules.GPU_BUDGET)
    assert budget.configSchema.properties["maxTotalGpus"]["default"] == 64


def test_the_pack_validates_a_preview(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    config = analyzer_pb2.PolicyConfig(
        enforcementLevel=analyzer_pb2.MANDATORY, properties=struct({"maxTotalGpus": 3})
    )
    analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={rules.GPU_BUDGET: config}))
    # No GPU taint (a violation); the node service account not known yet (no verdict, no note).
    pool = gpu_pool(**{"nodeConfig.taints": [], "nodeConfig.serviceAccount": UNKNOWN_STRING_VALUE})
    resource_urn = urn(NODE_POOL, "gpu-l4-pool")
    response = analyzer.Analyze(
        analyzer_pb2.AnalyzeRequest(
            type=NODE_POOL, properties=struct(pool), urn=resource_urn, name="gpu-l4-pool"
        )
    )
    assert [d.policyName for d in response.diagnostics] == [rules.GPU_POOL_TAINT]
    assert "GPU node pool 'gpu-l4-pool'" in response.diagnostics[0].message
    resource = analyzer_pb2.AnalyzerResource(
        type=NODE_POOL, properties=struct(pool), urn=resource_urn, name="gpu-l4-pool"
    )
    response = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=[resource]))
    [diagnostic] = response.diagnostics
    assert diagnostic.policyName == rules.GPU_BUDGET
    assert "stack 'prod': GPU node pools can scale to 4 GPUs, over the budget of 3" in diagnostic.message
