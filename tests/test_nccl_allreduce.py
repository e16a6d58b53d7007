"""NcclAllReduce (issue 10): the multi-node all-reduce JobSet queued by Kueue, declared alone under
mocks and checked against the Kubernetes schemas and the vendored JobSet/Kueue CRDs; its refusals;
the bandwidth floors; the script's judge and GPU health functions on canned output (run with bash,
offline); and the stack-file rules for the `nccl-allreduce` workload."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from gke_gpu.core.k8s import pod_security_level
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.gpudirect.flavors import FLAVORS, MACHINE_FLAVORS, GpuDirectFlavor
from gke_gpu.workloads.nccl_allreduce import (
    SCRIPT,
    NcclAllReduce,
    nccl_pod_spec,
    pod_parts,
)
from gke_gpu.workloads.nccl_allreduce_args import (
    FLOOR_FRACTION,
    FLOORS,
    PLAIN_TCP_ESTIMATE,
    RUNNERS,
    NcclAllReduceArgs,
    Transport,
    floor_for,
    max_message_bytes,
    size_text,
)
from tests.conftest import STANDARD_CLUSTER, config_error, settings
from tests.egress_eval import EGRESS_TO_DNS
from tests.kubernetes_schemas import validate
from tools.offline import RunResult, run_program
from tools.plan import kubernetes_objects, to_document

SCRIPT_PATH = Path(__file__).parents[1] / "components" / "scripts" / "nccl_allreduce.sh"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

MEGA: NcclAllReduceArgs = {
    "pool": "h100mega",
    "node_selector": {"cloud.google.com/gke-nodepool": "h100mega"},
    "tolerations": [GPU_TOLERATION],  # type: ignore[list-item]
    "machine_type": "a3-megagpu-8g",
    "accelerator": "nvidia-h100-mega-80gb",
    "gpus_per_node": 8,
    "nodes": 2,
    "max_nodes": 4,
    "gpudirect": GpuDirectFlavor.TCPXO,
    "cluster_queue": "gpu-h100mega",
}
L4: NcclAllReduceArgs = {
    "pool": "l4",
    "node_selector": {"cloud.google.com/gke-nodepool": "l4"},
    "tolerations": [GPU_TOLERATION],  # type: ignore[list-item]
    "machine_type": "g2-standard-24",
    "accelerator": "nvidia-l4",
    "gpus_per_node": 2,
    "nodes": 3,
    "cluster_queue": "gpu-l4",
    "namespace": "nccl-l4",
}


def declare(args: dict[str, Any], name: str = "nccl") -> RunResult:
    """NcclAllReduce alone under mocks; every child inside it; every object valid."""

    def program() -> dict[str, Any]:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1")
        test = NcclAllReduce(name, args, opts=pulumi.ResourceOptions(provider=provider))  # type: ignore[arg-type]
        return {
            "jobsetName": test.jobset_name,
            "namespace": test.namespace,
            "commands": test.commands,
            "floorGbps": test.floor_gbps,
        }

    result = run_program({}, program=program)
    assert result.error is None, result.error
    (top,) = [r for r in result.resources if r.type == "gke-gpu:index:NcclAllReduce"]
    for r in result.resources:
        if r is not top and r.type != "pulumi:providers:kubernetes":
            assert r.parent == top.urn, f"{r.name} is not a child of {top.name}"
    for obj in kubernetes_objects(to_document(result)):
        validate(obj)
    return result


@pytest.fixture(scope="module")
def mega() -> RunResult:
    return declare(dict(MEGA))


@pytest.fixture(scope="module")
def l4() -> RunResult:
    return declare(dict(L4))


def jobset_of(result: RunResult) -> dict[str, Any]:
    return result.one(JOBSET).inputs


def pod_of(result: RunResult) -> dict[str, Any]:
    (replicated,) = jobset_of(result)["spec"]["replicatedJobs"]
    return replicated["template"]["spec"]["template"]


# -- The component ----------------------------------------------------------------------------------


def test_declares_its_namespace_queue_script_policy_and_jobset(mega: RunResult) -> None:
    assert sorted(r.type for r in mega.resources if r.custom) == sorted(
        [
            "pulumi:providers:kubernetes",
            "kubernetes:core/v1:Namespace",
            LOCAL_QUEUE,
            "kubernetes:core/v1:ConfigMap",
            "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            JOBSET,
        ]
    )
    objects = [r for r in mega.resources if r.type.startswith("kubernetes:")]
    namespaces = {r.inputs["metadata"].get("namespace") for r in objects}
    assert namespaces == {None, "gpu-nccl"}  # the Namespace itself has none
    queue = mega.one(LOCAL_QUEUE).inputs
    assert queue["metadata"]["name"] == "nccl-h100mega"
    assert queue["spec"] == {"clusterQueue": "gpu-h100mega"}


def test_jobset_is_queued_bounded_and_indexed(mega: RunResult) -> None:
    jobset = jobset_of(mega)
    assert jobset["metadata"]["name"] == "nccl-h100mega"
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "nccl-h100mega"
    assert jobset["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert "provreq.kueue.x-k8s.io/maxRunDurationSeconds" not in jobset["metadata"]["annotations"]
    spec = jobset["spec"]
    assert spec["failurePolicy"] == {"maxRestarts": 0}
    assert spec["ttlSecondsAfterFinished"] == 86400
    assert spec["network"] == {
        "enableDNSHostnames": True,
        "subdomain": "nccl-h100mega",
        "publishNotReadyAddresses": True,
    }
    (replicated,) = spec["replicatedJobs"]
    assert replicated["name"] == "node" and replicated["replicas"] == 1
    job = replicated["template"]["spec"]
    assert (job["parallelism"], job["completions"], job["completionMode"]) == (2, 2, "Indexed")
    assert job["backoffLimit"] == 0
    assert (
        job["activeDeadlineSeconds"] == 4 * 3600
    )  # the wait for nodes counts; the script stops itself at 55 min


def test_each_pod_takes_every_gpu_of_its_node_after_a_health_gate(mega: RunResult) -> None:
    template = pod_of(mega)
    pod = template["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["restartPolicy"] == "Never"
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "h100mega"}
    assert pod["tolerations"] == [GPU_TOLERATION]
    (main,) = pod["containers"]
    assert main["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert main["resources"]["requests"]["nvidia.com/gpu"] == "8"
    # Requests well under an a3-megagpu-8g (208 vCPUs, 1872 GB); limits everywhere.
    assert main["resources"]["requests"]["cpu"] == "52"
    assert main["resources"]["requests"]["memory"] == "234Gi"
    assert set(main["resources"]["limits"]) == {"cpu", "memory", "ephemeral-storage", "nvidia.com/gpu"}
    health, rxdm = pod["initContainers"]
    assert health["name"] == "gpu-health"
    assert health["command"][-1] == "health"
    assert health["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert {"name": "NCCL_ALLREDUCE_GPUS", "value": "8"} in health["env"]
    assert {"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"} in health["env"]
    assert health["securityContext"]["runAsNonRoot"] is True
    assert health["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # TCPXO: the RxDM daemon as a native sidecar, after the gate; its devices annotation.
    assert rxdm["name"] == "tcpxo-daemon" and rxdm["restartPolicy"] == "Always"
    assert "devices.gke.io/container.tcpxo-daemon" in template["metadata"]["annotations"]
    assert template["metadata"]["annotations"]["networking.gke.io/default-interface"] == "eth0"


def test_the_test_container_runs_the_flavours_nccl_setup(mega: RunResult) -> None:
    (main,) = pod_of(mega)["spec"]["containers"]
    env = {e["name"]: e["value"] for e in main["env"]}
    assert main["image"] == RUNNERS[Transport.TCPXO].image
    assert main["command"] == ["bash", "/opt/nccl-allreduce/nccl_allreduce.sh", "run"]
    assert env["NCCL_ALLREDUCE_SETUP"] == "source ${NCCL_LIB_DIR}/nccl-env-profile.sh"
    assert env["NCCL_ALLREDUCE_NODES"] == "2" and env["NCCL_ALLREDUCE_GPUS"] == "8"
    assert env["NCCL_ALLREDUCE_JOBSET"] == "nccl-h100mega"
    assert env["NCCL_ALLREDUCE_SUBDOMAIN"] == "nccl-h100mega"
    assert env["NCCL_ALLREDUCE_REPLICATED_JOB"] == "node"
    assert env["NCCL_ALLREDUCE_FLOOR_GBPS"] == "151"
    assert env["NCCL_ALLREDUCE_FLOOR_NOTE"].startswith("measured, 80% of 188.7 GB/s")
    assert env["NCCL_ALLREDUCE_MAX_BYTES"] == "8G"
    assert env["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == "/dev/aperture_devices"
    assert main["securityContext"]["privileged"] is False
    assert main["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_a_script_change_replaces_the_jobset(mega: RunResult) -> None:
    script = mega.one("kubernetes:core/v1:ConfigMap").inputs
    digest = hashlib.sha256(script["data"]["nccl_allreduce.sh"].encode()).hexdigest()
    assert script["data"]["nccl_allreduce.sh"] == SCRIPT_PATH.read_text()
    assert jobset_of(mega)["metadata"]["annotations"]["gke-gpu/script-sha256"] == digest
    assert pod_of(mega)["metadata"]["annotations"]["gke-gpu/script-sha256"] == digest


def test_gpudirect_needs_privileged_and_plain_tcp_baseline(mega: RunResult, l4: RunResult) -> None:
    def level(result: RunResult) -> str:
        return result.one("kubernetes:core/v1:Namespace").inputs["metadata"]["labels"][
            "pod-security.kubernetes.io/enforce"
        ]

    assert level(mega) == "privileged"
    assert level(l4) == "baseline"
    reasons = mega.one("kubernetes:core/v1:Namespace").inputs["metadata"]["annotations"]
    assert "tcpxo-daemon adds NET_ADMIN" in reasons["gke-gpu/pod-security-reasons"]


def test_pod_security_level_follows_the_pod() -> None:
    assert pod_security_level({"containers": [{"name": "a"}]}) == ("baseline", [])
    assert pod_security_level({"volumes": [{"name": "h", "hostPath": {"path": "/sys"}}]})[0] == "privileged"
    added = {
        "containers": [{"name": "a", "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}}]
    }
    assert pod_security_level(added)[0] == "baseline"
    admin = {"containers": [{"name": "a", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]}
    assert pod_security_level(admin) == ("privileged", ["a adds NET_ADMIN"])
    assert pod_security_level({"hostNetwork": True, "containers": []})[0] == "privileged"


def test_plain_tcp_pod_passes_baseline_as_a_pod(l4: RunResult) -> None:
    """The plain-TCP Pod template, as a Pod, against Kubernetes' own schema; RuntimeDefault pod-wide."""
    template = pod_of(l4)
    validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": template["spec"]})
    pod = template["spec"]
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert [c["name"] for c in pod["initContainers"]] == ["gpu-health"]
    (main,) = pod["containers"]
    env = {e["name"]: e["value"] for e in main["env"]}
    assert env["NCCL_NET"] == "Socket" and env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert env["NCCL_ALLREDUCE_MAX_BYTES"] == "1G"
    assert env["NCCL_ALLREDUCE_FLOOR_GBPS"] == "0.15"
    assert main["image"] == RUNNERS[Transport.TCP].image
    assert (
        "annotations" not in template["metadata"]
        or "networking.gke.io/interfaces" not in (template["metadata"]["annotations"])
    )
    job = jobset_of(l4)["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["parallelism"] == job["completions"] == 3


def test_gpudirect_pod_passes_as_a_pod(mega: RunResult) -> None:
    validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod_of(mega)["spec"]})


