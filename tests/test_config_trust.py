"""Issue 8: a config layer that refuses what it must, reports every independent problem once, and
nothing else: namespaces, staged validation, bounds on values that reach GCP or a query, and the
catalog's facts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gke_gpu.stack.config import ConfigError, parse_settings, settings_from_config
from gke_gpu.stack.keys import PROVIDER_KEYS_PATH, check_config_keys
from tests.conftest import AUTOPILOT_CLUSTER, L4_POOL, STANDARD_CLUSTER, config_error, pool_args, settings


def standard(*pools: dict, **extra: object) -> dict:
    return {"cluster": STANDARD_CLUSTER, "gpuPools": list(pools), **extra}


def problems_of(
    raw: dict, *, project: str | None = "test-project", region: str | None = "us-central1"
) -> list:
    with pytest.raises(ConfigError) as info:
        parse_settings(raw, project=project, region=region, stack="test")
    return info.value.problems


def engine_config(**keys: object) -> dict[str, str]:
    import json

    base = {"gcp:project": "test-project", "gcp:region": "us-central1"}
    return {**base, **{k: v if isinstance(v, str) else json.dumps(v) for k, v in keys.items()}}


# -- namespaces --------------------------------------------------------------------------------------

NEAR_MISSES = {
    "gke_gpu:monitoring": "did you mean gke-gpu:monitoring?",
    "GKE-GPU:monitoring": "did you mean gke-gpu:monitoring?",
    "gcp:monitoring": "'monitoring' is a setting of this program; write it as gke-gpu:monitoring",
    "kubernetes:workloads": "'workloads' is a setting of this program; write it as gke-gpu:workloads",
    "kubernetes:context": "kubernetes: keys configure the default Kubernetes provider",
    "gcp:projct": "did you mean gcp:project?",
    "monitoring": "must be of the form <namespace>:<name> (as the Pulumi CLI requires); did you mean "
    "gke-gpu:monitoring?",
    "aws:region": "namespace 'aws' is not read by this program",
    "gcp:zone": "has no effect here: every resource names its location",
}


@pytest.mark.parametrize(("key", "expected"), NEAR_MISSES.items(), ids=list(NEAR_MISSES))
def test_a_key_the_program_would_ignore_is_refused(key: str, expected: str) -> None:
    config = engine_config(**{"gke-gpu:cluster": AUTOPILOT_CLUSTER})
    config[key] = '{"alerts": {"enabled": true}}'
    with pytest.raises(ConfigError) as info:
        settings_from_config(config, stack="test")
    assert len(info.value.problems) == 1, info.value.problems
    assert info.value.problems[0].startswith(f"{key}: ")
    assert expected in info.value.problems[0]


def test_provider_and_engine_keys_are_accepted() -> None:
    keys = [
        "gcp:project",
        "gcp:region",
        "gcp:impersonateServiceAccount",
        "pulumi:tags",
        "gke-gpu:x",
    ]
    assert check_config_keys(keys) == []


def test_vendored_gcp_keys_match_the_installed_sdk() -> None:
    """The vendored list is what pulumi-gcp's own config module reads; fails when the pin moves."""
    import pulumi_gcp

    source = (Path(pulumi_gcp.__file__).parent / "config" / "vars.py").read_text(encoding="utf-8")
    installed = set(re.findall(r"__config__\.get\w*\('(\w+)'", source))
    vendored = set(yaml.safe_load(PROVIDER_KEYS_PATH.read_text(encoding="utf-8"))["gcp"])
    assert installed and vendored == installed


def test_a_deep_or_huge_engine_value_is_a_message() -> None:
    deep = "[" * 2000 + "]" * 2000
    with pytest.raises(ConfigError) as info:
        settings_from_config(
            engine_config(**{"gke-gpu:cluster": AUTOPILOT_CLUSTER, "gke-gpu:workloads": deep}), stack="t"
        )
    assert any(p.startswith("gke-gpu:workloads") for p in info.value.problems)


# -- staged validation: every independent problem once, no follow-on ones ------------------------------

PROD_LIKE = {
    "cluster": {"mode": "standard", "name": "gpu-prod"},
    "gpuPools": [
        {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 4},
        {"name": "a100", "accelerator": "nvidia-tesla-a100", "maxNodes": 2, "zones": ["us-central1-a"]},
    ],
    "workloads": ["nvidia-smi", {"name": "nvidia-smi", "pool": "a100"}],
}


