"""The Kubernetes-layer components alone: each declared on its own, from its args, under mocks."""

from __future__ import annotations

import json

import pulumi
import pulumi_kubernetes as k8s
import yaml

from gke_gpu.cluster.existing import ExistingCluster
from gke_gpu.gpu.compute_class import GpuComputeClass, compute_class_args
from gke_gpu.gpu.device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from gke_gpu.gpu.node_labels import GpuNodeLabels, GpuNodeLabelsArgs
from gke_gpu.gpu.scheduling import GPU_TOLERATION
from gke_gpu.monitoring.dcgm_exporter import DcgmExporter, DcgmExporterArgs
from gke_gpu.monitoring.dcgm_exporter_args import DcgmFlavor, ScrapeMode
from gke_gpu.monitoring.gpu_monitoring import DcgmSource, GpuMonitoring, GpuMonitoringArgs
from gke_gpu.workloads.samples import SampleWorkloads
from gke_gpu.workloads.samples_args import GpuTarget, SampleKind, SampleWorkloadsArgs
from tests.conftest import AUTOPILOT_CLUSTER, settings
from tests.kubernetes_schemas import validate
from tools.offline import SECRET, RunResult, run_program
from tools.plan import kubernetes_objects, to_document


def declare(build) -> RunResult:
    """Run `build(provider)` alone under mocks; check every child is inside the component."""

    def program():
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1")
        build(pulumi.ResourceOptions(provider=provider))

    result = run_program({}, program=program)
    assert result.error is None, result.error
    (top,) = [
        r
        for r in result.resources
        if r.is_component and r.parent.endswith("::pulumi:pulumi:Stack::gke-gpu-test")
    ]
    for r in result.resources:
        if r is not top and r.type != "pulumi:providers:kubernetes":
            assert r.urn.startswith(top.urn.rsplit("::", 1)[0]), f"{r.name} is outside {top.name}"
    for obj in kubernetes_objects(to_document(result)):
        validate(obj)
    return result


def test_compute_class_prefers_spot_then_on_demand() -> None:
    (profile,) = settings(
        {
            "cluster": AUTOPILOT_CLUSTER,
            "gpuPools": [{"name": "h100", "accelerator": "nvidia-h100-80gb", "spot": True, "gpusPerNode": 2}],
        }
    ).gpu_pools
    result = declare(
        lambda opts: GpuComputeClass("cc", compute_class_args(profile, region="us-central1"), opts=opts)
    )
    spec = result.one("kubernetes:cloud.google.com/v1:ComputeClass").inputs["spec"]
    assert spec["priorities"] == [
        {"gpu": {"type": "nvidia-h100-80gb", "count": 2, "driverVersion": "default"}, "spot": True},
        {"gpu": {"type": "nvidia-h100-80gb", "count": 2, "driverVersion": "default"}, "spot": False},
    ]
    assert spec["whenUnsatisfiable"] == "DoNotScaleUp"


def test_dcgm_exporter_alone_with_annotation_scraping() -> None:
    args: DcgmExporterArgs = {
        "flavor": DcgmFlavor.GKE,
        "tolerations": [GPU_TOLERATION],
        "scrape": ScrapeMode.ANNOTATIONS,
        "namespace": "metrics",
        "scraper_namespace": "monitoring",
    }
    result = declare(lambda opts: DcgmExporter("dcgm", args, opts=opts))
    assert {r.type for r in result.resources if r.custom} == {
        "pulumi:providers:kubernetes",
        "kubernetes:core/v1:Namespace",
        "kubernetes:core/v1:ServiceAccount",
        "kubernetes:apps/v1:DaemonSet",
        "kubernetes:core/v1:Service",
        "kubernetes:core/v1:ConfigMap",
        "kubernetes:networking.k8s.io/v1:NetworkPolicy",
    }
    assert result.one("kubernetes:apps/v1:DaemonSet").inputs["metadata"]["namespace"] == "metrics"
    assert result.one("kubernetes:core/v1:Service").inputs["spec"]["clusterIP"] == "None"


def test_gpu_monitoring_alone_without_dashboard_or_exporter() -> None:
    args: GpuMonitoringArgs = {
        "project": "p-123456",
        "cluster_name": "c",
        "dcgm": DcgmSource.MANAGED,
        "dashboard": False,
        "alerts": {
            "notification_channels": ["projects/p-123456/notificationChannels/1"],
            "idle_gpu_minutes": 30,
            "idle_gpu_utilization_percent": 10.0,
        },
    }
    result = declare(lambda opts: GpuMonitoring("mon", args, opts=opts))
    assert result.of_type("gcp:monitoring/dashboard:Dashboard") == []
    (policy,) = result.of_type("gcp:monitoring/alertPolicy:AlertPolicy")
    assert policy.inputs["project"] == "p-123456"
    assert policy.inputs["severity"] == "WARNING"


def test_sample_workloads_alone_on_a_bare_target() -> None:
    target: GpuTarget = {
        "name": "any",
        "node_selector": {"gpus": "true"},
        "tolerations": [GPU_TOLERATION],
        "gpus_per_pod": 1,
        "gke_driver": False,
    }
    args: SampleWorkloadsArgs = {
        "workloads": [{"kind": SampleKind.CUDA_VECTOR_ADD, "target": target}],
        "namespace": "smoke",
        "extra_labels": {"team": "ml"},
    }
    result = declare(lambda opts: SampleWorkloads("s", args, opts=opts))
    job = result.one("kubernetes:batch/v1:Job").inputs
    assert job["metadata"]["namespace"] == "smoke"
    assert job["metadata"]["labels"]["team"] == "ml"
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"gpus": "true"}


def test_device_plugin_alone() -> None:
    args: NvidiaDevicePluginArgs = {
        "node_selector": {"gpus": "true"},
        "time_slicing_replicas": 8,
        "runtime_class_name": "nvidia",
    }
    result = declare(lambda opts: NvidiaDevicePlugin("dp", args, opts=opts))
    config = yaml.safe_load(result.one("kubernetes:core/v1:ConfigMap").inputs["data"]["config.yaml"])
    assert config["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 8
    assert config["sharing"]["timeSlicing"]["failRequestsGreaterThanOne"] is True
    pod = result.one("kubernetes:apps/v1:DaemonSet").inputs["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == "nvidia"


def test_node_labels_alone() -> None:
    args: GpuNodeLabelsArgs = {
        "nodes": ["a", "b"],
        "label_key": "gpus",
        "label_value": "true",
        "taint": False,
    }
    result = declare(lambda opts: GpuNodeLabels("nodes", args, opts=opts))
    patches = result.of_type("kubernetes:core/v1:NodePatch")
    assert sorted(p.inputs["metadata"]["name"] for p in patches) == ["a", "b"]
    assert all("spec" not in p.inputs for p in patches)


def test_existing_cluster_keeps_the_kubeconfig_secret() -> None:
    def program():
        ExistingCluster("c", {"kubeconfig": "apiVersion: v1\nkind: Config", "context": "lab"})

    result = run_program({}, program=program)
    assert result.error is None
    provider = result.one("pulumi:providers:kubernetes").inputs
    assert provider["kubeconfig"] == SECRET
    assert provider["context"] == "lab"
    assert json.dumps(provider).count("apiVersion: v1") == 0, "the kubeconfig never shows in plain text"