def test_network_policy_admits_only_the_jobsets_pods_and_dns(mega: RunResult) -> None:
    policy = mega.one("kubernetes:networking.k8s.io/v1:NetworkPolicy").inputs["spec"]
    labels = pod_of(mega)["metadata"]["labels"]
    selector = policy["podSelector"]["matchLabels"]
    assert selector and all(labels[k] == v for k, v in selector.items())
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["ingress"] == [{"from": [{"podSelector": {"matchLabels": selector}}]}]
    same, dns = policy["egress"]
    assert same == {"to": [{"podSelector": {"matchLabels": selector}}]}
    assert dns == EGRESS_TO_DNS


def test_outputs(mega: RunResult) -> None:
    out = mega.outputs
    assert out["jobsetName"] == "nccl-h100mega"
    assert out["namespace"] == "gpu-nccl"
    assert out["floorGbps"] == pytest.approx(151.0)
    commands = out["commands"]
    assert set(commands) == {"wait", "logs", "result", "pods", "queue"}
    assert "jobset/nccl-h100mega" in commands["wait"]
    assert "batch.kubernetes.io/job-completion-index=0" in commands["logs"]
    assert "-c main" in commands["logs"]
    assert commands["result"].endswith("| grep 'NCCL-ALLREDUCE RESULT'")


