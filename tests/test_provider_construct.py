"""Every public component constructed through the multi-language provider, as another language would.

`ComponentProvider.construct` is what the plugin runs for a `Construct` call: it maps the engine's
camelCase inputs to the snake_case args dict, checks required inputs, calls the constructor, and
reads the state back. Here it runs in-process under the SDK's mocks (tools/offline.py), with inputs
shaped as they arrive over the wire: camelCase keys, and every number a float (protobuf `Struct`).

The data per component is in CASES, one entry each: the wire inputs, the children the component
must register, values some children's inputs must have, the state it must return, and one bad
input with the arg its error must name. When a component's args change, change its entry.
"""

import copy
import functools
import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pytest
from pulumi.errors import InputPropertyError

from gke_gpu import PUBLIC_COMPONENTS, InvalidArgsError, public_components
from gke_gpu.core.package import PACKAGE, component_type
from tools import schema as package_schema
from tools.offline import SECRET, Resource, RunResult, run_program

NAME = "remote"
PROJECT = "p-123456"


@dataclass(frozen=True)
class Case:
    # The inputs as the engine sends them: camelCase keys, numbers as floats.
    wire: dict[str, Any]
    # Every direct child: name -> type token.
    children: dict[str, str]
    # (child name, dotted camelCase path in its inputs) -> value.
    child_inputs: dict[tuple[str, str], Any] = field(default_factory=dict)
    # State values the component returns (camelCase, as the schema's outputs), where known offline.
    state: dict[str, Any] = field(default_factory=dict)
    # Wire changes (dotted camelCase path -> value) that must be refused, each with the arg its error
    # names: snake_case when the component refuses it (InvalidArgsError), camelCase when the
    # provider does (InputPropertyError: a missing input, a value outside an enum).
    bad: tuple[tuple[dict[str, Any], str], ...] = ()


NODES = "gpu-nodes@p-123456.iam.gserviceaccount.com"
L4_TARGET = {
    "name": "l4",
    "accelerator": "nvidia-l4",
    "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
    "gpusPerPod": 1.0,
}