def test_a_missing_region_is_one_problem() -> None:
    assert problems_of(PROD_LIKE, region=None) == [
        "gcp:region: required; set it with `pulumi config set gcp:region us-central1`"
    ]


def test_an_unknown_region_says_so_with_a_suggestion() -> None:
    problems = problems_of(PROD_LIKE, region="us-centrall1")
    assert len(problems) == 1
    assert problems[0].startswith(
        "gcp:region: 'us-centrall1' is not a Compute Engine region; did you mean 'us-central1'?"
    )
    assert "europe-west4" in problems[0]


def test_a_region_without_zone_data_needs_zones_but_is_accepted() -> None:
    value, warnings = parse_settings(
        standard({**L4_POOL, "zones": ["me-west1-a"]}), project="test-project", region="me-west1", stack="t"
    )
    assert value.gpu_pools[0].zones == ["me-west1-a"]
    assert any("could not be checked" in w for w in warnings)


def test_a_misspelt_accelerator_does_not_blame_the_workloads() -> None:
    raw = {
        **PROD_LIKE,
        "gpuPools": [{**PROD_LIKE["gpuPools"][0], "accelerator": "nvidia-l5"}, PROD_LIKE["gpuPools"][1]],
    }
    problems = problems_of(raw)
    assert len(problems) == 1 and problems[0].startswith("gke-gpu:gpuPools[0].accelerator: 'nvidia-l5'")


def test_one_run_reports_every_independent_problem() -> None:
    raw = {
        "cluster": {"mode": "standard", "name": "gpu-prod"},
        "gpuPools": [
            {"name": "l4", "accelerator": "nvidia-l4", "maxNodes": "two"},  # shape
            {"name": "t4", "accelerator": "nvidia-tesla-t4", "maxNodes": 2, "gpusPerNode": 3},  # meaning
            {"name": "ok", "accelerator": "nvidia-l4", "maxNodes": 1},
        ],
        "workloads": [{"name": "nvidia-smi", "pool": "nope"}, {"name": "bogus"}],
        "monitoring": {"dcgm": "sometimes"},
    }
    problems = problems_of(raw)
    assert [p.split(":")[1].split(" ")[0] for p in problems] == [
        "gpuPools[0].maxNodes",
        "monitoring.dcgm",
        "workloads[1].name",
        "gpuPools[1].gpusPerNode",
        "workloads[0].pool",
    ], problems


def test_a_workload_on_a_broken_pool_is_not_judged() -> None:
    raw = standard(
        {**L4_POOL, "gpusPerNode": 3}, workloads=["nvidia-smi", {"name": "sharing-demo", "pool": "l4"}]
    )
    problems = problems_of(raw)
    assert problems == [problems[0]] and "gpusPerNode" in problems[0]


def test_long_values_are_cut_in_messages() -> None:
    huge = "x" * 1_000_000
    message = config_error(standard({**L4_POOL, "accelerator": huge, "name": huge}))
    assert len(message) < 2000
    assert "(1000000 characters)" in message


# -- bounds on values that reach GCP or a query ------------------------------------------------------