def test_a_queued_pool_tolerates_gke_queued_and_sets_the_run_duration() -> None:
    result = declare({**MEGA, "queued": True, "min_bus_bandwidth_gbps": 100})
    jobset = jobset_of(result)
    # GKE holds the nodes for the script's own limit plus the pull and health gate before it starts:
    # with the script's limit alone (3600 for 3300 s) a slow pull lost the nodes mid-run.
    run = int(jobset["metadata"]["annotations"]["provreq.kueue.x-k8s.io/maxRunDurationSeconds"])
    env = {e["name"]: e["value"] for e in pod_of(result)["spec"]["containers"][0]["env"]}
    assert run == 5100
    assert run - int(env["NCCL_ALLREDUCE_DEADLINE_SECONDS"]) >= int(env["NCCL_ALLREDUCE_PEER_WAIT_SECONDS"])
    tolerations = pod_of(result)["spec"]["tolerations"]
    assert {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"} in tolerations
    assert result.outputs["floorGbps"] == 100
    env = {e["name"]: e["value"] for e in pod_of(result)["spec"]["containers"][0]["env"]}
    assert env["NCCL_ALLREDUCE_FLOOR_NOTE"] == "override, min_bus_bandwidth_gbps"


# The all-reduce runs on amd64 hosts only (its runner images; nccl_rules refuses the others): A4X's
# Arm flavour is left out here.
AMD64_FLAVORS = [f for f in GpuDirectFlavor if FLAVORS[f].arch == "amd64"]


@pytest.mark.parametrize("flavor", AMD64_FLAVORS)
def test_every_flavour_builds_a_valid_pod(flavor: GpuDirectFlavor) -> None:
    machine = next(m for m, f in MACHINE_FLAVORS.items() if f == flavor)
    accelerator = {
        "a3-highgpu-8g": "nvidia-h100-80gb",
        "a3-megagpu-8g": "nvidia-h100-mega-80gb",
        "a3-ultragpu-8g": "nvidia-h200-141gb",
    }[machine]
    spec = NcclAllReduce.check_args(
        "t", {**MEGA, "machine_type": machine, "accelerator": accelerator, "gpudirect": flavor}
    )
    pod = nccl_pod_spec(spec, pod_parts(spec), floor_for(machine, Transport(flavor)))
    validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod})
    (main,) = pod["containers"]
    assert main["image"] == RUNNERS[Transport(flavor)].image
    assert pod_security_level(pod)[0] == "privileged"


