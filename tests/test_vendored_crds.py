"""The Kueue (v0.19.2), JobSet (v0.12.0), LeaderWorkerSet (v0.10.0), GKE networking (Network,
GKENetworkParamSet), InferencePool (gateway-api-inference-extension v1.6.0) and Gateway API (Gateway,
HTTPRoute; v1.5.1) CRDs vendored verbatim in tests/schemas/crds (see SOURCES.md): each file is the
published one unchanged, and `validate` checks an object of each kind against the openAPIV3Schema of
its apiVersion there, unknown fields failing as for other kinds."""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any

import jsonschema
import pytest

from tests.kubernetes_schemas import (
    CRD_SCHEMAS,
    SCHEMAS,
    _python_pattern,
    _strict,
    crd_manifest,
    crd_schema,
    validate,
    validator_schema,
)

KUEUE = "kueue.x-k8s.io/v1beta2"
JOBSET = "jobset.x-k8s.io/v1alpha2"
# Git blob ids of the files as published: kubernetes-sigs/kueue tag v0.19.2 (commit 8eab6877),
# config/components/crd/bases/; kubernetes-sigs/jobset tag v0.12.0 (commit f22e565a), same folder.
KUEUE_CRDS = "crds/kueue.x-k8s.io/kueue.x-k8s.io_"
GKE_NETWORKING_CRDS = "crds/networking.gke.io/networking.gke.io_"
LWS_CRD = "crds/leaderworkerset.x-k8s.io/leaderworkerset.x-k8s.io_leaderworkersets.yaml"
LWS = "leaderworkerset.x-k8s.io/v1"
GATEWAY_CRDS = "crds/gateway.networking.k8s.io/gateway.networking.k8s.io_"
VENDORED_BLOBS = {
    f"{KUEUE_CRDS}resourceflavors.yaml": "6c3216d8ce5f59a77dcee45e3697bc110a249df9",
    f"{KUEUE_CRDS}clusterqueues.yaml": "a605e10a33050f30a5a31a5240444216a2a4f553",
    f"{KUEUE_CRDS}localqueues.yaml": "379c64452ad090fa12861c24aad7f102d0118a5f",
    f"{KUEUE_CRDS}admissionchecks.yaml": "317662baa1e7653915510c627ac91c020926c0ca",
    f"{KUEUE_CRDS}provisioningrequestconfigs.yaml": "95ed0039d027647ac09b3bfd7f529cb1cacfca31",
    f"{KUEUE_CRDS}topologies.yaml": "f5a2774bbc83a5aedbe4272ecb780c399da09532",
    f"{KUEUE_CRDS}multikueueclusters.yaml": "f3c03c98e46045c2b161bd0064d7bb561e11d134",
    f"{KUEUE_CRDS}multikueueconfigs.yaml": "005fc751e55970a1061ff04ed3f8f417275eef2d",
    "crds/jobset.x-k8s.io/jobset.x-k8s.io_jobsets.yaml": "96add10d030c2ab2c94b1c774edd23c814692808",
    # kubernetes-sigs/lws tag v0.10.0 (commit 2161f38f), charts/lws/crds/ (the Helm chart's copy).
    LWS_CRD: "b48ed287c311f20c14a5667be6a5901bba81a05a",
    # GoogleCloudPlatform/gke-networking-api@34c617f2 (2025-12-12), config/crds/.
    f"{GKE_NETWORKING_CRDS}gkenetworkparamsets.yaml": "01dcb67e88e37eda2133fc4089ed904ac01032b0",
    f"{GKE_NETWORKING_CRDS}networks.yaml": "e136f9ab19130d6084a4c9fe9ae9bda3d0f32dd9",
    # kubernetes-sigs/gateway-api-inference-extension tag v1.6.0 (commit 992e5c29), config/crd/bases/.
    "crds/inference.networking.k8s.io/inference.networking.k8s.io_inferencepools.yaml": (
        "99b47edc6726e4ad5a8ec6b91287a1c2acb54246"
    ),
    # kubernetes-sigs/gateway-api tag v1.5.1 (commit e7677b70), config/crd/standard/.
    f"{GATEWAY_CRDS}gateways.yaml": "ebcd948aa2e9dd7d8dd438c9fbdc693306f517eb",
    f"{GATEWAY_CRDS}httproutes.yaml": "9439f4e5855d347a26675839530c57daa5072bbd",
    # kubernetes-sigs/dra-driver-nvidia-gpu tag v0.4.0 (commit 6910a2be),
    # deployments/helm/dra-driver-nvidia-gpu/crds/.
    "crds/resource.nvidia.com/resource.nvidia.com_computedomains.yaml": (
        "0811b3ce2c8e38dad3db6b8df309a43d33a475b9"
    ),
    # kubernetes-sigs/cluster-inventory-api@8375ac21 (2026-05-18), config/crd/bases/.
    "crds/multicluster.x-k8s.io/multicluster.x-k8s.io_clusterprofiles.yaml": (
        "d3f53611a2fe6fc68d7c01b148e2d154d50d1fe1"
    ),
    # GoogleCloudPlatform/prometheus-engine@2ffde4ec (2026-07-02), charts/operator/crds/.
    "crds/monitoring.googleapis.com/monitoring.googleapis.com_podmonitorings.yaml": (
        "60d8711944333275514069f1f9f9c9f65897b1a8"
    ),
}
GKE_NETWORKING = "networking.gke.io/v1"
GATEWAY = "gateway.networking.k8s.io/v1"
VALID: dict[str, dict[str, Any]] = {
    # Kueue v0.19.2's example of what a cloud's inventory sync creates (site/content/en/docs/tasks/
    # manage/setup_multikueue.md:206-223).
    "ClusterProfile": {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {
            "name": "multikueue-worker-1",
            "namespace": "kueue-system",
            "labels": {"x-k8s.io/cluster-manager": "gke-fleet"},
        },
        "spec": {"clusterManager": {"name": "gke-fleet"}, "displayName": "multikueue-worker-1"},
        "status": {
            "accessProviders": [
                {"name": "google", "cluster": {"server": "https://connectgateway.googleapis.com"}}
            ]
        },
    },
    "PodMonitoring": {
        "apiVersion": "monitoring.googleapis.com/v1",
        "kind": "PodMonitoring",
        "metadata": {"name": "kueue", "namespace": "kueue-system"},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "kueue"}},
            "endpoints": [
                {
                    "port": "metrics",
                    "interval": "30s",
                    "scheme": "https",
                    "authorization": {
                        "type": "Bearer",
                        "credentials": {"secret": {"name": "t", "key": "token"}},
                    },
                    "tls": {"insecureSkipVerify": True},
                }
            ],
        },
    },
    "ComputeDomain": {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": "nccl-a4x", "namespace": "gpu-nccl-a4x"},
        "spec": {"numNodes": 2, "channel": {"resourceClaimTemplate": {"name": "nccl-a4x-channel"}}},
    },
    "ResourceFlavor": {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": "h200"},
        "spec": {
            "nodeLabels": {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    },
    "ClusterQueue": {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": "gpu"},
        "spec": {
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {"name": "h200", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16}]}
                    ],
                }
            ],
            "admissionChecksStrategy": {"admissionChecks": [{"name": "dws-prov"}]},
        },
    },
    "LocalQueue": {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": "gpu", "namespace": "training"},
        "spec": {"clusterQueue": "gpu"},
    },
    "Topology": {
        "apiVersion": KUEUE,
        "kind": "Topology",
        "metadata": {"name": "gke-default"},
        "spec": {
            "levels": [
                {"nodeLabel": "cloud.google.com/gce-topology-block"},
                {"nodeLabel": "kubernetes.io/hostname"},
            ]
        },
    },
    "AdmissionCheck": {
        "apiVersion": KUEUE,
        "kind": "AdmissionCheck",
        "metadata": {"name": "dws-prov"},
        "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "ProvisioningRequestConfig",
                "name": "dws-config",
            },
        },
    },
    "MultiKueueConfig": {
        "apiVersion": KUEUE,
        "kind": "MultiKueueConfig",
        "metadata": {"name": "multikueue-h100-research"},
        "spec": {"clusters": ["us-east", "eu-west"]},
    },
    "MultiKueueCluster": {
        "apiVersion": KUEUE,
        "kind": "MultiKueueCluster",
        "metadata": {"name": "us-east"},
        "spec": {
            "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "multikueue-us-east"}}
        },
    },
    "ProvisioningRequestConfig": {
        "apiVersion": KUEUE,
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "dws-config"},
        "spec": {
            "provisioningClassName": "queued-provisioning.gke.io",
            "managedResources": ["nvidia.com/gpu"],
        },
    },
    "JobSet": {
        "apiVersion": JOBSET,
        "kind": "JobSet",
        "metadata": {
            "name": "train",
            "namespace": "training",
            "labels": {"kueue.x-k8s.io/queue-name": "gpu"},
        },
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 1,
                            "completions": 1,
                            "backoffLimit": 0,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [
                                        {
                                            "name": "train",
                                            "image": "busybox",
                                            "resources": {"limits": {"nvidia.com/gpu": 8}},
                                        }
                                    ],
                                }
                            },
                        }
                    },
                }
            ]
        },
    },
    "LeaderWorkerSet": {
        "apiVersion": LWS,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm", "namespace": "serving"},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 2,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "workerTemplate": {
                    "spec": {
                        "containers": [
                            {
                                "name": "vllm",
                                "image": "busybox",
                                "resources": {"limits": {"nvidia.com/gpu": 8}},
                            }
                        ]
                    }
                },
            },
        },
    },
    "GKENetworkParamSet": {
        "apiVersion": GKE_NETWORKING,
        "kind": "GKENetworkParamSet",
        "metadata": {"name": "rdma-0"},
        "spec": {"vpc": "gpu-rdma", "vpcSubnet": "gpu-rdma-0", "deviceMode": "RDMA"},
    },
    "Network": {
        "apiVersion": GKE_NETWORKING,
        "kind": "Network",
        "metadata": {"name": "rdma-0"},
        "spec": {
            "type": "Device",
            "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": "rdma-0"},
        },
    },
    "InferencePool": {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": "chat", "namespace": "serve-chat"},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "chat"}},
            "targetPorts": [{"number": 8000}],
            "endpointPickerRef": {"name": "chat-epp", "port": {"number": 9002}},
        },
    },
    "Gateway": {
        "apiVersion": GATEWAY,
        "kind": "Gateway",
        "metadata": {"name": "chat", "namespace": "serve-chat"},
        "spec": {
            "gatewayClassName": "gke-l7-rilb",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        },
    },
    "HTTPRoute": {
        "apiVersion": GATEWAY,
        "kind": "HTTPRoute",
        "metadata": {"name": "chat", "namespace": "serve-chat"},
        "spec": {
            "parentRefs": [{"name": "chat"}],
            "rules": [
                {
                    "backendRefs": [
                        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "chat"}
                    ]
                }
            ],
        },
    },
}