EXISTING = {"mode": "existing", "flavor": "gke", "kubeconfig": "x", "name": "gpu"}
BOUNDS = {
    "existing cluster name pasted into filters": (
        {"cluster": {**EXISTING, "name": 'x" OR resource.label."cluster_name"=~".*'}},
        'gke-gpu:cluster.name: \'x" OR resource.label."cluster_name"=~".*\' is not a GKE cluster name',
    ),
    "generic cluster name with a quote": (
        {"cluster": {**EXISTING, "flavor": "generic", "name": 'a"b'}},
        "gke-gpu:cluster.name: 'a\"b' is not a cluster label value",
    ),
    "system pool machine type": (
        {"cluster": {**STANDARD_CLUSTER, "systemPool": {"machineType": "e2 standard; rm"}}},
        "gke-gpu:cluster.systemPool.machineType: 'e2 standard; rm' is not allowed; expected a GCE machine",
    ),
    "system pool on a GPU machine": (
        {"cluster": {**STANDARD_CLUSTER, "systemPool": {"machineType": "a4x-highgpu-4g"}}},
        "gke-gpu:cluster.systemPool.machineType: 'a4x-highgpu-4g' is a GPU machine type",
    ),
    "existing network name": (
        {
            "cluster": STANDARD_CLUSTER,
            "network": {
                "existing": {
                    "network": "My VPC",
                    "subnetwork": "s",
                    "podsRangeName": "p",
                    "servicesRangeName": "v",
                }
            },
        },
        "gke-gpu:network.existing.network: 'My VPC' is not allowed; expected a VPC name",
    ),
    "node count above GKE's limit": (
        standard({**L4_POOL, "maxNodes": 5000}),
        "gke-gpu:gpuPools[0].maxNodes: 5000 is not allowed; must be <= 1000",
    ),
    "disk size above the largest disk": (
        {"cluster": {**STANDARD_CLUSTER, "systemPool": {"diskSizeGb": 10**6}}},
        "gke-gpu:cluster.systemPool.diskSizeGb: 1000000 is not allowed; must be <= 65536",
    ),
    "a /30 subnet": (
        {"cluster": STANDARD_CLUSTER, "network": {"subnetCidr": "10.10.0.0/30"}},
        "gke-gpu:network.subnetCidr: 10.10.0.0/30 is too small; a Compute Engine subnet is at least a /29",
    ),
    "a subnet without room for the nodes": (
        standard({**L4_POOL, "maxNodes": 100}, network={"subnetCidr": "10.10.0.0/26"}),
        "gke-gpu:network.subnetCidr: 10.10.0.0/26 has 60 node addresses, but the pools can grow to 104 nodes",
    ),
    "too many authorized networks for a public endpoint": (
        {
            "cluster": {
                **STANDARD_CLUSTER,
                "publicEndpoint": True,
                "masterAuthorizedNetworks": [{"cidrBlock": f"10.0.{i}.0/24"} for i in range(51)],
            }
        },
        "gke-gpu:cluster.masterAuthorizedNetworks: has 51 entries; GKE allows at most 50 with a public",
    ),
    "200 authorized networks": (
        {
            "cluster": {
                **STANDARD_CLUSTER,
                "masterAuthorizedNetworks": [{"cidrBlock": f"10.0.{i}.0/24"} for i in range(200)],
            }
        },
        "gke-gpu:cluster.masterAuthorizedNetworks: has 200 entries",
    ),
    "too many notification channels": (
        {
            "cluster": AUTOPILOT_CLUSTER,
            "monitoring": {
                "alerts": {
                    "enabled": True,
                    "notificationChannels": [f"projects/p-1234/notificationChannels/{i}" for i in range(17)],
                }
            },
        },
        "gke-gpu:monitoring.alerts.notificationChannels: ",
    ),
    "control characters in a channel": (
        {
            "cluster": AUTOPILOT_CLUSTER,
            "monitoring": {
                "alerts": {
                    "enabled": True,
                    "notificationChannels": ["projects/p-1234/notificationChannels/1\x07"],
                }
            },
        },
        "gke-gpu:monitoring.alerts.notificationChannels[0]",
    ),
    "control characters in a context": (
        {"cluster": {**EXISTING, "context": "a\x1bb"}},
        "gke-gpu:cluster.context: 'a\\x1bb' is not allowed; expected printable text",
    ),
    "a scraper namespace that is not a namespace name": (
        {"cluster": STANDARD_CLUSTER, "monitoring": {"dcgm": "exporter", "scraperNamespace": "GMP System"}},
        "gke-gpu:monitoring.scraperNamespace: 'GMP System' is not allowed; expected a Kubernetes namespace",
    ),
}


@pytest.mark.parametrize(("raw", "expected"), BOUNDS.values(), ids=list(BOUNDS))
def test_values_that_reach_gcp_or_a_query_are_bounded(raw: dict, expected: str) -> None:
    assert expected in config_error(raw)


# -- settings that would be ignored, and monitoring facts ---------------------------------------------


def test_settings_that_would_be_ignored_are_refused() -> None:
    managed_xid = {
        "cluster": AUTOPILOT_CLUSTER,
        "monitoring": {
            "alerts": {
                "enabled": True,
                "xidErrors": True,
                "notificationChannels": ["projects/p-1234/notificationChannels/1"],
            }
        },
    }
    assert "gke-gpu:monitoring.alerts.xidErrors: true is not allowed with dcgm: managed" in config_error(
        managed_xid
    )
    disabled = {"cluster": AUTOPILOT_CLUSTER, "monitoring": {"alerts": {"idleGpuMinutes": 30}}}
    assert (
        "gke-gpu:monitoring.alerts: idleGpuMinutes would be ignored: alerts.enabled is not true"
        in config_error(disabled)
    )
    scraper = {"cluster": AUTOPILOT_CLUSTER, "monitoring": {"scraperNamespace": "prom"}}
    assert "gke-gpu:monitoring.scraperNamespace: only allowed with dcgm: exporter" in config_error(scraper)