# -- Refusals ---------------------------------------------------------------------------------------


def refused(args: dict[str, Any]) -> str:
    """The InvalidArgsError message; and nothing was declared."""
    declared: list[str] = []

    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1")
        try:
            NcclAllReduce("nccl", args, opts=pulumi.ResourceOptions(provider=provider))  # type: ignore[arg-type]
        except InvalidArgsError as exc:
            declared.append(str(exc))

    result = run_program({}, program=program)
    assert result.error is None, result.error
    assert declared, "expected InvalidArgsError"
    assert [r.type for r in result.resources] == ["pulumi:providers:kubernetes"]
    return declared[0]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"nodes": 1}, "nodes: "),
        ({"nodes": 5}, "nodes: 5 is more than max_nodes 4"),
        (
            {"gpudirect": "RDMA"},
            "gpudirect: RDMA does not match machine type a3-megagpu-8g, whose flavour is TCPXO",
        ),
        ({"colour": "red"}, "colour: unknown key"),
        ({"gpus_per_node": 4}, "gpus_per_node: 4 is not a GPU count of a3-megagpu-8g; allowed: 8"),
        (
            {"machine_type": "a3-highgpu-8g"},
            "machine_type: 'a3-highgpu-8g' cannot carry nvidia-h100-mega-80gb",
        ),
        ({"accelerator": "nvidia-l5"}, "accelerator: 'nvidia-l5' is not a GPU of the catalog"),
        ({"pool": "x" * 41}, "pool: "),
        ({"min_bus_bandwidth_gbps": 0}, "min_bus_bandwidth_gbps: "),
    ],
)
def test_refuses_bad_args_by_name(change: dict[str, Any], expected: str) -> None:
    assert expected in refused({**MEGA, **change})


def test_refuses_gpudirect_on_a_machine_without_it() -> None:
    message = refused({**L4, "gpudirect": "TCPX"})
    assert "gpudirect: TCPX is not allowed: 'g2-standard-24' has no GPUDirect NICs" in message


def test_refuses_an_arm64_rack_without_its_compute_domain() -> None:
    # GB200's Arm hosts run the Arm build of the test image, over NVLink through a ComputeDomain only
    # (tests/test_compute_domain.py); without one the test is refused.
    message = refused(
        {
            **L4,
            "machine_type": "a4x-highgpu-4g",
            "accelerator": "nvidia-gb200",
            "gpus_per_node": 4,
        }
    )
    assert "compute_domain: required on nvidia-gb200" in message


def test_names_every_bad_arg_at_once() -> None:
    message = refused({**MEGA, "nodes": 9, "gpudirect": "TCPX"})
    assert "nodes: 9 is more than max_nodes 4" in message
    assert "gpudirect: TCPX does not match" in message


# -- Floors -----------------------------------------------------------------------------------------


def test_every_gpudirect_machine_has_a_floor_for_its_flavour() -> None:
    for machine, flavor in MACHINE_FLAVORS.items():
        if flavor not in AMD64_FLAVORS:
            continue
        floor = floor_for(machine, Transport(flavor))
        assert floor.kind in {"measured", "estimate"}, machine
        assert floor.source and floor.figure_gbps


def test_floors_are_a_fraction_of_their_figures() -> None:
    assert FLOOR_FRACTION == 0.8
    for key, floor in FLOORS.items():
        assert floor.gbps == round(floor.figure_gbps * FLOOR_FRACTION, 1), key  # type: ignore[operator]
    expected = {
        ("a3-highgpu-8g", Transport.TCPX): (52.6, "measured"),
        ("a3-edgegpu-8g", Transport.TCPX): (52.6, "estimate"),
        ("a3-megagpu-8g", Transport.TCPXO): (151.0, "measured"),
        ("a3-ultragpu-8g", Transport.RDMA): (260.4, "measured"),
        ("a4-highgpu-8g", Transport.RDMA): (260.4, "estimate"),
    }
    assert {k: (f.gbps, f.kind) for k, f in FLOORS.items()} == expected


def test_plain_tcp_elsewhere_is_a_conservative_estimate_and_an_override_wins() -> None:
    assert floor_for("g2-standard-8", Transport.TCP) is PLAIN_TCP_ESTIMATE
    # A3 High without GPUDirect too: the only figure is from GCE VMs with an unknown NIC count.
    assert floor_for("a3-highgpu-8g", Transport.TCP) is PLAIN_TCP_ESTIMATE
    assert "80%" not in PLAIN_TCP_ESTIMATE.note  # no figure, no fraction of one
    assert PLAIN_TCP_ESTIMATE.kind == "estimate" and PLAIN_TCP_ESTIMATE.gbps <= 0.25
    override = floor_for("a3-megagpu-8g", Transport.TCPXO, 42.0)
    assert (override.gbps, override.kind) == (42.0, "override")
    with pytest.raises(KeyError):
        floor_for("g2-standard-8", Transport.RDMA)