def _set(path: str, value: Any):
    """A change that sets the field at a dotted path (list indices as numbers)."""

    def change(obj: dict[str, Any]) -> None:
        *parents, last = [int(part) if part.isdigit() else part for part in path.split(".")]
        for part in parents:
            obj = obj[part]
        obj[last] = value

    return change


def _drop(path: str):
    """A change that removes the field at a dotted path."""

    def change(obj: dict[str, Any]) -> None:
        *parents, last = [int(part) if part.isdigit() else part for part in path.split(".")]
        for part in parents:
            obj = obj[part]
        del obj[last]

    return change


WORKERS = "spec.replicatedJobs.0.template.spec"
INVALID = [
    ("ResourceFlavor", _set("spec.nodeLabel", {"a": "b"}), "'nodeLabel' was unexpected"),
    ("ResourceFlavor", _set("spec.tolerations", {"key": "nvidia.com/gpu"}), "is not of type 'array'"),
    (
        "ClusterQueue",
        _set("spec.resourceGroups.0.flavors.0.resources.0.nominalQuota", {"value": 16}),
        "is not valid under any of the given schemas",
    ),
    ("ClusterQueue", _set("spec.admissionChecks", ["dws-prov"]), "'admissionChecks' was unexpected"),
    (
        "ClusterQueue",
        _drop("spec.resourceGroups.0.coveredResources"),
        "'coveredResources' is a required property",
    ),
    ("LocalQueue", _set("spec.clusterQeueue", "gpu"), "'clusterQeueue' was unexpected"),
    ("LocalQueue", _set("spec.clusterQueue", "GPU_queue"), "does not match"),
    ("LocalQueue", _set("metadata.lables", {"a": "b"}), "'lables' was unexpected"),
    ("Topology", _set("spec.levels", []), "should be non-empty"),
    ("Topology", _set("spec.levels.0.nodeLabel", "Not A Label"), "does not match"),
    ("Topology", _set("spec.levels.0.label", "x"), "'label' was unexpected"),
    ("AdmissionCheck", _drop("spec.controllerName"), "'controllerName' is a required property"),
    ("AdmissionCheck", _set("spec.parameters.kind", "Provisioning_Request"), "does not match"),
    ("ProvisioningRequestConfig", _set("spec.managedResources", "nvidia.com/gpu"), "is not of type 'array'"),
    ("MultiKueueConfig", _set("spec.clusters", []), "should be non-empty"),
    ("MultiKueueConfig", _set("spec.quotaManagement", "Auto"), "is not one of"),
    (
        "MultiKueueCluster",
        _drop("spec.clusterSource.kubeConfig.location"),
        "'location' is a required property",
    ),
    ("MultiKueueCluster", _set("spec.clusterSource.kubeConfig.locationType", "File"), "is not one of"),
    ("ProvisioningRequestConfig", _drop("spec.provisioningClassName"), "is a required property"),
    ("JobSet", _set("spec.replicatedJobs", {"workers": {"replicas": 2}}), "is not of type 'array'"),
    ("JobSet", _set("spec.replicatedJobs.0.replicas", "2"), "is not of type 'integer'"),
    ("JobSet", _set(f"{WORKERS}.template.spec.containers.0.imagee", "x"), "'imagee' was unexpected"),
    ("JobSet", _set("specs", {}), "'specs' was unexpected"),
    ("LeaderWorkerSet", _set("spec.leaderWorkerTemplate.restartPolicy", "Always"), "is not one of"),
    ("LeaderWorkerSet", _set("spec.startupPolicy", "LeaderStarted"), "is not one of"),
    ("LeaderWorkerSet", _set("spec.leaderWorkerTemplate.size", "2"), "is not of type 'integer'"),
    ("LeaderWorkerSet", _drop("spec.leaderWorkerTemplate.workerTemplate"), "'workerTemplate' is a required"),
    (
        "LeaderWorkerSet",
        _set("spec.leaderWorkerTemplate.workerTemplate.spec.nodeSelectors", {}),
        "was unexpected",
    ),
    ("LeaderWorkerSet", _set("spec.rolloutStrategy", {"type": "Recreate"}), "is not one of"),
    ("GKENetworkParamSet", _set("spec.deviceMode", "Rdma"), "is not one of"),
    ("GKENetworkParamSet", _set("spec.vpcSubnets", "x"), "'vpcSubnets' was unexpected"),
    ("Network", _set("spec.type", "device"), "is not one of"),
    ("Network", _drop("spec.type"), "'type' is a required property"),
    ("Network", _drop("spec.parametersRef.group"), "'group' is a required property"),
    (
        "LeaderWorkerSet",
        _set("spec.leaderWorkerTemplate.leaderTemplates", {}),
        "'leaderTemplates' was unexpected",
    ),
    (
        "LeaderWorkerSet",
        _set("spec.leaderWorkerTemplate.workerTemplate.spec.containers.0.volumeMounts", [{"name": "cache"}]),
        "'mountPath' is a required property",
    ),
    ("InferencePool", _drop("spec.targetPorts"), "'targetPorts' is a required property"),
    ("InferencePool", _set("spec.targetPorts.0.number", 70000), "is greater than the maximum"),
    ("InferencePool", _set("spec.endpointPickerRef.failureMode", "Open"), "is not one of"),
    ("InferencePool", _set("spec.selector", {"app": "chat"}), "'matchLabels' is a required property"),
    ("Gateway", _drop("spec.gatewayClassName"), "'gatewayClassName' is a required property"),
    ("Gateway", _set("spec.listeners.0.protocol", 80), "is not of type 'string'"),
    ("Gateway", _set("spec.listeners", []), "should be non-empty"),
    ("HTTPRoute", _set("spec.rules.0.backendRefs.0.kind", "Inference Pool"), "does not match"),
    ("HTTPRoute", _set("spec.rules.0.timeout", "300s"), "'timeout' was unexpected"),
    ("PodMonitoring", _set("spec.endpoints.0.scheme", "HTTPS"), "is not one of"),
    ("PodMonitoring", _drop("spec.endpoints.0.interval"), "'interval' is a required property"),
    ("PodMonitoring", _set("spec.endpoints.0.tls.insecureSkipVerify", "yes"), "is not of type"),
    ("PodMonitoring", _set("spec.endpoints.0.authorization.type", "Basic"), "basic_auth"),
    ("ComputeDomain", _drop("spec.channel"), "'channel' is a required property"),
    ("ComputeDomain", _set("spec.numNodes", -1), "is less than the minimum"),
    ("ComputeDomain", _set("spec.channel.allocationMode", "Many"), "is not one of"),
    ("ComputeDomain", _drop("spec.channel.resourceClaimTemplate.name"), "'name' is a required property"),
]


