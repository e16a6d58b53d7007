"""GpuDirectSoftware's DaemonSets against Google's own manifests, field by field.

The manifests are vendored verbatim under tests/upstream/container-engine-accelerators (source,
commit and blob in its SOURCES.md). For each DaemonSet the program declares, its tolerations, host
paths, volume mounts, images, host namespaces, priority and install script must equal upstream's;
every place it differs is listed in DIFFERENCES with the reason, so a new difference (or an upstream
change, once the vendored copy is bumped) fails here until someone writes down why.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_gpu.core.image_digests import pinned
from gke_gpu.gpudirect import images
from gke_gpu.gpudirect.flavors import FLAVORS, GpuDirectFlavor
from tests.test_gpudirect_software import construct, nic_networks

UPSTREAM = Path(__file__).parent / "upstream" / "container-engine-accelerators"
# The commit gpudirect/images.py and gpudirect/software.py name.
COMMIT = "992db81257553607f1477945f1b3219632991829"
# path -> git blob id at COMMIT (git rev-parse COMMIT:path); checked below, so the copy stays verbatim.
VENDORED = {
    "gpudirect-tcpx/nccl-tcpx-installer.yaml": "b44cefbb0fde25e90bcc7a28c2344d293b2c8cfb",
    "gpudirect-tcpxo/nccl-tcpxo-installer.yaml": "f2f4a90ba328e24186fe7ca5fc416bf100c76fcd",
    "gpudirect-rdma/nccl-rdma-installer.yaml": "a63203bb5b3efaae8ab8f126d0c7e3044fb54459",
    "gpudirect-rdma/nccl-rdma-installer-a4x.yaml": "4ab44755869579d20355f745042e5aceb551a5bf",
    "nri_device_injector/nri-device-injector.yaml": "33afc449907a97610b25af2b9e1708c328ab6f18",
}
# Our DaemonSet (flavour, object name) -> the upstream manifest it mirrors.
MIRRORS = {
    (GpuDirectFlavor.TCPX, "nccl-tcpx-installer"): "gpudirect-tcpx/nccl-tcpx-installer.yaml",
    (GpuDirectFlavor.TCPX, "nri-device-injector-tcpx"): "nri_device_injector/nri-device-injector.yaml",
    (GpuDirectFlavor.TCPXO, "nccl-tcpxo-installer"): "gpudirect-tcpxo/nccl-tcpxo-installer.yaml",
    (GpuDirectFlavor.TCPXO, "nri-device-injector-tcpxo"): "nri_device_injector/nri-device-injector.yaml",
    (GpuDirectFlavor.RDMA, "nccl-rdma-installer"): "gpudirect-rdma/nccl-rdma-installer.yaml",
    (GpuDirectFlavor.RDMA_A4X, "nccl-rdma-a4x-installer"): "gpudirect-rdma/nccl-rdma-installer-a4x.yaml",
}
# Every documented difference: (manifest, field, upstream's value, ours, why). The test computes
# the differences and requires exactly these.
DIFFERENCES: dict[tuple[str, str], tuple[Any, Any, str]] = {
    ("gpudirect-tcpx/nccl-tcpx-installer.yaml", "unmounted hostPath volumes"): (
        {"tcpx": "/var/lib/tcpx"},
        {},
        "declared upstream but mounted by no container; the installer reaches /var/lib/tcpx through var-lib",
    ),
    ("gpudirect-tcpxo/nccl-tcpxo-installer.yaml", "unmounted hostPath volumes"): (
        {"tcpxo": "/var/lib/tcpxo"},
        {},
        "declared upstream but mounted by no container; the installer reaches /var/lib/tcpxo through var-lib",
    ),
    ("nri_device_injector/nri-device-injector.yaml", "unmounted hostPath volumes"): (
        {"root": "/"},
        {},
        "the host's root declared upstream but mounted by no container: not declared here at all",
    ),
    ("gpudirect-rdma/nccl-rdma-installer-a4x.yaml", "unmounted hostPath volumes"): (
        {"nvidia-dir": "/home/kubernetes/bin/nvidia"},
        {},
        "declared upstream (type Directory) but mounted by no container: not declared here, so the "
        "installer's Pod does not wait for the driver directory it never reads",
    ),
    ("gpudirect-tcpxo/nccl-tcpxo-installer.yaml", "images"): (
        ["ubuntu", images.TCPXO_PLUGIN, images.PAUSE],
        [
            pinned(images.TCPXO_PRE_INSTALL, images.published_digests()),
            pinned(images.TCPXO_PLUGIN, images.published_digests()),
            images.PAUSE,
        ],
        "the pre-installation step only runs nsenter from its image; 'ubuntu' (latest) pinned to an LTS "
        "tag; both by the digests NVIDIA's copy of the manifest publishes (images.PUBLISHED_DIGESTS)",
    ),
    ("gpudirect-tcpxo/nccl-tcpxo-installer.yaml", "pre-installation command"): (
        "nsenter -at 1 -- sh -c <Google's script>",
        "nsenter -at 1 -- bash -c <software.tcpxo_host_setup(GPU NIC subnets)>",
        "the same steps (firewall, import-helper, aperture bind mounts) made safe to run again when the Pod "
        "restarts (tests/test_gpudirect_software.py runs it twice); bash for its `$(...)` loop; the firewall "
        "rule accepts TCP from the GPU NICs' subnets only, not on every interface as Google's does "
        "(tests/test_gpudirect_firewall.py)",
    ),
}
# Fields where ours is narrower than upstream's on purpose (not a difference in what a node gets).
NARROWER = {
    "node affinity": "each DaemonSet runs on its flavour's accelerators only (upstream's injector lists "
    "every accelerator that needs it, RTX PRO 6000 included) and, from the stack, only on the pools "
    "that asked for GPUDirect",
    "resources": "upstream requests 150m CPU and sets no limit; ours requests the same CPU and adds "
    "memory requests and limits (a node-critical Pod must not take the node's memory)",
}


def _upstream(path: str) -> dict[str, Any]:
    return yaml.safe_load((UPSTREAM / path).read_text())


def _git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's object id


@pytest.mark.parametrize("path", sorted(VENDORED))
def test_the_vendored_manifest_is_upstreams_file_verbatim(path: str) -> None:
    assert _git_blob((UPSTREAM / path).read_bytes()) == VENDORED[path]


def test_sources_name_every_vendored_file_and_the_commit() -> None:
    sources = (UPSTREAM / "SOURCES.md").read_text()
    assert COMMIT in sources
    for path, blob in VENDORED.items():
        assert path in sources and blob in sources, path
    assert f"container-engine-accelerators at commit\n{COMMIT}" in Path(images.__file__).read_text()


@pytest.fixture(scope="module")
def ours() -> dict[tuple[GpuDirectFlavor, str], dict[str, Any]]:
    found = {}
    for flavor in GpuDirectFlavor:
        if FLAVORS[flavor].dranet_on_stack_networks:
            continue  # A4X Max's ASAPD-lite mirrors cluster-toolkit's manifest (tests/test_a4x_max.py)
        result = construct({"flavor": flavor, "node_networks": nic_networks(flavor)})
        assert result.error is None, result.error
        for ds in result.of_type("kubernetes:apps/v1:DaemonSet"):
            found[(flavor, ds.inputs["metadata"]["name"])] = ds.inputs
    return found


def test_every_daemon_set_mirrors_an_upstream_manifest(ours: dict) -> None:
    assert set(ours) == set(MIRRORS)


def _pod(ds: dict[str, Any]) -> dict[str, Any]:
    return ds["spec"]["template"]["spec"]


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def _mounted_host_paths(pod: dict[str, Any]) -> dict[str, dict[str, str | None]]:
    """Per container: mount path -> (host path, hostPath type) of every hostPath volume it mounts."""
    volumes = {v["name"]: v["hostPath"] for v in pod.get("volumes", []) if "hostPath" in v}
    return {
        c["name"]: {
            m["mountPath"]: f"{volumes[m['name']]['path']} ({volumes[m['name']].get('type') or 'unset'})"
            for m in c.get("volumeMounts", [])
            if m["name"] in volumes
        }
        for c in _containers(pod)
    }


def _unmounted_host_paths(pod: dict[str, Any]) -> dict[str, str]:
    mounted = {m["name"] for c in _containers(pod) for m in c.get("volumeMounts", [])}
    return {
        v["name"]: v["hostPath"]["path"]
        for v in pod.get("volumes", [])
        if "hostPath" in v and v["name"] not in mounted
    }


def _command(container: dict[str, Any]) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


def _differences(ds: dict[str, Any], upstream: dict[str, Any], path: str) -> dict[str, tuple[Any, Any]]:
    """Every compared field where ours differs from upstream's: field -> (upstream's, ours)."""
    pod, theirs = _pod(ds), _pod(upstream)
    found: dict[str, tuple[Any, Any]] = {}

    def compare(field: str, their_value: Any, our_value: Any) -> None:
        if their_value != our_value:
            found[field] = (their_value, our_value)

    compare("namespace", upstream["metadata"]["namespace"], ds["metadata"]["namespace"])
    compare("updateStrategy", upstream["spec"]["updateStrategy"], ds["spec"]["updateStrategy"])
    compare("tolerations", theirs["tolerations"], pod["tolerations"])
    compare("hostNetwork", theirs.get("hostNetwork"), pod.get("hostNetwork"))
    compare("hostPID", theirs.get("hostPID"), pod.get("hostPID"))
    compare("priorityClassName", theirs["priorityClassName"], pod["priorityClassName"])
    compare("images", [c["image"] for c in _containers(theirs)], [c["image"] for c in _containers(pod)])
    # Containers are matched by position (names: ours prefixes nothing, so they agree too).
    compare(
        "container names", [c["name"] for c in _containers(theirs)], [c["name"] for c in _containers(pod)]
    )
    for their_c, our_c in zip(_containers(theirs), _containers(pod), strict=True):
        compare(
            f"{our_c['name']} host paths",
            _mounted_host_paths(theirs)[their_c["name"]],
            _mounted_host_paths(pod)[our_c["name"]],
        )
        compare(
            f"{our_c['name']} privileged",
            their_c.get("securityContext", {}).get("privileged"),
            our_c.get("securityContext", {}).get("privileged"),
        )
        their_cpu = their_c.get("resources", {}).get("requests", {}).get("cpu")
        if their_cpu:  # where upstream requests CPU, ours requests the same (NARROWER: resources)
            compare(f"{our_c['name']} cpu request", their_cpu, our_c["resources"]["requests"].get("cpu"))
        if their_c["name"] == "pre-installation":
            if _command(their_c)[:5] != _command(our_c)[:5] or _command(their_c)[6:] != _command(our_c)[6:]:
                found["pre-installation command"] = (
                    "nsenter -at 1 -- sh -c <Google's script>",
                    "nsenter -at 1 -- bash -c <software.tcpxo_host_setup(GPU NIC subnets)>",
                )
        else:
            compare(f"{our_c['name']} command", _command(their_c), _command(our_c))
    compare("unmounted hostPath volumes", _unmounted_host_paths(theirs), _unmounted_host_paths(pod))
    # Narrower on purpose (NARROWER): every accelerator ours selects is one upstream selects.
    (their_term,) = theirs["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    (our_term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    (their_accelerators,) = [
        e["values"] for e in their_term["matchExpressions"] if e["key"] == "cloud.google.com/gke-accelerator"
    ]
    (our_accelerators,) = [
        e["values"] for e in our_term["matchExpressions"] if e["key"] == "cloud.google.com/gke-accelerator"
    ]
    if not set(our_accelerators) <= set(their_accelerators):
        found["node affinity"] = (their_accelerators, our_accelerators)
    # The host architecture, where upstream selects one, exactly as upstream's.
    compare(
        "architecture",
        [e["values"] for e in their_term["matchExpressions"] if e["key"] == "kubernetes.io/arch"],
        [e["values"] for e in our_term["matchExpressions"] if e["key"] == "kubernetes.io/arch"],
    )
    return found


@pytest.mark.parametrize(("flavor", "name"), sorted(MIRRORS), ids=lambda v: str(v))
def test_each_daemon_set_differs_from_upstream_only_where_documented(
    ours: dict, flavor: GpuDirectFlavor, name: str
) -> None:
    path = MIRRORS[(flavor, name)]
    found = _differences(ours[(flavor, name)], _upstream(path), path)
    documented = {field: (theirs, mine) for (p, field), (theirs, mine, _) in DIFFERENCES.items() if p == path}
    assert found == documented


def test_the_node_software_tolerates_every_taint_as_upstream(ours: dict) -> None:
    """A taint GKE adds later (or a pool's own) never keeps the NCCL plugin off a GPU node."""
    for key, ds in ours.items():
        assert _pod(ds)["tolerations"] == [{"operator": "Exists"}], key
        assert _pod(_upstream(MIRRORS[key]))["tolerations"] == [{"operator": "Exists"}], key


def test_every_flavour_accelerator_is_one_upstream_installs_on() -> None:
    for (flavor, name), path in MIRRORS.items():
        (term,) = _pod(_upstream(path))["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        (values,) = [
            e["values"] for e in term["matchExpressions"] if e["key"] == "cloud.google.com/gke-accelerator"
        ]
        assert set(FLAVORS[flavor].accelerators) <= set(values), name