def test_message_sizes_fit_the_gpu() -> None:
    assert size_text(max_message_bytes(Transport.RDMA, 141)) == "8G"
    assert size_text(max_message_bytes(Transport.TCP, 80)) == "1G"
    assert size_text(max_message_bytes(Transport.RDMA, 16)) == "4G"
    assert size_text(max_message_bytes(Transport.TCP, 2)) == "512M"


# -- The script, offline ---------------------------------------------------------------------------


HEADER = "\n".join(
    [
        "# nThread 1 nGpus 1 minBytes 1024 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20",
        "#",
        "nccl-h100mega-node-0-0:77:77 [0] NCCL INFO Using network FasTrak",
        "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "            (us)  (GB/s)  (GB/s)",
        "",
    ]
)


def _scaled(value: str, factor: float) -> str:
    try:
        return f"{float(value) * factor:.2f}"
    except ValueError:
        return value


def table(rows: list[tuple[int, str, str]], out_of_bounds: str = "0 OK") -> str:
    """nccl-tests' table with each row's algbw (busbw / 1.875 at 16 ranks) and in-place busbw (a
    little lower) distinct from the out-of-place busbw, so a judge reading the wrong column fails."""
    lines = [
        f"{size:>12} {size // 4:>13}     float     sum      -1   100.0  {_scaled(bus, 1 / 1.875)}  {bus}"
        f"  {wrong:>5}   99.0  {_scaled(bus, 1 / 1.875 * 0.97)}  {_scaled(bus, 0.97)}  {wrong:>5}"
        for size, bus, wrong in rows
    ]
    return (
        HEADER
        + "\n".join(lines)
        + f"\n# Out of bounds values : {out_of_bounds}\n# Avg bus bandwidth    : 50.0\n#\n"
    )