def test_the_exporter_is_refused_beside_gke_managed_dcgm() -> None:
    message = config_error({"cluster": EXISTING, "monitoring": {"dcgm": "exporter"}})
    assert "gke-gpu:monitoring.dcgm: 'exporter' is not allowed on an existing GKE cluster" in message
    assert "1.32.1-gke.1357000" in message


def test_xid_alert_follows_the_exporter() -> None:
    exporter = settings(
        {
            "cluster": STANDARD_CLUSTER,
            "monitoring": {
                "dcgm": "exporter",
                "alerts": {
                    "enabled": True,
                    "notificationChannels": ["projects/p-1234/notificationChannels/1"],
                },
            },
        }
    )
    assert exporter.monitoring.alerts.xid_errors and exporter.monitoring.scraper_namespace == "gmp-system"


# -- the control-plane endpoint ----------------------------------------------------------------------


def test_the_ip_endpoint_is_private_by_default() -> None:
    value, warnings = parse_settings(
        {"cluster": STANDARD_CLUSTER}, project="test-project", region="us-central1", stack="t"
    )
    assert value.cluster.public_endpoint is False and warnings == []


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        (
            {"publicEndpoint": True},
            "gke-gpu:cluster.publicEndpoint: true with an empty masterAuthorizedNetworks opens",
        ),
        (
            {"publicEndpoint": True, "masterAuthorizedNetworks": [{"cidrBlock": "0.0.0.0/0"}]},
            "gke-gpu:cluster.publicEndpoint: true with 0.0.0.0/0 in masterAuthorizedNetworks opens",
        ),
        ({"masterAuthorizedNetworks": [{"cidrBlock": "0.0.0.0/0"}]}, "0.0.0.0/0 authorizes every address"),
        ({"publicEndpointOpenToInternet": True}, "only allowed with publicEndpoint: true"),
        (
            {
                "publicEndpoint": True,
                "publicEndpointOpenToInternet": True,
                "masterAuthorizedNetworks": [{"cidrBlock": "203.0.113.0/24"}],
            },
            "true contradicts masterAuthorizedNetworks",
        ),
    ],
)
def test_an_open_public_endpoint_must_be_meant(cluster: dict, expected: str) -> None:
    assert expected in config_error({"cluster": {**STANDARD_CLUSTER, **cluster}})


def test_an_open_public_endpoint_that_is_meant_is_a_warning() -> None:
    raw = {"cluster": {**STANDARD_CLUSTER, "publicEndpoint": True, "publicEndpointOpenToInternet": True}}
    value, warnings = parse_settings(raw, project="test-project", region="us-central1", stack="t")
    assert value.cluster.public_endpoint
    assert any("accepts connections from any address" in w for w in warnings)


def test_existing_clusters_refuse_endpoint_settings() -> None:
    assert "gke-gpu:cluster.binaryAuthorization: not allowed with mode existing" in config_error(
        {"cluster": {**EXISTING, "binaryAuthorization": True}}
    )


# -- facts (catalog) ---------------------------------------------------------------------------------


@pytest.mark.parametrize("accelerator", ["nvidia-tesla-p4", "nvidia-tesla-p100", "nvidia-tesla-v100"])
def test_autopilot_refuses_gpus_its_table_does_not_list(accelerator: str) -> None:
    message = config_error(
        {"cluster": AUTOPILOT_CLUSTER, "gpuPools": [{"name": "g", "accelerator": accelerator}]}
    )
    assert f"'{accelerator}' is not offered on Autopilot" in message


def test_rtx_pro_6000_on_autopilot_with_its_version_note() -> None:
    raw = {
        "cluster": AUTOPILOT_CLUSTER,
        "gpuPools": [{"name": "g4", "accelerator": "nvidia-rtx-pro-6000", "gpusPerNode": 2}],
    }
    value, warnings = parse_settings(raw, project="test-project", region="us-central1", stack="t")
    assert value.gpu_pools[0].gpus_per_node == 2
    assert any("needs GKE 1.34.1-gke.1829001 or later" in w for w in warnings)


