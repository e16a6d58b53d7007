"""Cluster features the newest machines' workloads use (issue 28 item 6): GKE's HPA performance
profile (on for a stack that serves models), Managed Prometheus' automatic application monitoring (opt
in) and the Managed Lustre CSI driver's version gate. Each is an in-place update, and each is left out
of the provider's inputs when unset, so GKE's own value reads back without a diff."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import AUTOPILOT_CLUSTER, L4_POOL, STANDARD_CLUSTER, config_error, render, stack_config
from tests.test_cluster import cluster_inputs, declare
from tests.test_component_args import refused
from tests.test_existing_cluster import GKE as EXISTING_GKE
from tests.test_serving import CHAT
from tests.test_serving import L4 as SERVING_L4

CLUSTER = "gcp:container/cluster:Cluster"
L4 = {**L4_POOL, "zones": ["us-central1-a"]}


def served(**cluster: Any) -> dict[str, Any]:
    return stack_config(
        cluster={**STANDARD_CLUSTER, **cluster},
        gpuPools=[SERVING_L4],
        serving=[{**CHAT, "maxModelLen": 8192}],
    )


@pytest.mark.parametrize(("profile", "sent"), [("performance", "PERFORMANCE"), ("none", "NONE")])
def test_the_hpa_profile_is_sent_as_gke_names_it(profile: str, sent: str) -> None:
    assert cluster_inputs(declare(hpa_profile=profile))["podAutoscaling"] == {"hpaProfile": sent}


def test_an_unset_hpa_profile_is_left_to_gke() -> None:
    # The provider's podAutoscaling is Optional+Computed: unset, GKE's default profile reads back as
    # no change.
    assert "podAutoscaling" not in cluster_inputs(declare())


def test_a_stack_that_serves_models_gets_the_performance_profile() -> None:
    cluster = render(served()).one(CLUSTER).inputs
    assert cluster["podAutoscaling"] == {"hpaProfile": "PERFORMANCE"}
    off = render(served(hpaProfile="none")).one(CLUSTER).inputs
    assert off["podAutoscaling"] == {"hpaProfile": "NONE"}


def test_a_stack_without_model_servers_leaves_the_profile_to_gke() -> None:
    cluster = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4])).one(CLUSTER).inputs
    assert "podAutoscaling" not in cluster
    asked = render(stack_config(cluster={**STANDARD_CLUSTER, "hpaProfile": "performance"}, gpuPools=[L4]))
    assert asked.one(CLUSTER).inputs["podAutoscaling"] == {"hpaProfile": "PERFORMANCE"}


def test_autopilot_takes_the_profile_too() -> None:
    settings_cluster = {**AUTOPILOT_CLUSTER, "hpaProfile": "performance"}
    cluster = render(stack_config(cluster=settings_cluster)).one(CLUSTER).inputs
    assert cluster["podAutoscaling"] == {"hpaProfile": "PERFORMANCE"}


@pytest.mark.parametrize(("on", "scope"), [(True, "ALL"), (False, "NONE")])
def test_automatic_application_monitoring_when_asked(on: bool, scope: str) -> None:
    prometheus = cluster_inputs(declare(auto_monitoring=on))["monitoringConfig"]["managedPrometheus"]
    assert prometheus == {"enabled": True, "autoMonitoringConfig": {"scope": scope}}


def test_automatic_application_monitoring_is_left_to_gke_by_default() -> None:
    prometheus = cluster_inputs(declare())["monitoringConfig"]["managedPrometheus"]
    assert prometheus == {"enabled": True}
    from_stack = render(served(autoMonitoring=True)).one(CLUSTER).inputs
    assert from_stack["monitoringConfig"]["managedPrometheus"]["autoMonitoringConfig"] == {"scope": "ALL"}


def test_our_model_server_scrape_stays_with_automatic_monitoring() -> None:
    """The autoscaler reads vLLM's queue from our PodMonitoring's series; GKE's automatic monitoring does
    not document which of our workloads it would find (docs/serving.md): ours stays."""
    result = render(served(autoMonitoring=True))
    monitors = result.of_type("kubernetes:monitoring.googleapis.com/v1:PodMonitoring")
    assert [m.inputs["metadata"]["namespace"] for m in monitors].count("serve-chat") == 1


def test_an_existing_cluster_takes_neither_setting() -> None:
    message = config_error({"cluster": {**EXISTING_GKE, "hpaProfile": "none", "autoMonitoring": True}})
    for key in ("hpaProfile", "autoMonitoring"):
        assert f"gke-gpu:cluster.{key}: not allowed with mode existing" in message


def test_a_bad_profile_names_the_key_and_the_choices() -> None:
    message = config_error({"cluster": {**STANDARD_CLUSTER, "hpaProfile": "fast"}})
    assert "gke-gpu:cluster.hpaProfile" in message and "'performance'" in message and "'none'" in message


def test_the_lustre_driver_needs_its_gke_version() -> None:
    problems = refused(
        "GkeCluster", {**_cluster_args(), "lustre_csi_driver": True, "minimum_version": "1.33.1"}
    )
    assert [str(p) for p in problems] == [
        "lustre_csi_driver: true needs minimum_version 1.33.2-gke.1111000 or later (GKE's Managed Lustre "
        "CSI driver); minimum_version is 1.33.1"
    ]
    on = cluster_inputs(declare(lustre_csi_driver=True, minimum_version="1.33.2-gke.1111000"))
    assert on["addonsConfig"] == {"lustreCsiDriverConfig": {"enabled": True}}


def test_the_lustre_driver_on_autopilot() -> None:
    on = cluster_inputs(declare(autopilot=True, system_pool=None, lustre_csi_driver=True))
    assert on["addonsConfig"] == {"lustreCsiDriverConfig": {"enabled": True}}
    assert "addonsConfig" not in cluster_inputs(declare(autopilot=True, system_pool=None))


def _cluster_args() -> dict[str, Any]:
    from tests.test_component_args import CLUSTER as ARGS

    return dict(ARGS)