def bash(
    snippet: str, *, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Source the script as a library (it only defines functions) and run `snippet`."""
    return subprocess.run(
        ["bash", "-c", f'source "{SCRIPT_PATH}"; {snippet}'],
        input=stdin,
        env={"PATH": os.environ["PATH"], "NCCL_ALLREDUCE_LIB": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def judge(output: str, floor: str = "150") -> subprocess.CompletedProcess[str]:
    return bash(f'nccl_judge "{floor}" "measured, a source"', stdin=output)


def test_the_component_ships_the_script_it_tests() -> None:
    assert SCRIPT_PATH.read_text() == SCRIPT
    assert bash("true").returncode == 0 and bash("true").stdout == "", "sourcing runs nothing"


def test_judge_passes_at_or_above_the_floor_at_the_largest_size() -> None:
    done = judge(table([(1024, "0.01", "0"), (8589934592, "188.73", "0"), (4294967296, "120.00", "0")]))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == (
        "NCCL-ALLREDUCE RESULT: PASS out-of-place busbw 188.73 GB/s at 8589934592 bytes, floor 150 GB/s; "
        "floor: measured, a source; NCCL network: FasTrak\n"
    )


def test_judge_fails_below_the_floor() -> None:
    done = judge(table([(1024, "0.01", "0"), (8589934592, "149.99", "0")]))
    assert done.returncode == 1
    assert done.stdout.startswith(
        "NCCL-ALLREDUCE RESULT: FAIL out-of-place busbw 149.99 GB/s at 8589934592 bytes "
        "is below the floor 150 GB/s"
    )


def test_judge_reads_mpirun_tagged_lines_and_no_data_check() -> None:
    tagged = "\n".join(f"[1,0]<stdout>:{line}" for line in table([(1073741824, "200.5", "N/A")]).splitlines())
    done = judge(tagged)
    assert done.returncode == 0, done.stdout
    assert "busbw 200.5 GB/s at 1073741824 bytes" in done.stdout


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("", "no all_reduce_perf result rows"),
        ("mpirun: command not found\n", "no all_reduce_perf result rows"),
        (HEADER, "no all_reduce_perf result rows"),
        (table([(8589934592, "x.y", "0")]), "unreadable output: row for 8589934592 bytes unreadable"),
        ("    8589934592    2147483648   float\n", "unreadable output"),
        (table([(8589934592, "300.0", "7")]), "FAIL 14 wrong results"),
        (table([(8589934592, "300.0", "0")], out_of_bounds="3 FAILED"), "FAIL 3 out-of-bounds values"),
    ],
)
def test_judge_fails_on_empty_malformed_or_wrong_output(output: str, reason: str) -> None:
    done = judge(output)
    assert done.returncode == 1
    assert done.stdout.startswith("NCCL-ALLREDUCE RESULT: FAIL")
    assert reason in done.stdout


def test_judge_refuses_a_floor_that_is_not_a_number() -> None:
    done = judge(table([(8589934592, "300.0", "0")]), floor="")
    assert done.returncode == 1 and "is not a number" in done.stdout


def fake_smi(tmp_path: Path, body: str) -> str:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + body)
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    return str(smi)


@pytest.mark.parametrize(
    ("body", "ok", "expected"),
    [
        ("printf '0, 0\\n1, 0\\n'\n", True, "PASS 2 GPUs, no uncorrectable volatile ECC errors"),
        ("printf '0, [N/A]\\n1, [N/A]\\n'\n", True, "GPU 0 does not report ECC errors"),
        ("printf '0, 0\\n'\n", False, "FAIL 1 GPUs visible, expected 2"),
        ("printf '0, 0\\n1, 3\\n'\n", False, "FAIL GPU 1 has 3 uncorrectable volatile ECC errors"),
        ("printf '0, 0\\n1, [Unknown Error]\\n'\n", False, "FAIL GPU 1: uncorrectable ECC count unreadable"),
        ("echo 'NVIDIA-SMI has failed'; exit 9\n", False, "FAIL nvidia-smi failed: NVIDIA-SMI has failed"),
    ],
)
def test_gpu_health(tmp_path: Path, body: str, ok: bool, expected: str) -> None:
    done = bash("gpu_health 2", env={"NVIDIA_SMI": fake_smi(tmp_path, body)})
    assert (done.returncode == 0) is ok, done.stdout + done.stderr
    assert expected in done.stdout


def test_script_modes_and_usage(tmp_path: Path) -> None:
    smi = fake_smi(tmp_path, "printf '0, 0\\n'\n")
    env = {"PATH": os.environ["PATH"], "NCCL_ALLREDUCE_GPUS": "1", "NVIDIA_SMI": smi}
    health = subprocess.run(
        ["bash", str(SCRIPT_PATH), "health"], env=env, capture_output=True, text=True, check=False
    )
    assert health.returncode == 0 and "PASS 1 GPUs" in health.stdout
    usage = subprocess.run(["bash", str(SCRIPT_PATH)], env=env, capture_output=True, text=True, check=False)
    assert usage.returncode == 2 and "usage" in usage.stderr


# -- Stack-file rules -------------------------------------------------------------------------------

MEGA_POOL = {"name": "mega", "accelerator": "nvidia-h100-mega-80gb", "gpusPerNode": 8, "maxNodes": 2}


def stack(*pools: dict[str, Any], workloads: list[Any], kueue: bool = True, **extra: Any) -> dict[str, Any]:
    return {
        "cluster": STANDARD_CLUSTER,
        "gpuPools": list(pools),
        "workloads": workloads,
        "batch": {"kueue": kueue},
        **extra,
    }


def test_stack_accepts_nccl_allreduce_with_kueue_and_defaults_two_nodes() -> None:
    (workload,) = settings(stack(MEGA_POOL, workloads=["nccl-allreduce"])).workloads
    assert (workload.name, workload.pool, workload.nodes) == ("nccl-allreduce", "mega", 2)


def test_stack_needs_kueue() -> None:
    message = config_error(stack(MEGA_POOL, workloads=[{"name": "nccl-allreduce"}], kueue=False))
    assert "gke-gpu:workloads[0].name: 'nccl-allreduce' needs gke-gpu:batch.kueue: true" in message
    assert "1 problem(s)" in message


def test_stack_needs_a_standard_cluster() -> None:
    raw = {
        "cluster": {"mode": "autopilot", "name": "gpu-test"},
        "gpuPools": [{"name": "l4", "accelerator": "nvidia-l4"}],
        "workloads": ["nccl-allreduce"],
    }
    message = config_error(raw)
    assert "gke-gpu:workloads[0].name: 'nccl-allreduce' is not allowed with cluster.mode autopilot" in message


def test_stack_nodes_only_for_nccl_allreduce() -> None:
    message = config_error(stack(MEGA_POOL, workloads=[{"name": "nvidia-smi", "pool": "mega", "nodes": 2}]))
    assert "gke-gpu:workloads[0].nodes: only allowed for nccl-allreduce (name is nvidia-smi)" in message
    message = config_error(stack(MEGA_POOL, workloads=[{"name": "nccl-allreduce", "replicas": 2}]))
    assert "gke-gpu:workloads[0].replicas: only allowed for sharing-demo" in message


def test_stack_nodes_within_the_pools_max_nodes() -> None:
    message = config_error(stack(MEGA_POOL, workloads=[{"name": "nccl-allreduce", "nodes": 3}]))
    assert "gke-gpu:workloads[0].nodes: 3 is more than the maxNodes 2 of pool 'mega'" in message
    small = {**MEGA_POOL, "maxNodes": 1}
    message = config_error(stack(small, workloads=["nccl-allreduce"]))
    assert "gke-gpu:workloads[0].nodes: 2 (the default) is more than the maxNodes 1 of pool 'mega'" in message
    assert "1 problem(s)" in message
    assert settings(stack({**MEGA_POOL, "maxNodes": 4}, workloads=[{"name": "nccl-allreduce", "nodes": 4}]))


@pytest.mark.parametrize(
    ("pool", "fragment"),
    [
        (
            {
                "name": "l4",
                "accelerator": "nvidia-l4",
                "maxNodes": 2,
                "sharing": {"strategy": "TIME_SHARING", "maxClientsPerGpu": 2},
            },
            "'l4' shares its GPUs (sharing TIME_SHARING); nccl-allreduce takes every whole GPU",
        ),
        (
            {
                "name": "a100",
                "accelerator": "nvidia-tesla-a100",
                "maxNodes": 2,
                "migPartitionSize": "3g.20gb",
            },
            "'a100' splits its GPUs (migPartitionSize 3g.20gb)",
        ),
    ],
)
def test_stack_refuses_shared_or_mig_pools(pool: dict[str, Any], fragment: str) -> None:
    message = config_error(stack(pool, workloads=["nccl-allreduce"]))
    assert f"gke-gpu:workloads[0].pool: {fragment}" in message
    assert "1 problem(s)" in message


def test_stack_allows_a_queued_pool_for_nccl_allreduce_only() -> None:
    queued = {**MEGA_POOL, "queuedProvisioning": True}
    (workload,) = settings(stack(queued, workloads=["nccl-allreduce"])).workloads
    assert workload.pool == "mega"
    message = config_error(stack(queued, workloads=[{"name": "nvidia-smi"}]))
    assert "gke-gpu:workloads[0].pool: 'mega' uses queued provisioning" in message


def test_stack_refuses_arm64_pools_for_the_amd64_samples() -> None:
    # The all-reduce has an Arm build for racks (tests/test_compute_domain.py); pytorch-smoke has none.
    gb200 = {
        "name": "gb200",
        "accelerator": "nvidia-gb200",
        "maxNodes": 2,
        "driverVersion": "LATEST",
        "workloadPolicy": True,
        "reservation": {"type": "SPECIFIC", "name": "rack"},
    }
    message = config_error(stack(gb200, workloads=["pytorch-smoke"]))
    assert "gke-gpu:workloads[0].pool: 'gb200' (nvidia-gb200) has arm64 hosts" in message
    assert "1 problem(s)" in message


# -- The run flow, offline: stand-ins for sshd, ssh and mpirun -------------------------------------


@pytest.fixture
def listening_port():
    """A local port that accepts connections: the stand-in for the Pod's sshd."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield server.getsockname()[1]
    server.close()


def run_flow(tmp_path: Path, port: int, snippet: str, *, rank: str, mpirun_rc: int = 0, **env: str):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    # ssh: the remote command runs here (the last argument); `true` is the reachability probe.
    (bin_dir / "ssh").write_text(
        '#!/bin/sh\necho "ssh $*" >> "$CALLS"\nfor last; do :; done\n'
        'if [ "$last" = true ]; then exit 0; fi\nsh -c "$last"\n'
    )
    (tmp_path / "table.txt").write_text(table([(1024, "0.01", "0"), (8589934592, "188.73", "0")]))
    (bin_dir / "mpirun").write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path}/mpirun.args"\n'
        f'env > "{tmp_path}/mpirun.env"\ncat "{tmp_path}/table.txt"\nexit {mpirun_rc}\n'
    )
    for tool in ("ssh", "mpirun"):
        (bin_dir / tool).chmod(0o755)
    settings_env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "NCCL_ALLREDUCE_LIB": "1",
        "CALLS": str(log),
        "JOB_COMPLETION_INDEX": rank,
        "NCCL_ALLREDUCE_NODES": "2",
        "NCCL_ALLREDUCE_GPUS": "8",
        "NCCL_ALLREDUCE_JOBSET": "nccl-mega",
        "NCCL_ALLREDUCE_REPLICATED_JOB": "node",
        "NCCL_ALLREDUCE_SUBDOMAIN": "nccl-mega",
        "NCCL_ALLREDUCE_FLOOR_GBPS": "151",
        "NCCL_ALLREDUCE_FLOOR_NOTE": "measured, a source",
        "NCCL_ALLREDUCE_TESTS_DIR": "/third_party/nccl-tests-mpi/build",
        "NCCL_ALLREDUCE_MAX_BYTES": "8G",
        "NCCL_ALLREDUCE_SSHD": f"echo sshd-started >> {log}",
        "NCCL_ALLREDUCE_SETUP": "export NCCL_FROM_SETUP=yes",
        "NCCL_ALLREDUCE_LAUNCH_PREFIX": "taskset -c 32-63",
        "NCCL_ALLREDUCE_SSH_PORTS": str(port),
        "NCCL_ALLREDUCE_WORKDIR": str(tmp_path / "work"),
        "NCCL_ALLREDUCE_POLL_SECONDS": "1",
        "NCCL_SOCKET_IFNAME": "eth0",
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64",
        **env,
    }
    # The stand-in for sleep moves bash's clock (SECONDS, which the script's deadlines and waits read)
    # on by the seconds asked for, at once: a wait that gives up, or a peer that polls to its deadline,
    # takes the same steps and prints the same lines, without whole seconds of real sleeping. A flow
    # that would sleep past the 60 s this run allows ends there, 124 as from timeout(1).
    script = (
        f'source "{SCRIPT_PATH}"; test_slept=0; sleep() {{ test_slept=$((test_slept + $1)); '
        '[ "$test_slept" -lt 60 ] || exit 124; SECONDS=$((SECONDS + $1)); }; '
        f'DEADLINE=$((SECONDS + 20)); mkdir -p "$NCCL_ALLREDUCE_WORKDIR"; {snippet}'
    )
    done = subprocess.run(
        ["bash", "-c", script], env=settings_env, capture_output=True, text=True, timeout=60, check=False
    )
    return done, log


