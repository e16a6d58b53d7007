"""GpuDirectSoftware (the Networks and node software of one GPUDirect flavour) under mocks, and
gpudirect_pod_parts (what a workload Pod adds), each object checked against the Kubernetes schemas
or the vendored GKE networking CRDs (tests/schemas/crds/networking.gke.io)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from gke_gpu.core.image_digests import pinned
from gke_gpu.core.validation import InvalidArgsError
from gke_gpu.gpudirect import images
from gke_gpu.gpudirect.flavors import FLAVORS, GpuDirectFlavor, pod_interfaces
from gke_gpu.gpudirect.images import published_digests
from gke_gpu.gpudirect.pod_parts import RXDM_CONTAINER, gpudirect_pod_parts, plain_tcp_pod_parts
from gke_gpu.gpudirect.software import GpuDirectSoftware
from tests.kubernetes_schemas import validate
from tools import offline
from tools.offline import RunResult, run_program
from tools.plan import kubernetes_objects, to_document

NAME = "gd"
NET = "kubernetes:networking.gke.io/v1"
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
TCPX, TCPXO, RDMA = GpuDirectFlavor.TCPX, GpuDirectFlavor.TCPXO, GpuDirectFlavor.RDMA
RDMA_A4X, A4X_MAX = GpuDirectFlavor.RDMA_A4X, GpuDirectFlavor.RDMA_A4X_MAX
# Flavour -> (NIC count, Network names, deviceModes, DaemonSets).
EXPECTED = {
    TCPX: (
        4,
        [f"tcpx-{i}" for i in range(1, 5)],
        ["NetDevice"] * 4,
        {"nccl-tcpx-installer", "nri-device-injector-tcpx"},
    ),
    TCPXO: (
        8,
        [f"tcpxo-{i}" for i in range(1, 9)],
        ["NetDevice"] * 8,
        {"nccl-tcpxo-installer", "nri-device-injector-tcpxo"},
    ),
    RDMA: (
        9,
        ["gvnic-1", *(f"rdma-{i}" for i in range(8))],
        ["NetDevice"] + ["RDMA"] * 8,
        {"nccl-rdma-installer"},
    ),
    RDMA_A4X: (
        5,
        ["a4x-gvnic-1", *(f"a4x-rdma-{i}" for i in range(4))],
        ["NetDevice"] + ["RDMA"] * 4,
        {"nccl-rdma-a4x-installer"},
    ),
    # DRANET only: no Networks; ASAPD-lite instead of an installer.
    A4X_MAX: (0, [], [], {"asapd-lite"}),
}


def software_args(flavor: GpuDirectFlavor) -> dict[str, Any]:
    """The flavour's args as the stack passes them: its NICs' networks, except where DRANET claims them."""
    if FLAVORS[flavor].dranet_on_stack_networks:
        return {"flavor": flavor}
    return {"flavor": flavor, "node_networks": nic_networks(flavor)}


def nic_networks(flavor: GpuDirectFlavor) -> list[dict[str, str]]:
    return [
        {"network": f"gpu-{n.vpc_suffix}", "subnetwork": f"gpu-{n.subnet_suffix}"}
        for n in FLAVORS[flavor].nics
    ]


def construct(args: Any) -> RunResult:
    """Declare the component alone under mocks (outputs: its network_names and flavor)."""

    def program() -> dict[str, Any]:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1")
        component = GpuDirectSoftware(
            NAME, args() if callable(args) else args, opts=pulumi.ResourceOptions(provider=provider)
        )
        return {"networkNames": component.network_names, "flavor": component.flavor}

    return run_program({}, program=program)


@pytest.fixture(scope="module", params=list(GpuDirectFlavor))
def declared(request: pytest.FixtureRequest) -> tuple[GpuDirectFlavor, RunResult]:
    result = construct(software_args(request.param))
    assert result.error is None, result.error
    return request.param, result


def test_a_param_set_and_a_network_per_extra_nic(declared: tuple[GpuDirectFlavor, RunResult]) -> None:
    flavor, result = declared
    count, names, modes, _ = EXPECTED[flavor]
    # Registration order varies: key both kinds by object name.
    params = {
        r.inputs["metadata"]["name"]: r.inputs["spec"] for r in result.of_type(f"{NET}:GKENetworkParamSet")
    }
    networks = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in result.of_type(f"{NET}:Network")}
    assert len(params) == len(networks) == count
    assert sorted(params) == sorted(networks) == sorted(names)
    given = software_args(flavor).get("node_networks", [])
    expected = [{"vpc": n["network"], "vpcSubnet": n["subnetwork"]} for n in given]
    for name, mode, where in zip(names, modes, expected, strict=True):
        assert params[name] == {**where, "deviceMode": mode}
    for name in names:
        assert networks[name] == {
            "type": "Device",
            "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name},
        }
    assert result.outputs == {"networkNames": names, "flavor": flavor.value}


def test_rdma_nics_share_the_roce_vpc_and_each_has_its_subnet() -> None:
    result = construct({"flavor": RDMA, "node_networks": nic_networks(RDMA)})
    specs = {
        r.inputs["metadata"]["name"]: r.inputs["spec"] for r in result.of_type(f"{NET}:GKENetworkParamSet")
    }
    assert {s["vpc"] for s in specs.values() if s["deviceMode"] == "RDMA"} == {"gpu-rdma"}
    assert [specs[f"rdma-{i}"]["vpcSubnet"] for i in range(8)] == [f"gpu-rdma-{i}" for i in range(8)]
    assert specs["gvnic-1"] == {"vpc": "gpu-gvnic-1", "vpcSubnet": "gpu-gvnic-1", "deviceMode": "NetDevice"}


def test_a4x_nics_are_one_gvnic_and_four_rdma_subnets_of_their_own_roce_vpc() -> None:
    result = construct({"flavor": RDMA_A4X, "node_networks": nic_networks(RDMA_A4X)})
    specs = {
        r.inputs["metadata"]["name"]: r.inputs["spec"] for r in result.of_type(f"{NET}:GKENetworkParamSet")
    }
    assert {s["vpc"] for s in specs.values() if s["deviceMode"] == "RDMA"} == {"gpu-a4x-rdma"}
    assert [specs[f"a4x-rdma-{i}"]["vpcSubnet"] for i in range(4)] == [f"gpu-a4x-rdma-{i}" for i in range(4)]
    assert specs["a4x-gvnic-1"]["deviceMode"] == "NetDevice"


def test_the_flavours_daemon_sets_on_its_nodes_only(declared: tuple[GpuDirectFlavor, RunResult]) -> None:
    flavor, result = declared
    sets = {r.inputs["metadata"]["name"]: r.inputs for r in result.of_type(DAEMON_SET)}
    assert set(sets) == EXPECTED[flavor][3]
    for ds in sets.values():
        assert ds["metadata"]["namespace"] == "kube-system"
        pod = ds["spec"]["template"]["spec"]
        (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        arch = (
            [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]
            if flavor in (RDMA_A4X, A4X_MAX)
            else []
        )
        assert term["matchExpressions"] == [
            {
                "key": "cloud.google.com/gke-accelerator",
                "operator": "In",
                "values": list(FLAVORS[flavor].accelerators),
            },
            *arch,
        ]
        assert pod["priorityClassName"] == "system-node-critical"
        assert pod["automountServiceAccountToken"] is False
        # Every taint, as Google's manifests (tests/test_gpudirect_upstream.py).
        assert pod["tolerations"] == [{"operator": "Exists"}]
        for c in pod.get("initContainers", []) + pod["containers"]:
            assert c["resources"]["requests"] and c["resources"]["limits"], c["name"]
            if c["name"] == "pause":
                assert "privileged" not in c["securityContext"]
                assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_installer_images_and_host_paths() -> None:
    images = {}
    for flavor in GpuDirectFlavor:
        result = construct(software_args(flavor))
        for r in result.of_type(DAEMON_SET):
            pod = r.inputs["spec"]["template"]["spec"]
            images[r.inputs["metadata"]["name"]] = [c["image"] for c in pod.get("initContainers", [])]
            if r.inputs["metadata"]["name"] in ("nccl-rdma-installer", "nccl-rdma-a4x-installer"):
                assert {v["hostPath"]["path"] for v in pod["volumes"]} == {
                    "/home/kubernetes/bin/nvidia/lib64",
                    "/home/kubernetes/bin/gib",
                }
    registry = "us-docker.pkg.dev/gce-ai-infra"
    published = published_digests()
    assert images == {
        "nccl-tcpx-installer": [f"{registry}/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9"],
        "nri-device-injector-tcpx": [],
        # By the digests NVIDIA's manifests publish for these tags (images.PUBLISHED_DIGESTS).
        "nccl-tcpxo-installer": [
            f"ubuntu:24.04@{published['ubuntu']}",
            f"{registry}/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15@"
            + published[f"{registry}/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev"],
        ],
        "nri-device-injector-tcpxo": [],
        "nccl-rdma-installer": [f"{registry}/gpudirect-gib/nccl-plugin-gib:v1.1.1"],
        "nccl-rdma-a4x-installer": [f"{registry}/gpudirect-gib/nccl-plugin-gib-arm64:v1.1.0"],
        "asapd-lite": [],
    }


def test_plugin_and_rxdm_tags_move_together() -> None:
    """Google couples each RxDM release to one plugin release: bump both or neither."""
    pairs = {images.TCPX_PLUGIN.rsplit(":", 1)[1]: images.TCPX_RXDM.rsplit(":", 1)[1]}
    pairs[images.TCPXO_PLUGIN.rsplit(":", 1)[1]] = images.TCPXO_RXDM.rsplit(":", 1)[1]
    assert pairs == {"v3.1.9": "v2.0.12", "v1.0.15": "v1.0.21"}


def test_every_object_is_valid(declared: tuple[GpuDirectFlavor, RunResult]) -> None:
    flavor, result = declared
    objects = kubernetes_objects(to_document(result))
    assert len(objects) == 2 * EXPECTED[flavor][0] + len(EXPECTED[flavor][3])
    for obj in objects:
        validate(obj)


def test_each_network_waits_for_its_param_set(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, list[str]] = {}
    original = offline._RecordingMonitor.RegisterResource

    def recording(self: Any, request: Any) -> Any:
        seen[request.name] = list(request.dependencies)
        return original(self, request)

    monkeypatch.setattr(offline._RecordingMonitor, "RegisterResource", recording)
    result = construct({"flavor": TCPX, "node_networks": nic_networks(TCPX)})
    assert result.error is None, result.error
    for i in range(1, 5):
        (dependency,) = seen[f"{NAME}-tcpx-{i}-network"]
        assert dependency.endswith(f"::{NAME}-tcpx-{i}-params")


def test_vpc_and_subnet_may_be_outputs() -> None:
    def args() -> dict[str, Any]:
        nets = nic_networks(TCPX)
        nets[0] = {"network": pulumi.Output.from_input("made-later"), "subnetwork": nets[0]["subnetwork"]}
        return {"flavor": "TCPX", "node_networks": nets}

    result = construct(args)
    assert result.error is None, result.error
    specs = {
        r.inputs["metadata"]["name"]: r.inputs["spec"] for r in result.of_type(f"{NET}:GKENetworkParamSet")
    }
    assert specs["tcpx-1"]["vpc"] == "made-later"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda a: a["node_networks"].pop(), "node_networks: 3 given; TCPX has 4 extra NICs"),
        (lambda a: a.update(flavor="TCPXX"), "flavor:"),
        (lambda a: a.update(networks=[]), "networks: unknown key"),
        (lambda a: a["node_networks"][1].update(network="Not_A_VPC"), "node_networks[1].network:"),
        (lambda a: a["node_networks"][2].pop("subnetwork"), "node_networks[2].subnetwork:"),
        (lambda a: a.update(tolerations=[{"operator": "Equal", "value": "x"}]), "tolerations[0].key:"),
    ],
    ids=["nic-count", "flavor", "unknown-key", "vpc-name", "missing-subnet", "toleration"],
)
def test_bad_args_are_refused_by_name_before_anything_is_declared(change: Any, expected: str) -> None:
    args: dict[str, Any] = {"flavor": "TCPX", "node_networks": nic_networks(TCPX)}
    change(args)
    result = construct(args)
    assert isinstance(result.error, InvalidArgsError), repr(result.error)
    assert any(p.startswith(expected) for p in result.error.problems), result.error.problems
    assert [r.name for r in result.resources if r.name.startswith(NAME)] == []


def test_extra_tolerations_are_accepted_and_already_covered() -> None:
    """The arg stays for existing callers; tolerating every taint already covers what it names."""
    extra = {"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    result = construct({"flavor": RDMA, "node_networks": nic_networks(RDMA), "tolerations": [extra]})
    assert result.error is None, result.error
    (ds,) = result.of_type(DAEMON_SET)
    assert ds.inputs["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}]


# -- gpudirect_pod_parts ---------------------------------------------------------------------------


def pod(parts: dict[str, Any], *, gpus: int = 8) -> dict[str, Any]:
    """A Pod built from the parts the way a JobSet template would use them."""
    main = {
        "name": "main",
        "image": "busybox",
        "command": ["/bin/bash", "-c", f"{parts['ncclSetup'] or 'true'} && exec python train.py"],
        "env": parts["env"],
        "volumeMounts": parts["volumeMounts"],
        "securityContext": parts["securityContext"],
        "resources": {"limits": {"nvidia.com/gpu": gpus}},
    }
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [main], "volumes": parts["volumes"]}
    if parts["initContainers"]:
        spec["initContainers"] = parts["initContainers"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "w", "annotations": parts["annotations"] or None},
        "spec": spec,
    }


@pytest.mark.parametrize("flavor", list(GpuDirectFlavor))
def test_interfaces_annotation_is_the_flavours_json(flavor: GpuDirectFlavor) -> None:
    annotations = gpudirect_pod_parts(flavor)["annotations"]
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    assert json.loads(annotations["networking.gke.io/interfaces"]) == pod_interfaces(flavor)


@pytest.mark.parametrize("flavor", [TCPX, TCPXO])
def test_tcpx_flavours_have_one_native_rxdm_sidecar_with_its_devices(flavor: GpuDirectFlavor) -> None:
    parts = gpudirect_pod_parts(flavor)
    (sidecar,) = parts["initContainers"]
    assert sidecar["restartPolicy"] == "Always"
    assert sidecar["name"] == RXDM_CONTAINER[flavor]
    assert sidecar["image"] == (
        images.TCPX_RXDM if flavor is TCPX else pinned(images.TCPXO_RXDM, images.published_digests())
    )
    assert sidecar["securityContext"]["privileged"] is False
    devices = parts["annotations"][f"devices.gke.io/container.{sidecar['name']}"]
    paths = [line.removeprefix("- path: ") for line in devices.splitlines()]
    assert paths[:10] == [*(f"/dev/nvidia{i}" for i in range(8)), "/dev/nvidiactl", "/dev/nvidia-uvm"]
    assert ("/dev/dmabuf_import_helper" in paths) is (flavor is TCPXO)


def test_tcpxo_sidecar_has_the_health_check_startup_probe_and_the_workload_its_profile() -> None:
    parts = gpudirect_pod_parts(TCPXO)
    (sidecar,) = parts["initContainers"]
    env = {e["name"]: e["value"] for e in sidecar["env"]}
    assert sidecar["startupProbe"]["exec"]["command"] == ["cat", env["HEALTH_CHECK_LOG_FILE"]]
    assert "_" not in env["HEALTH_CHECK_LOG_FILE"]
    workload_env = {e["name"]: e["value"] for e in parts["env"]}
    assert workload_env["NCCL_LIB_DIR"] == "/usr/local/nvidia/lib64"
    assert workload_env["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == "/dev/aperture_devices"
    assert parts["ncclSetup"] == "source ${NCCL_LIB_DIR}/nccl-env-profile.sh"
    assert {"name": "nccl-aperture-devices", "mountPath": "/dev/aperture_devices"} in parts["volumeMounts"]


def test_tcpx_env_names_the_flavours_data_nics() -> None:
    parts = gpudirect_pod_parts(TCPX)
    env = {e["name"]: e["value"] for e in parts["env"]}
    data_nics = [i["interfaceName"] for i in pod_interfaces(TCPX)[1:]]
    assert env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"].split(",") == data_nics == ["eth1", "eth2", "eth3", "eth4"]
    assert env["NCCL_GPUDIRECTTCPX_CTRL_DEV"] == env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert parts["ncclSetup"] == ""
    assert parts["securityContext"]["capabilities"] == {"add": ["IPC_LOCK"]}


def test_rdma_has_no_sidecar_and_uses_gib() -> None:
    parts = gpudirect_pod_parts(RDMA)
    assert parts["initContainers"] == []
    assert not any(k.startswith("devices.gke.io/") for k in parts["annotations"])
    env = {e["name"]: e["value"] for e in parts["env"]}
    assert env["NCCL_NET"] == "gIB"
    assert parts["ncclSetup"] == "source /usr/local/gib/scripts/set_nccl_env.sh"
    shm = next(v for v in parts["volumes"] if v["name"] == "nccl-shm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "250Gi"}


@pytest.mark.parametrize(
    "flavor", [*GpuDirectFlavor, None], ids=[*(f.value for f in GpuDirectFlavor), "plain"]
)
def test_a_pod_built_from_the_parts_is_valid(flavor: GpuDirectFlavor | None) -> None:
    parts = plain_tcp_pod_parts() if flavor is None else gpudirect_pod_parts(flavor)
    assert set(parts) == {
        "annotations",
        "initContainers",
        "volumes",
        "volumeMounts",
        "env",
        "ncclSetup",
        "securityContext",
    }
    assert json.loads(json.dumps(parts)) == parts
    obj = pod(parts)
    if not obj["metadata"]["annotations"]:
        del obj["metadata"]["annotations"]
    validate(obj)
    declared = {v["name"] for v in parts["volumes"]}
    for container in [*obj["spec"].get("initContainers", []), *obj["spec"]["containers"]]:
        assert {m["name"] for m in container.get("volumeMounts", [])} <= declared, container["name"]
    assert parts["securityContext"]["privileged"] is False
    assert {"name": "nccl-shm", "mountPath": "/dev/shm"} in parts["volumeMounts"]


def test_plain_tcp_uses_sockets_on_eth0() -> None:
    parts = plain_tcp_pod_parts()
    assert parts["annotations"] == {} and parts["initContainers"] == []
    assert {e["name"]: e["value"] for e in parts["env"]} == {
        "NCCL_NET": "Socket",
        "NCCL_SOCKET_IFNAME": "eth0",
    }


def test_parts_are_fresh_on_every_call() -> None:
    first = gpudirect_pod_parts(TCPXO)
    pristine = copy.deepcopy(first)
    first["initContainers"][0]["env"].append({"name": "X", "value": "1"})
    first["volumes"].clear()
    assert gpudirect_pod_parts(TCPXO) == pristine


def test_shm_size_can_be_set() -> None:
    parts = gpudirect_pod_parts(TCPX, shm_size="32Gi")
    assert {"name": "nccl-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}} in parts["volumes"]


@pytest.mark.parametrize("container", ["Main", "", "tcpxo-daemon", "x" * 64])
def test_a_bad_container_name_is_refused(container: str) -> None:
    with pytest.raises(ValueError, match="container: "):
        gpudirect_pod_parts(TCPXO, container=container)


def test_the_tcpxo_host_setup_is_safe_to_run_again(tmp_path) -> None:
    """The pre-installation script runs on the host each time the installer Pod starts: each scoped
    firewall rule is inserted once, the rule on every interface that Google's installer (or an earlier
    version) left is deleted, and a device already bind-mounted is not mounted again."""
    import subprocess

    from gke_gpu.gpudirect.software import tcpxo_host_setup

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    state = tmp_path / "state"
    rules = tmp_path / "rules"
    state.mkdir()
    rules.mkdir()
    # The host's INPUT chain as Google's installer leaves it: TCP accepted on every interface.
    (rules / "INPUT -p tcp -m tcp -j ACCEPT").touch()
    stubs = {
        # A rule is a file named by its spec: -C finds it, -I adds it, -D removes it (or fails), as
        # iptables does.
        "iptables": f'echo "iptables $*" >> {calls}; op=$1; shift; '
        f'rule="{rules}/$(echo "$*" | tr / _)"; case $op in '
        '-C) [ -f "$rule" ];; -I) touch "$rule";; -D) [ -f "$rule" ] && rm "$rule";; esac',
        "modprobe": f'echo "modprobe $*" >> {calls}',
        "lspci": 'echo "0000:06:00.0 0000: 1ae0:0084"; echo "0000:07:00.0 0000: 1ae0:0084"',
        "mountpoint": f'[ -f "{state}/$(basename "$2")" ]',
        "mount": f'echo "mount $*" >> {calls}; touch "{state}/$(basename "$3")"',
        "readlink": 'echo "/sys/devices/pci/$(basename "$2")"',
        "chmod": "true",
    }
    for name, body in stubs.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/bash\n{body}\n")
        path.chmod(0o755)
    ranges = ["192.168.32.0/21", "192.168.40.0/21"]
    script = (
        tcpxo_host_setup(ranges)
        .replace("/sbin/iptables", "iptables")
        .replace("/dev/aperture_devices", str(tmp_path / "aperture"))
    )
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    for _ in range(2):
        done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    lines = calls.read_text().splitlines()
    assert sum(line.startswith("iptables -I") for line in lines) == 2  # one per range, once each
    # The rule on every interface is gone; the scoped ones are all that is left.
    assert sorted(p.name for p in rules.iterdir()) == [
        f"INPUT -s {cidr.replace('/', '_')} -p tcp -m tcp -j ACCEPT" for cidr in ranges
    ]
    assert sum(line.startswith("mount --bind") for line in lines) == 2  # two devices, once each
    assert lines.count("modprobe import-helper") == 2


def test_the_node_software_runs_only_on_the_gpudirect_pools() -> None:
    """A pool of the same accelerator without GPUDirect keeps its nodes as they are."""
    from tests.conftest import STANDARD_CLUSTER, render, stack_config

    mega = {
        "accelerator": "nvidia-h100-mega-80gb",
        "gpusPerNode": 8,
        "maxNodes": 2,
        "zones": ["us-central1-a"],
    }
    result = render(
        stack_config(
            cluster=STANDARD_CLUSTER,
            gpuPools=[{"name": "train", "gpudirect": True, **mega}, {"name": "dev", **mega}],
        )
    )
    for daemon_set in result.of_type("kubernetes:apps/v1:DaemonSet"):
        terms = daemon_set.inputs["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        (term,) = terms
        assert {"key": "cloud.google.com/gke-nodepool", "operator": "In", "values": ["train"]} in term[
            "matchExpressions"
        ], daemon_set.name


def test_a4x_max_nodes_run_asapd_lite_as_cluster_toolkit_installs_it() -> None:
    result = construct({"flavor": A4X_MAX, "node_pools": ["rack"]})
    assert result.error is None, result.error
    assert result.of_type(f"{NET}:GKENetworkParamSet") == [] and result.of_type(f"{NET}:Network") == []
    (ds,) = result.of_type(DAEMON_SET)
    assert ds.inputs["metadata"] | {"labels": None} == {
        "name": "asapd-lite",
        "namespace": "kube-system",
        "labels": None,
    }
    pod = ds.inputs["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["hostPID"] is True
    assert pod["priorityClassName"] == "system-node-critical"
    (container,) = pod["containers"]
    assert container["image"] == "us-docker.pkg.dev/gce-ai-infra/asapd-lite/asapd-lite:v0.0.8"
    assert container["securityContext"] == {"privileged": True}
    assert "/usr/local/bin/run_asapd_lite.sh" in container["args"][0]
    assert container["resources"]["limits"] == {"hugepages-2Mi": "8192Mi", "memory": "1024Mi"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 19540}
    hugepages = {v["name"]: v for v in pod["volumes"]}["hugepage-2mi"]
    assert hugepages == {"name": "hugepage-2mi", "emptyDir": {"medium": "HugePages-2Mi"}}
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {e["key"]: e["values"] for e in term["matchExpressions"]} == {
        "cloud.google.com/gke-accelerator": ["nvidia-gb300"],
        "kubernetes.io/arch": ["arm64"],
        "cloud.google.com/gke-nodepool": ["rack"],
    }
    validate(kubernetes_objects(to_document(result))[0])


def test_a4x_max_takes_no_node_networks_dranet_claims_its_nics() -> None:
    result = construct({"flavor": A4X_MAX, "node_networks": nic_networks(A4X_MAX)})
    assert isinstance(result.error, InvalidArgsError), repr(result.error)
    assert result.error.problems == [
        "node_networks: not allowed with RDMA-A4X-Max: Pods claim its NICs through DRANET"
    ]