def test_h100_small_shapes_on_autopilot_carry_their_version_gate() -> None:
    raw = {
        "cluster": AUTOPILOT_CLUSTER,
        "gpuPools": [{"name": "h", "accelerator": "nvidia-h100-80gb", "gpusPerNode": 1}],
    }
    _, warnings = parse_settings(raw, project="test-project", region="us-central1", stack="t")
    assert any("1.31.4-gke.1072000" in w for w in warnings)


def test_gb200_is_in_the_catalog() -> None:
    gb200 = {
        "name": "gb",
        "accelerator": "nvidia-gb200",
        "maxNodes": 2,
        "driverVersion": "LATEST",
        # A4X: reserved capacity only, and a workload policy above one node (tests/test_nvl72_racks.py).
        "reservation": {"type": "SPECIFIC", "name": "rack"},
        "workloadPolicy": True,
    }
    pool = settings(standard(gb200)).gpu_pools[0]
    assert (pool.machine_type, pool.gpus_per_node, pool.zones) == ("a4x-highgpu-4g", 4, ["us-central1-a"])
    assert pool.disk_type == "hyperdisk-balanced"
    assert "true is not allowed: nvidia-gb200 machine types are not sold as Spot VMs" in config_error(
        standard({**gb200, "spot": True})
    )
    message = config_error(standard(gb200, workloads=[{"name": "pytorch-smoke", "pool": "gb"}]))
    assert (
        "'gb' (nvidia-gb200) has arm64 hosts, and pytorch-smoke's image (pytorch/pytorch) is published "
        "for amd64 only" in message
    )
    assert settings(standard(gb200, workloads=[{"name": "nvidia-smi", "pool": "gb"}]))


def test_mps_before_volta_serves_16_clients() -> None:
    p4 = {"name": "p4", "accelerator": "nvidia-tesla-p4", "maxNodes": 1}
    message = config_error(standard({**p4, "sharing": {"strategy": "MPS", "maxClientsPerGpu": 17}}))
    assert "17 is not allowed with MPS on nvidia-tesla-p4" in message and "2..16" in message
    assert settings(standard({**p4, "sharing": {"strategy": "MPS", "maxClientsPerGpu": 16}}))
    assert settings(standard({**p4, "sharing": {"strategy": "TIME_SHARING", "maxClientsPerGpu": 48}}))


def test_the_device_plugin_is_not_capped_at_gke_sharing_limit() -> None:
    generic = {"mode": "existing", "flavor": "generic", "kubeconfig": "x"}
    value = settings(
        {
            "cluster": generic,
            "devicePlugin": {"sharing": {"timeSlicing": {"replicas": 100}}},
            "monitoring": {"dcgm": "none"},
        },
        project=None,
    )
    assert value.device_plugin.time_slicing_replicas == 100


def test_intranode_visibility_is_opt_in_on_standard_only() -> None:
    assert settings({"cluster": STANDARD_CLUSTER}).cluster.intranode_visibility is False
    assert settings(
        {"cluster": {**STANDARD_CLUSTER, "intranodeVisibility": True}}
    ).cluster.intranode_visibility
    message = config_error({"cluster": {**AUTOPILOT_CLUSTER, "intranodeVisibility": True}})
    assert "gke-gpu:cluster.intranodeVisibility: not allowed with mode autopilot" in message


@pytest.mark.parametrize("machine", ["n1-custom-4-16384", "custom-4-16384", "custom-8-65536-ext"])
def test_n1_custom_machine_types_carry_attachable_gpus(machine: str) -> None:
    t4 = {"name": "t4", "accelerator": "nvidia-tesla-t4", "maxNodes": 1, "machineType": machine}
    assert settings(standard(t4)).gpu_pools[0].machine_type == machine


def test_an_impossible_n1_custom_shape_is_refused() -> None:
    t4 = {"name": "t4", "accelerator": "nvidia-tesla-t4", "maxNodes": 1, "machineType": "custom-3-4096"}
    assert "gke-gpu:gpuPools[0].machineType: 'custom-3-4096' cannot carry nvidia-tesla-t4" in config_error(
        standard(t4)
    )


def test_a_zonal_cluster_in_a_region_without_zone_data_uses_its_zone() -> None:
    raw = {"cluster": {**STANDARD_CLUSTER, "location": "us-south1-a"}, "gpuPools": [L4_POOL]}
    value, warnings = parse_settings(raw, project="test-project", region="us-south1", stack="t")
    assert value.gpu_pools[0].zones == ["us-south1-a"]
    assert any("could not be checked" in w for w in warnings)