def test_rank0_runs_all_reduce_over_every_rank_and_tells_its_peers(
    tmp_path: Path, listening_port: int
) -> None:
    done, log = run_flow(tmp_path, listening_port, "start_sshd && run_rank0", rank="0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "NCCL-ALLREDUCE RESULT: PASS out-of-place busbw 188.73 GB/s at 8589934592 bytes, floor 151"
        in done.stdout
    )
    calls = log.read_text()
    assert "sshd-started" in calls
    peer = "nccl-mega-node-0-1.nccl-mega"
    assert f"-p {listening_port} {peer} true" in calls, "waited for rank 1's sshd"
    hostfile = (tmp_path / "work" / "hostfile").read_text().splitlines()
    assert hostfile == [
        f"nccl-mega-node-0-0.nccl-mega port={listening_port} slots=8",
        f"{peer} port={listening_port} slots=8",
    ]
    args = (tmp_path / "mpirun.args").read_text().splitlines()
    assert args[args.index("-np") + 1] == "16"
    exported = {args[i + 1] for i, a in enumerate(args) if a == "-x"}
    assert {"NCCL_FROM_SETUP", "NCCL_SOCKET_IFNAME", "NCCL_DEBUG", "LD_LIBRARY_PATH", "PATH"} <= exported
    assert not any(name.startswith("NCCL_ALLREDUCE_") for name in exported)
    tail = args[args.index("taskset") :]
    assert tail[:3] == ["taskset", "-c", "32-63"]
    assert tail[3] == "/third_party/nccl-tests-mpi/build/all_reduce_perf"
    assert tail[4:] == ["-b", "1K", "-e", "8G", "-f", "2", "-g", "1", "-w", "5", "-n", "20", "-c", "1"]
    # Rank 1 was told the verdict (its done flag, written over ssh).
    assert (tmp_path / "work" / "done").read_text().strip() == "0"