def _blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def test_every_vendored_crd_manifest_is_mapped_and_hashed() -> None:
    mapped = {f for files in CRD_SCHEMAS.values() for f in files if f.endswith(".yaml")}
    on_disk = {str(p.relative_to(SCHEMAS)) for p in (SCHEMAS / "crds").rglob("*") if p.is_file()}
    assert mapped == on_disk == set(VENDORED_BLOBS)
    assert {kind for (_, kind), files in CRD_SCHEMAS.items() if files[0] in mapped} == set(VALID)


@pytest.mark.parametrize("filename", sorted(VENDORED_BLOBS))
def test_vendored_crd_is_the_published_file_unchanged(filename: str) -> None:
    assert _blob((SCHEMAS / filename).read_bytes()) == VENDORED_BLOBS[filename], (
        "re-vendor verbatim and update SOURCES.md and VENDORED_BLOBS"
    )


@pytest.mark.parametrize(
    ("api_version", "kind", "filename"),
    [(*key, filename) for key, files in sorted(CRD_SCHEMAS.items()) for filename in files],
)
def test_each_schema_validate_uses_is_a_valid_json_schema(api_version: str, kind: str, filename: str) -> None:
    # Checked once here rather than wherever a process builds its validator (the LeaderWorkerSet
    # CRD's, with two Pod templates, takes about a second).
    jsonschema.Draft202012Validator.check_schema(validator_schema(filename, api_version, kind))