MISTAKES_WITH_ONE_PROBLEM = {
    "existing cluster without a flavor": (
        {"cluster": {"mode": "existing", "kubeconfig": "x"}, "devicePlugin": {}},
        None,
    ),
    "broken monitoring on an existing GKE cluster": (
        {"cluster": {**EXISTING}, "monitoring": {"dashboard": False, "dcgm": "managd"}},
        None,
    ),
    "gpuPools not a list, with workloads": (
        {"cluster": STANDARD_CLUSTER, "gpuPools": "l4", "workloads": ["nvidia-smi"]},
        "test-project",
    ),
    "broken device plugin with sharing-demo": (
        {
            "cluster": {"mode": "existing", "flavor": "generic", "kubeconfig": "x"},
            "devicePlugin": {"sharing": {"timeSlicing": {"replicas": 1}}},
            "workloads": ["sharing-demo"],
        },
        None,
    ),
    "an invalid project": ({"cluster": AUTOPILOT_CLUSTER | {"name": None}}, "123456"),
    "driver installation disabled on Autopilot": (
        {
            "cluster": AUTOPILOT_CLUSTER,
            "gpuPools": [
                {"name": "l4", "accelerator": "nvidia-l4", "driverVersion": "INSTALLATION_DISABLED"}
            ],
        },
        "test-project",
    ),
    "on-demand fallback on Standard": (standard({**L4_POOL, "onDemandFallback": True}), "test-project"),
    "no pools and three workloads": (
        {"cluster": STANDARD_CLUSTER, "workloads": ["nvidia-smi", "cuda-vector-add", "pytorch-smoke"]},
        "test-project",
    ),
    "a malformed CIDR": (
        {"cluster": STANDARD_CLUSTER, "network": {"subnetCidr": "10.10.0.1/20"}},
        "test-project",
    ),
}


@pytest.mark.parametrize(
    ("raw", "project"), MISTAKES_WITH_ONE_PROBLEM.values(), ids=list(MISTAKES_WITH_ONE_PROBLEM)
)
def test_one_mistake_is_one_problem(raw: dict, project: str | None) -> None:
    raw = {**raw, "cluster": {k: v for k, v in raw["cluster"].items() if v is not None}}
    problems = problems_of(raw, project=project)
    assert len(problems) == 1, problems


def test_a_bad_machine_type_does_not_hide_the_pools_other_problems() -> None:
    bad = {
        **L4_POOL,
        "machineType": "a2-highgpu-1g",
        "zones": ["us-east1-b"],
        "queuedProvisioning": True,
        "minNodes": 1,
    }
    keys = [p.split(":")[1].split(" ")[0] for p in problems_of(standard(bad))]
    assert keys == ["gpuPools[0].machineType", "gpuPools[0].zones[0]", "gpuPools[0].minNodes"], keys


def test_a_kubeconfig_cannot_crash_or_flood_the_context_check() -> None:
    bomb = (
        "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 7))
        + "contexts: [{name: *a6}]\n"
    )
    for kubeconfig in ("[" * 5000 + "]" * 5000, "contexts: 5", bomb):
        message = config_error(
            {"cluster": {**EXISTING, "kubeconfig": kubeconfig, "context": "c"}}, project=None
        )
        assert len(message) < 2000


def test_a_bad_cluster_key_does_not_hide_the_other_sections() -> None:
    raw = {
        "cluster": {"mode": "standard", "releaseChannel": "stable", "name": "gpu"},
        "network": {"subnetCidr": "10.16.0.0/20"},
        "gpuPools": [{"name": "l4", "accelerator": "nvidia-l4-24gb", "maxNodes": 2}],
        "monitoring": {"alerts": {"enabled": True}},
    }
    keys = [p.split(":")[1].split(" ")[0] for p in problems_of(raw)]
    assert keys == [
        "cluster.releaseChannel",
        "network.podsCidr",
        "gpuPools[0].accelerator",
        "monitoring.alerts.notificationChannels",
    ], keys