CASES: dict[str, Case] = {
    "GkeNetwork": Case(
        wire={
            "project": PROJECT,
            "region": "us-central1",
            "namePrefix": "gpu",
            "subnetCidr": "10.0.0.0/20",
            "podsCidr": "10.4.0.0/14",
            "servicesCidr": "10.8.0.0/20",
            "flowLogSampling": 1.0,
        },
        children={
            f"{NAME}-vpc": "gcp:compute/network:Network",
            f"{NAME}-nodes": "gcp:compute/subnetwork:Subnetwork",
            f"{NAME}-router": "gcp:compute/router:Router",
            f"{NAME}-nat": "gcp:compute/routerNat:RouterNat",
        },
        child_inputs={
            (f"{NAME}-vpc", "name"): "gpu-vpc",
            (f"{NAME}-nodes", "ipCidrRange"): "10.0.0.0/20",
            (f"{NAME}-nodes", "logConfig.flowSampling"): 1,
        },
        state={"podsRangeName": "pods", "servicesRangeName": "services", "networkName": "gpu-vpc"},
        bad=(({"flowLogSampling": 2.0}, "flow_log_sampling"),),
    ),
    "GkeCluster": Case(
        wire={
            "project": PROJECT,
            "name": "gpu",
            "location": "us-central1",
            "autopilot": False,
            "network": "gpu-vpc",
            "subnetwork": "gpu-nodes",
            "podsRangeName": "pods",
            "servicesRangeName": "services",
        },
        children={
            f"{NAME}-nodes": "gcp:serviceaccount/account:Account",
            f"{NAME}-nodes-container.defaultNodeServiceAccount": "gcp:projects/iAMMember:IAMMember",
            f"{NAME}-nodes-serviceusage.serviceUsageConsumer": "gcp:projects/iAMMember:IAMMember",
            f"{NAME}-cluster": "gcp:container/cluster:Cluster",
            f"{NAME}-system": "gcp:container/nodePool:NodePool",
            f"{NAME}-k8s": "pulumi:providers:kubernetes",
        },
        child_inputs={(f"{NAME}-cluster", "name"): "gpu", (f"{NAME}-cluster", "location"): "us-central1"},
        state={"clusterName": "gpu", "location": "us-central1", "kubeconfig": SECRET},
        bad=(({"privateNodes": False}, "private_nodes"), ({"releaseChannel": "NIGHTLY"}, "releaseChannel")),
    ),
    "GpuNodePool": Case(
        wire={
            "project": PROJECT,
            "location": "us-central1",
            "clusterName": "gpu",
            "accelerator": "nvidia-l4",
            "gpusPerNode": 2.0,
            "maxNodes": 4.0,
        },
        children={f"{NAME}-pool": "gcp:container/nodePool:NodePool"},
        child_inputs={
            (f"{NAME}-pool", "cluster"): "gpu",
            (f"{NAME}-pool", "nodeConfig.machineType"): "g2-standard-24",
            (f"{NAME}-pool", "nodeConfig.guestAccelerators[0].type"): "nvidia-l4",
            (f"{NAME}-pool", "nodeConfig.guestAccelerators[0].count"): 2,
            (f"{NAME}-pool", "nodeConfig.taints[0]"): {
                "key": "nvidia.com/gpu",
                "value": "present",
                "effect": "NO_SCHEDULE",
            },
            (f"{NAME}-pool", "autoscaling.totalMaxNodeCount"): 4,
        },
        state={"poolName": NAME, "machineType": "g2-standard-24", "schedulableGpusPerNode": 2},
        bad=(({"gpusPerNode": 3.0}, "gpus_per_node"),),
    ),
    "CustomMetricsAdapter": Case(
        wire={"project": "p-123456", "clusterName": "gpu"},
        children={
            f"{NAME}-account": "gcp:serviceaccount/account:Account",
            f"{NAME}-monitoring-viewer": "gcp:projects/iAMMember:IAMMember",
            f"{NAME}-workload-identity": "gcp:serviceaccount/iAMMember:IAMMember",
            f"{NAME}-manifest": "kubernetes:yaml/v2:ConfigFile",
            f"{NAME}-ksa-identity": "kubernetes:core/v1:ServiceAccountPatch",
            f"{NAME}-namespace-pod-security": "kubernetes:core/v1:NamespacePatch",
        },
        child_inputs={(f"{NAME}-monitoring-viewer", "role"): "roles/monitoring.viewer"},
        state={},
        bad=(({"clusterName": "GPU_1"}, "cluster_name"),),
    ),
    "LeaderWorkerSetController": Case(
        wire={"memoryGib": 2.0},
        children={
            f"{NAME}-namespace": "kubernetes:core/v1:Namespace",
            f"{NAME}-chart": "kubernetes:helm.sh/v4:Chart",
        },
        child_inputs={
            (f"{NAME}-chart", "version"): "0.10.0",
            (f"{NAME}-chart", "values.resources.limits.memory"): "2Gi",
            (f"{NAME}-namespace", "metadata.name"): "lws-system",
        },
        state={},
        bad=(({"memoryGib": 0.0}, "memory_gib"), ({"cpu": 0.0}, "cpu")),
    ),
    "NvidiaDraDriver": Case(
        wire={"computeDomains": True, "accelerators": ["nvidia-gb200"]},
        children={
            f"{NAME}-namespace": "kubernetes:core/v1:Namespace",
            f"{NAME}-critical-pods": "kubernetes:core/v1:ResourceQuota",
            f"{NAME}-chart": "kubernetes:helm.sh/v4:Chart",
        },
        child_inputs={
            (f"{NAME}-chart", "version"): "0.4.0",
            (f"{NAME}-chart", "values.resources.computeDomains.enabled"): True,
            (f"{NAME}-chart", "values.resources.gpus.enabled"): False,
            (f"{NAME}-namespace", "metadata.name"): "dra-driver-nvidia-gpu",
        },
        state={"namespace": "dra-driver-nvidia-gpu"},
        bad=(({"computeDomains": False}, "compute_domains"), ({"accelerators": []}, "node_pools")),
    ),
    "HyperdiskMlTransferClass": Case(
        wire={"nodeServiceAccountEmail": NODES},
        children={f"{NAME}-class": "kubernetes:cloud.google.com/v1:ComputeClass"},
        child_inputs={
            (f"{NAME}-class", "metadata.name"): "gcs-to-hdml-compute-class",
            (f"{NAME}-class", "spec.nodePoolConfig.serviceAccount"): NODES,
        },
        state={"className": "gcs-to-hdml-compute-class"},
        bad=(({"nodeServiceAccountEmail": "x" * 300}, "node_service_account_email"),),
    ),
    "ImageMirror": Case(
        wire={"project": PROJECT, "region": "us-central1", "nodeServiceAccountEmail": NODES},
        children={
            f"{NAME}-repository": "gcp:artifactregistry/repository:Repository",
            f"{NAME}-node-reader": "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
        },
        child_inputs={
            (f"{NAME}-repository", "mode"): "REMOTE_REPOSITORY",
            (f"{NAME}-repository", "remoteRepositoryConfig.dockerRepository.publicRepository"): "DOCKER_HUB",
            (f"{NAME}-node-reader", "role"): "roles/artifactregistry.reader",
            (f"{NAME}-node-reader", "member"): f"serviceAccount:{NODES}",
        },
        state={"registry": f"us-central1-docker.pkg.dev/{PROJECT}/docker-hub"},
        bad=(({"region": "us-central1-a"}, "region"), ({"repositoryId": "Docker_Hub"}, "repository_id")),
    ),
    "InferenceService": Case(
        wire={
            "name": "chat",
            "model": "gs://models-bucket/qwen",
            "nodeSelector": {"cloud.google.com/gke-nodepool": "l4"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "project": "p-123456",
            "clusterName": "gpu",
        },
        children={
            f"{NAME}-namespace": "kubernetes:core/v1:Namespace",
            f"{NAME}-ksa": "kubernetes:core/v1:ServiceAccount",
            f"{NAME}-deployment": "kubernetes:apps/v1:Deployment",
            f"{NAME}-service": "kubernetes:core/v1:Service",
            f"{NAME}-network-policy": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            f"{NAME}-default-deny-egress": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            f"{NAME}-server-egress": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            f"{NAME}-pod-monitoring": "kubernetes:monitoring.googleapis.com/v1:PodMonitoring",
            # Every service keeps its last replica through a drain (serving/rollout.py).
            f"{NAME}-disruption-budget": "kubernetes:policy/v1:PodDisruptionBudget",
            f"{NAME}-weights-reader": "gcp:serviceaccount/account:Account",
            f"{NAME}-weights-viewer": "gcp:storage/bucketIAMMember:BucketIAMMember",
            f"{NAME}-workload-identity": "gcp:serviceaccount/iAMMember:IAMMember",
        },
        child_inputs={
            (f"{NAME}-weights-viewer", "bucket"): "models-bucket",
            (f"{NAME}-weights-viewer", "role"): "roles/storage.objectViewer",
        },
        state={"serviceUrl": "http://chat.serve-chat.svc:8000", "namespace": "serve-chat"},
        bad=(({"model": "s3://x/y"}, "model"),),
    ),
    "ServingLoadTest": Case(
        wire={"service": "chat", "minOutputTokS": 120.0, "maxP99TtftMs": 6000.0, "maxMeanTpotMs": 130.0},
        children={
            f"{NAME}-scripts": "kubernetes:core/v1:ConfigMap",
            f"{NAME}-network-policy": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            f"{NAME}-job": "kubernetes:batch/v1:Job",
        },
        child_inputs={(f"{NAME}-job", "metadata.namespace"): "serve-chat"},
        state={"jobName": "serving-load", "namespace": "serve-chat"},
        bad=(({"levels": [4.0, 4.0]}, "levels"),),
    ),
    "InferenceGateway": Case(
        wire={"service": "chat", "proxyOnlyCidr": "10.10.16.0/23"},
        children={
            f"{NAME}-server-ingress": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            f"{NAME}-epp-ingress": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            f"{NAME}-epp-egress": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            f"{NAME}-epp": "kubernetes:helm.sh/v4:Chart",
            f"{NAME}-epp-hardening": "kubernetes:apps/v1:DeploymentPatch",
            f"{NAME}-gateway": "kubernetes:gateway.networking.k8s.io/v1:Gateway",
            f"{NAME}-route": "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute",
        },
        child_inputs={
            (f"{NAME}-gateway", "spec.gatewayClassName"): "gke-l7-rilb",
            (f"{NAME}-epp", "namespace"): "serve-chat",
        },
        state={"gatewayName": "chat", "inferencePoolName": "chat", "namespace": "serve-chat"},
        bad=(({"proxyOnlyCidr": "10.10.16.1/23"}, "proxy_only_cidr"),),
    ),
    "GpuCapacityLadder": Case(
        wire={
            "name": "h100",
            "accelerator": "nvidia-h100-80gb",
            "gpusPerNode": 8.0,
            "maxNodes": 2.0,
            "capacityLadder": ["onDemand", "spot"],
            "location": "us-central1-a",
            "project": "p-123456",
        },
        children={f"{NAME}-class": "kubernetes:cloud.google.com/v1:ComputeClass"},
        child_inputs={
            (f"{NAME}-class", "spec.priorities[1].spot"): True,
            (f"{NAME}-class", "spec.nodePoolAutoCreation.enabled"): True,
        },
        state={"className": "gpu-h100"},
        bad=(({"capacityLadder": ["spot", "spot"]}, "capacity_ladder[1]"),),
    ),
    "TrainingData": Case(
        wire={
            "project": PROJECT,
            "clusterName": "gpu",
            "team": "research",
            "namespaces": ["research"],
            "volumes": [
                {"name": "training", "gcs": {"bucket": "research-training-data"}},
                {
                    "name": "scratch",
                    "lustre": {
                        "instance": "lus",
                        "zone": "us-central1-a",
                        "ip": "10.90.0.4",
                        "filesystem": "lfs",
                        "capacityGib": 18000.0,
                    },
                },
            ],
        },
        children={
            f"{NAME}-data-reader": "gcp:serviceaccount/account:Account",
            f"{NAME}-research-training-data-read": "gcp:storage/bucketIAMMember:BucketIAMMember",
            f"{NAME}-workload-identity": "gcp:serviceaccount/iAMMember:IAMMember",
            f"{NAME}-service-account": "kubernetes:core/v1:ServiceAccount",
            f"{NAME}-training-volume": "kubernetes:core/v1:PersistentVolume",
            f"{NAME}-training-claim": "kubernetes:core/v1:PersistentVolumeClaim",
            f"{NAME}-scratch-volume": "kubernetes:core/v1:PersistentVolume",
            f"{NAME}-scratch-claim": "kubernetes:core/v1:PersistentVolumeClaim",
            f"{NAME}-egress": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
        },
        child_inputs={
            (f"{NAME}-scratch-volume", "spec.csi.volumeHandle"): f"{PROJECT}/us-central1-a/lus",
            (f"{NAME}-scratch-volume", "spec.capacity.storage"): "18000Gi",
            (f"{NAME}-training-claim", "metadata.namespace"): "research",
        },
        state={"claimNames": ["training", "scratch"], "serviceAccountName": "training-data"},
        bad=(({"volumes[0].gcs.bucket": "Bad_Bucket"}, "volumes[0].gcs.bucket"),),
    ),
    "ImageCacheAllowlist": Case(
        wire={"diskImages": ["projects/p-123456/global/images/vllm-v0-33-0"]},
        children={f"{NAME}-allowlist": "kubernetes:node.gke.io/v1:GCPResourceAllowlist"},
        child_inputs={
            (f"{NAME}-allowlist", "metadata.name"): "gke-secondary-boot-disk-allowlist",
            (f"{NAME}-allowlist", "spec.allowedResourcePatterns[0]"): (
                "projects/p-123456/global/images/vllm-v0-33-0"
            ),
        },
        state={"allowedImages": ["projects/p-123456/global/images/vllm-v0-33-0"]},
        bad=(({"diskImages": ["global/images/vllm"]}, "disk_images[0]"),),
    ),
    "GpuComputeClass": Case(
        wire={"name": "l4", "accelerator": "nvidia-l4", "gpusPerNode": 1.0},
        children={f"{NAME}-class": "kubernetes:cloud.google.com/v1:ComputeClass"},
        child_inputs={(f"{NAME}-class", "spec.priorities[0].gpu.type"): "nvidia-l4"},
        state={"className": "gpu-l4"},
        bad=(({"gpusPerNode": 3.0}, "gpus_per_node"),),
    ),
    "GpuMonitoring": Case(
        wire={"project": PROJECT, "clusterName": "gpu", "dcgm": "managed"},
        children={f"{NAME}-dashboard": "gcp:monitoring/dashboard:Dashboard"},
        state={"alertPolicyNames": []},
        bad=(({"dcgm": "exporter"}, "exporter"), ({"dcgm": "sometimes"}, "dcgm")),
    ),
    "DcgmExporter": Case(
        wire={"flavor": "gke", "scraperNamespace": "gmp-system"},
        children={
            f"{NAME}-namespace": "kubernetes:core/v1:Namespace",
            f"{NAME}-sa": "kubernetes:core/v1:ServiceAccount",
            f"{NAME}-collectors": "kubernetes:core/v1:ConfigMap",
            f"{NAME}-daemonset": "kubernetes:apps/v1:DaemonSet",
            f"{NAME}-service": "kubernetes:core/v1:Service",
            f"{NAME}-networkpolicy": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            f"{NAME}-podmonitoring": "kubernetes:monitoring.googleapis.com/v1:PodMonitoring",
        },
        child_inputs={(f"{NAME}-namespace", "metadata.name"): "gpu-monitoring"},
        state={"namespace": "gpu-monitoring", "scrape": "podMonitoring"},
        bad=(({"scrapeInterval": "soon"}, "scrape_interval"), ({"flavor": "bare-metal"}, "flavor")),
    ),
    "NvidiaDevicePlugin": Case(
        wire={"nodeSelector": {"nvidia.com/gpu.present": "true"}, "timeSlicingReplicas": 4.0},
        children={
            f"{NAME}-config": "kubernetes:core/v1:ConfigMap",
            f"{NAME}-daemonset": "kubernetes:apps/v1:DaemonSet",
        },
        child_inputs={(f"{NAME}-daemonset", "metadata.namespace"): "kube-system"},
        state={"namespace": "kube-system", "timeSlicingReplicas": 4},
        bad=(({"timeSlicingReplicas": 1.5}, "time_slicing_replicas"),),
    ),
    "GpuBatchQueues": Case(
        wire={
            "queues": [
                {
                    "name": "l4",
                    "nodeLabels": {"cloud.google.com/gke-nodepool": "l4"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "gpus": 4.0,
                    "cpus": 32.0,
                    "memoryGib": 128.0,
                    "ephemeralStorageGib": 800.0,
                }
            ],
            "localQueueNamespace": "gpu-samples",
        },
        children={
            f"{NAME}-kueue-namespace": "kubernetes:core/v1:Namespace",
            f"{NAME}-jobset-namespace": "kubernetes:core/v1:Namespace",
            f"{NAME}-kueue": "kubernetes:helm.sh/v4:Chart",
            f"{NAME}-jobset": "kubernetes:helm.sh/v4:Chart",
            f"{NAME}-l4-flavor": "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor",
            f"{NAME}-l4-cluster-queue": "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue",
            f"{NAME}-l4-local-queue": "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue",
        },
        child_inputs={(f"{NAME}-l4-local-queue", "metadata.namespace"): "gpu-samples"},
        state={"clusterQueueNames": ["gpu-l4"], "localQueueNames": ["gpu-l4"]},
        bad=(
            ({"queues[0].gpus": 0.0}, "queues[0].gpus"),
            ({"queues[0].cpus": 2.5}, "queues[0].cpus"),
        ),
    ),
    "SampleWorkloads": Case(
        wire={"workloads": [{"kind": "nvidia-smi", "target": L4_TARGET}]},
        children={
            f"{NAME}-namespace": "kubernetes:core/v1:Namespace",
            f"{NAME}-deny-all": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            f"{NAME}-nvidia-smi-l4": "kubernetes:batch/v1:Job",
        },
        child_inputs={(f"{NAME}-nvidia-smi-l4", "metadata.namespace"): "gpu-samples"},
        state={"namespace": "gpu-samples", "jobNames": ["nvidia-smi-l4"]},
        bad=(
            ({"workloads[0].target.gpusPerPod": 0.0}, "workloads[0].target.gpus_per_pod"),
            ({"workloads[0].kind": "mine-bitcoin"}, "workloads[0].kind"),
        ),
    ),
    "GpuDirectNetworks": Case(
        wire={
            "project": PROJECT,
            "region": "us-central1",
            "namePrefix": "gpu",
            "flavor": "RDMA",
            "zone": "us-central1-b",
            "clusterRanges": ["10.0.0.0/20"],
        },
        children={
            f"{NAME}-gvnic-1": "gcp:compute/network:Network",
            f"{NAME}-rdma": "gcp:compute/network:Network",
            f"{NAME}-gvnic-1-internal": "gcp:compute/firewall:Firewall",
            **{
                f"{NAME}-{n}": "gcp:compute/subnetwork:Subnetwork"
                for n in ["gvnic-1", *(f"rdma-{i}" for i in range(8))]
            },
        },
        child_inputs={
            (
                f"{NAME}-rdma",
                "networkProfile",
            ): f"projects/{PROJECT}/global/networkProfiles/us-central1-b-vpc-roce",
            (f"{NAME}-rdma-0", "ipCidrRange"): "192.168.104.0/21",
        },
        bad=(
            ({"zone": "us-east1-b"}, "zone"),
            ({"cidr": "10.0.0.0/16"}, "cidr"),
            ({"flavor": "IB"}, "flavor"),
        ),
    ),
    "GpuDirectSoftware": Case(
        wire={
            "flavor": "RDMA",
            "nodeNetworks": [{"network": "gpu-gvnic-1", "subnetwork": "gpu-gvnic-1"}]
            + [{"network": "gpu-rdma", "subnetwork": f"gpu-rdma-{i}"} for i in range(8)],
        },
        children={
            **{
                f"{NAME}-{n}-params": "kubernetes:networking.gke.io/v1:GKENetworkParamSet"
                for n in ["gvnic-1", *(f"rdma-{i}" for i in range(8))]
            },
            **{
                f"{NAME}-{n}-network": "kubernetes:networking.gke.io/v1:Network"
                for n in ["gvnic-1", *(f"rdma-{i}" for i in range(8))]
            },
            f"{NAME}-installer": "kubernetes:apps/v1:DaemonSet",
        },
        child_inputs={
            (f"{NAME}-rdma-0-params", "spec.deviceMode"): "RDMA",
            (f"{NAME}-rdma-0-params", "spec.vpcSubnet"): "gpu-rdma-0",
        },
        state={"flavor": "RDMA", "networkNames": ["gvnic-1", *(f"rdma-{i}" for i in range(8))]},
        bad=(
            ({"nodeNetworks": [{"network": "gpu-gvnic-1", "subnetwork": "gpu-gvnic-1"}]}, "node_networks"),
            ({"nodeNetworks[0].network": "Bad_Name"}, "node_networks[0].network"),
            ({"flavor": "TCPXX"}, "flavor"),
        ),
    ),
    "NcclAllReduce": Case(
        wire={
            "pool": "mega",
            "nodeSelector": {"cloud.google.com/gke-nodepool": "mega"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "machineType": "a3-megagpu-8g",
            "accelerator": "nvidia-h100-mega-80gb",
            "gpusPerNode": 8.0,
            "nodes": 2.0,
            "maxNodes": 4.0,
            "gpudirect": "TCPXO",
            "clusterQueue": "gpu-mega",
            "queued": True,
        },
        children={
            f"{NAME}-namespace": "kubernetes:core/v1:Namespace",
            f"{NAME}-local-queue": "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue",
            f"{NAME}-script": "kubernetes:core/v1:ConfigMap",
            f"{NAME}-network-policy": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            f"{NAME}-jobset": "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet",
        },
        child_inputs={
            (f"{NAME}-local-queue", "spec.clusterQueue"): "gpu-mega",
            (f"{NAME}-jobset", "metadata.name"): "nccl-mega",
            (f"{NAME}-jobset", "spec.failurePolicy.maxRestarts"): 0,
        },
        state={"jobsetName": "nccl-mega", "namespace": "gpu-nccl", "floorGbps": 151},
        bad=(
            ({"nodes": 5.0}, "nodes"),
            ({"gpudirect": "RDMA"}, "gpudirect"),
            ({"gpudirect": "IB"}, "gpudirect"),
        ),
    ),
}


def test_every_public_component_has_a_case() -> None:
    assert sorted(CASES) == sorted(PUBLIC_COMPONENTS)
    assert all(case.bad for case in CASES.values()), "each component refuses at least one bad input"


# ---------------------------------------------------------------------------------------------------


def _class(name: str) -> type[pulumi.ComponentResource]:
    return next(c for c in public_components() if c.__name__ == name)


@functools.cache
def _provider(name: str) -> Any:
    # One component per provider, so that each component's case stands on its own. Built once per
    # component (the analyzer is deterministic, and construct() reads the provider, never changes it).
    return package_schema.provider([_class(name)])


def _schema(name: str) -> dict[str, Any]:
    # What package_schema.generate([_class(name)]) returns: a fresh dict of the provider's schema.
    return json.loads(_provider(name).schema)


def _construct(component: str, wire: dict[str, Any]) -> RunResult:
    provider = _provider(component)

    def program() -> dict[str, Any]:
        result = provider.construct(
            NAME, component_type(component), copy.deepcopy(wire), pulumi.ResourceOptions()
        )
        return {"urn": result.urn, "state": result.state}

    return run_program({}, preview=False, program=program)


def _keys(path: str) -> list[str | int]:
    """`a.b[0].c` -> ["a", "b", 0, "c"]."""
    return [int(p[1:-1]) if p.startswith("[") else p for p in path.replace("[", ".[").split(".")]


def _at(value: Any, path: str) -> Any:
    for key in _keys(path):
        value = value[key]
    return value


def _set(wire: dict[str, Any], path: str, new: Any) -> dict[str, Any]:
    wire = copy.deepcopy(wire)
    *parents, last = _keys(path)
    target: Any = wire
    for key in parents:
        target = target[key]
    target[last] = new
    return wire


def _component(result: RunResult, component: str) -> Resource:
    return result.one(component_type(component), NAME)


@pytest.mark.parametrize("component", sorted(CASES))
def test_the_wire_data_fits_the_schema(component: str) -> None:
    # Keys the schema does not know would be dropped by the provider without a word.
    problems = package_schema.input_problems(
        _schema(component), component_type(component), CASES[component].wire
    )
    assert problems == []


@pytest.mark.parametrize("component", sorted(CASES))
def test_construct_registers_the_component_and_its_children(component: str) -> None:
    case = CASES[component]
    result = _construct(component, case.wire)
    assert result.error is None, f"{type(result.error).__name__}: {result.error}"
    me = _component(result, component)
    children = {r.name: r.type for r in result.children_of(me)}
    assert children == case.children
    for (child, path), expected in case.child_inputs.items():
        inputs = next(r.inputs for r in result.children_of(me) if r.name == child)
        assert _at(inputs, path) == expected, f"{child}: {path}"


@pytest.mark.parametrize("component", sorted(CASES))
def test_construct_returns_the_schemas_outputs_as_state(component: str) -> None:
    case = CASES[component]
    result = _construct(component, case.wire)
    assert result.error is None, f"{type(result.error).__name__}: {result.error}"
    assert result.outputs["urn"] == _component(result, component).urn
    state = result.outputs["state"]
    resource = _schema(component)["resources"][component_type(component)]
    outputs = resource.get("properties", {})
    assert set(resource.get("required", [])) <= set(state) <= set(outputs)
    for key, expected in case.state.items():
        assert state[key] == expected, key


BAD = [(c, patch, arg) for c in sorted(CASES) for patch, arg in CASES[c].bad]


@pytest.mark.parametrize(("component", "patch", "arg"), BAD, ids=[f"{c}-{a}" for c, _, a in BAD])
def test_a_bad_input_is_refused_naming_the_arg_before_any_child(
    component: str, patch: dict[str, Any], arg: str
) -> None:
    wire = CASES[component].wire
    for path, value in patch.items():
        wire = _set(wire, path, value)
    result = _construct(component, wire)
    error = result.error
    assert isinstance(error, (pulumi.InputPropertiesError, InputPropertyError)), repr(error)
    if isinstance(error, pulumi.InputPropertiesError):
        # The component's own check (InvalidArgsError), unwrapped from the SDK's ComponentInitError as
        # a plain InputPropertiesError (core/provider.py): one property error per problem, keyed by the
        # snake_case arg path, which the gRPC server sends as INVALID_ARGUMENT.
        assert not isinstance(error, (InvalidArgsError, pulumi.RunError)), repr(error)
        assert "invalid args" in error.message
        details = error.errors or []
        assert len(details) == error.message.count("\n  - ")
        assert any(d["property_path"] == arg and d["reason"] for d in details), details
    else:
        # The provider's check against the schema (a missing input, a bad enum value): camelCase.
        assert arg in error.property_path, (error.property_path, error.reason)
    assert [r.type for r in result.resources if r.type != component_type(component)] == []


def test_a_property_error_keeps_a_key_that_holds_a_colon() -> None:
    """Each property error is the problem's own path and reason: a label key with ": " stays whole."""
    wire = _set(CASES["GpuNodePool"].wire, "labels", {"team: a": "bad value!"})
    error = _construct("GpuNodePool", wire).error
    assert isinstance(error, pulumi.InputPropertiesError), repr(error)
    assert [(d["property_path"], d["reason"]) for d in error.errors or []] == [
        ("labels", "key 'team: a' is not a valid Kubernetes label key"),
        ("labels.team: a", "'bad value!' is not a valid Kubernetes label value"),
    ]


@pytest.mark.parametrize("component", sorted(CASES))
def test_each_missing_required_input_is_named_by_the_provider(component: str) -> None:
    required = _schema(component)["resources"][component_type(component)].get("requiredInputs", [])
    for key in required:
        wire = {k: v for k, v in CASES[component].wire.items() if k != key}
        with pytest.raises(InputPropertyError) as info:
            _provider(component).construct("x", component_type(component), wire, pulumi.ResourceOptions())
        assert info.value.reason == f"Missing required input '{key}' on '{component}'"


def test_the_provider_and_googles_protos_load_in_one_process_in_either_order() -> None:
    # The SDK's copy of google.rpc.Status clashes with googleapis-common-protos' (tools/pulumi_provider.py).
    first = ["from tools.pulumi_provider import ComponentProvider", "from google.rpc import status_pb2"]
    for order in (first, first[::-1]):
        code = "; ".join(
            [*order, "import pulumi.provider.server as s; assert s.status_pb2.Status is status_pb2.Status"]
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr


def test_the_package_token_is_the_providers() -> None:
    assert {component_type(c).split(":")[0] for c in CASES} == {PACKAGE}


class _AbortedError(Exception):
    pass


class _Context:
    """The part of a grpc.aio servicer context that Construct uses on an error."""

    def __init__(self) -> None:
        self.status: Any = None

    async def abort_with_status(self, status: Any) -> None:
        self.status = status
        raise _AbortedError


def test_the_grpc_server_sends_a_components_bad_args_as_invalid_argument_with_property_errors() -> None:
    """What the engine gets: the SDK's server turns the provider's error into INVALID_ARGUMENT with one
    PropertyError per problem in the status details (a RunError would come back as UNKNOWN)."""
    import asyncio

    from google.rpc import status_pb2
    from pulumi.provider.server import ProviderServicer
    from pulumi.runtime.proto import errors_pb2

    from tools.pulumi_provider import ComponentInitError  # noqa: F401 (the protos, reconciled first)

    wire = _set(CASES["GpuNodePool"].wire, "gpusPerNode", 3)
    raised = _construct("GpuNodePool", wire).error
    assert isinstance(raised, pulumi.InputPropertiesError)

    servicer = ProviderServicer(_provider("GpuNodePool"), [], "127.0.0.1:0")

    async def construct(request: Any, context: Any) -> Any:
        raise raised

    servicer._construct = construct  # type: ignore[method-assign]
    context = _Context()
    with pytest.raises(_AbortedError):
        asyncio.run(servicer.Construct(None, context))
    import grpc

    assert context.status.code == grpc.StatusCode.INVALID_ARGUMENT
    details = status_pb2.Status.FromString(dict(context.status.trailing_metadata)["grpc-status-details-bin"])
    errors = errors_pb2.InputPropertiesError()
    assert details.details[0].Unpack(errors)
    assert [(e.property_path, e.reason) for e in errors.errors] == [
        ("gpus_per_node", "3 is not offered for nvidia-l4; allowed: 1, 2, 4, 8")
    ]