@pytest.mark.parametrize("kind", sorted(VALID))
def test_minimal_object_passes(kind: str) -> None:
    validate(copy.deepcopy(VALID[kind]))


@pytest.mark.parametrize(
    ("kind", "change", "message"), INVALID, ids=[f"{kind}-{message}" for kind, _, message in INVALID]
)
def test_broken_object_fails(kind: str, change: Any, message: str) -> None:
    obj = copy.deepcopy(VALID[kind])
    change(obj)
    with pytest.raises(AssertionError, match=re.escape(message)):
        validate(obj)


def test_local_queue_crd_does_not_require_a_cluster_queue() -> None:
    """A gap of the published schema (v0.19.2, v1beta2): spec.clusterQueue is optional there, so a
    LocalQueue without one passes; a check of our own must require it."""
    obj = copy.deepcopy(VALID["LocalQueue"])
    del obj["spec"]["clusterQueue"]
    validate(obj)
    spec = crd_schema(CRD_SCHEMAS[(KUEUE, "LocalQueue")][0], KUEUE, "LocalQueue")["properties"]["spec"]
    assert "clusterQueue" in spec["properties"] and "clusterQueue" not in spec.get("required", [])


def test_v1beta1_is_not_what_v1beta2_objects_are_checked_against() -> None:
    """The manifests serve v1beta1 and v1beta2; validation picks the apiVersion's own version."""
    cq = crd_schema(CRD_SCHEMAS[(KUEUE, "ClusterQueue")][0], KUEUE, "ClusterQueue")["properties"]["spec"]
    assert "admissionChecksStrategy" in cq["properties"] and "admissionChecks" not in cq["properties"]
    old = crd_schema(CRD_SCHEMAS[(KUEUE, "ClusterQueue")][0], "kueue.x-k8s.io/v1beta1", "ClusterQueue")
    assert "admissionChecks" in old["properties"]["spec"]["properties"]
    with pytest.raises(AssertionError, match="no schema for"):
        validate({**VALID["ClusterQueue"], "apiVersion": "kueue.x-k8s.io/v1beta1"})


def test_strict_closes_objects_only_at_schema_positions() -> None:
    schema = {
        "type": "object",
        "properties": {
            "properties": {"type": "object", "properties": {"a": {"type": "string"}}},
            "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
            "list": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "integer"}}}},
        },
    }
    strict = _strict(schema)
    assert strict["additionalProperties"] is False
    assert "additionalProperties" not in strict["properties"]
    assert strict["properties"]["properties"]["additionalProperties"] is False
    assert "additionalProperties" not in strict["properties"]["open"]
    assert strict["properties"]["map"]["additionalProperties"] == {"type": "string"}
    assert strict["properties"]["list"]["items"]["additionalProperties"] is False
    assert "additionalProperties" not in schema, "the published schema is not modified"


def test_every_pattern_of_the_vendored_crds_compiles_in_python() -> None:
    """The API server's regexes are RE2; `_python_pattern` must make each one Python's re reads."""
    patterns: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                patterns.add(node["pattern"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for filename in VENDORED_BLOBS:
        walk(crd_manifest(filename)["spec"]["versions"])
    for pattern in patterns:
        re.compile(_python_pattern(pattern))
    assert re.fullmatch(_python_pattern("^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$"), "ProvisioningRequestConfig")