def test_a_bad_existing_cluster_key_gives_no_false_required() -> None:
    raw = {"cluster": {"mode": "existing", "flavor": "gk", "kubeconfig": 5}}
    keys = [p.split(":")[1].split(" ")[0] for p in problems_of(raw, project=None)]
    assert keys == ["cluster.kubeconfig", "cluster.flavor"], keys


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("gpusPerNode", True, "true is not allowed"),
        ("maxNodes", "2", "'2' is not allowed"),
        ("spot", "off", "'off'"),
    ],
)
def test_values_are_not_coerced(field: str, value: object, expected: str) -> None:
    message = config_error(standard({**L4_POOL, field: value}))
    assert f"gke-gpu:gpuPools[0].{field}: {expected}" in message


def test_kubeconfig_endpoint_ip_for_the_upgrade_path() -> None:
    raw = {
        "cluster": {
            **STANDARD_CLUSTER,
            "kubeconfigEndpoint": "ip",
            "publicEndpoint": True,
            "publicEndpointOpenToInternet": True,
        }
    }
    value, _ = parse_settings(raw, project="test-project", region="us-central1", stack="t")
    assert value.cluster.kubeconfig_endpoint == "ip"
    _, warnings = parse_settings(
        {"cluster": {**STANDARD_CLUSTER, "kubeconfigEndpoint": "ip"}},
        project="test-project",
        region="us-central1",
        stack="t",
    )
    assert any("reaches the cluster only from inside its VPC" in w for w in warnings)
    assert "gke-gpu:cluster.kubeconfigEndpoint: not allowed with mode existing" in config_error(
        {"cluster": {**EXISTING, "kubeconfigEndpoint": "ip"}}
    )


def test_public_nodes_need_a_public_ip_endpoint() -> None:
    message = config_error({"cluster": {**STANDARD_CLUSTER, "privateNodes": False}})
    assert "gke-gpu:cluster.privateNodes: false needs publicEndpoint: true" in message


def test_a_notification_channel_listed_twice_is_refused_naming_both_places() -> None:
    channel = "projects/test-project/notificationChannels/7"
    other = "projects/test-project/notificationChannels/8"
    alerts = {"enabled": True, "notificationChannels": [channel, other, channel, channel]}
    message = config_error(standard(L4_POOL, monitoring={"alerts": alerts}))
    assert (
        f"gke-gpu:monitoring.alerts.notificationChannels[2]: '{channel}' is listed twice (also at [0])"
        in message
    )
    assert "notificationChannels[3]" in message
    assert "notificationChannels[1]" not in message


GENERIC_LAB = {
    "mode": "existing",
    "flavor": "generic",
    "kubeconfig": "apiVersion: v1\ncontexts: [{name: lab}]",
}


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (standard(L4_POOL) | {"cluster": {**STANDARD_CLUSTER, "name": ""}}, "cluster.name"),
        (standard(L4_POOL) | {"cluster": {**STANDARD_CLUSTER, "name": "   "}}, "cluster.name"),
        (standard(L4_POOL) | {"cluster": {**STANDARD_CLUSTER, "location": ""}}, "cluster.location"),
        (standard(L4_POOL, workloads=[{"name": "nvidia-smi", "pool": ""}]), "workloads[0].pool"),
        (standard({**L4_POOL, "reservation": {"type": "ANY", "name": ""}}), "gpuPools[0].reservation.name"),
        ({"cluster": {**GENERIC_LAB, "context": ""}}, "cluster.context"),
        ({"cluster": {**GENERIC_LAB, "kubeconfig": ""}}, "cluster.kubeconfig"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_an_empty_name_is_refused_not_taken_as_unset(raw: dict, key: str) -> None:
    """An empty string where a name is expected is a mistake (a template left blank, a variable that
    did not expand), not a way to ask for the default: it is refused, naming the key."""
    message = config_error(raw)
    assert re.search(rf"gke-gpu:{re.escape(key)}: '\s*' is not allowed; it cannot be empty", message), message
    assert message.count("\n  - ") == 1, message  # no follow-on problem


def test_a_component_refuses_an_empty_reservation_name_too() -> None:
    from gke_gpu import GpuNodePool, InvalidArgsError

    args = pool_args(
        project="test-project", cluster_name="gpu", max_nodes=1, reservation={"type": "ANY", "name": ""}
    )
    with pytest.raises(InvalidArgsError) as info:
        GpuNodePool.check_args("l4", args)
    assert info.value.problems == [
        "reservation.name: '' is not allowed; it cannot be empty (to leave it unset, leave the key out)"
    ]