def test_rank0_fails_when_mpirun_fails_even_with_a_table(tmp_path: Path, listening_port: int) -> None:
    done, _ = run_flow(tmp_path, listening_port, "start_sshd && run_rank0", rank="0", mpirun_rc=3)
    assert done.returncode == 1
    assert "NCCL-ALLREDUCE RESULT: FAIL mpirun exited 3" in done.stdout
    assert "RESULT: PASS" not in done.stdout  # one verdict, never a PASS on a failed run
    assert (tmp_path / "work" / "done").read_text().strip() == "1"


def test_rank0_fails_when_the_setup_fails(tmp_path: Path, listening_port: int) -> None:
    done, _ = run_flow(
        tmp_path,
        listening_port,
        "start_sshd && run_rank0",
        rank="0",
        NCCL_ALLREDUCE_SETUP="source /nonexistent",
    )
    assert done.returncode == 1
    assert "NCCL-ALLREDUCE RESULT: FAIL the NCCL setup 'source /nonexistent' failed" in done.stdout
    assert not (tmp_path / "mpirun.args").exists()


def test_a_peer_ends_when_rank0_is_done(tmp_path: Path, listening_port: int) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "done").write_text("0\n")
    done, _ = run_flow(tmp_path, listening_port, "start_sshd && run_peer", rank="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rank 0 is done (its verdict: 0)" in done.stdout


def test_a_peer_gives_up_at_its_deadline(tmp_path: Path, listening_port: int) -> None:
    done, _ = run_flow(
        tmp_path, listening_port, "start_sshd && DEADLINE=$((SECONDS + 1)) && run_peer", rank="1"
    )
    assert done.returncode == 1
    assert "deadline reached before rank 0 finished" in done.stdout


def test_no_sshd_fails_the_pod(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done, _ = run_flow(tmp_path, port, "DEADLINE=$((SECONDS + 1)); start_sshd", rank="0")
    assert done.returncode == 1
    assert f"sshd is not listening on port {port}" in done.stdout


DEVICE_OUTPUTS = Path(__file__).parent / "device"


@pytest.mark.parametrize("version", ["v2.19.6", "v2.13.13"])
def test_the_judge_reads_real_all_reduce_perf_output(version: str) -> None:
    """all_reduce_perf's own table, as nccl-tests printed it on an H100 (tests/device/README.md): the
    judge takes the largest size's out-of-place busbw (one rank: 0.00) and holds it to the floor."""
    output = (DEVICE_OUTPUTS / f"all_reduce_perf-{version}-h100.txt").read_text(encoding="utf-8")
    passed = judge(output, floor="0")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "PASS out-of-place busbw 0.00 GB/s at 268435456 bytes" in passed.stdout
    failed = judge(output, floor="1")
    assert failed.returncode == 1
    assert "FAIL out-of-place busbw 0.00 GB/s at 268435456 bytes is below the floor 1 GB/s" in failed.stdout
