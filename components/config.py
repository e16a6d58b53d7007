"""Stack configuration: the one place that turns `Pulumi.<stack>.yaml` into typed, validated settings.

Two passes, both before any resource is declared:

1. *Shape* (pydantic): types, enums, ranges, required keys, and unknown keys (every model forbids
   extras, so a typo such as ``gpusPerNodes`` is an error, not a silently ignored key).
2. *Meaning* (this module, against the accelerator catalog): an accelerator GKE does not offer, a GPU
   count the machine type does not take, a zone without that GPU, MIG on a GPU without MIG, Spot with a
   reservation, overlapping CIDRs, Autopilot with Standard-only fields, and so on.

Every problem becomes one line naming the key, the bad value and what is allowed; all lines are raised
together as one :class:`ConfigError`. The result is a frozen :class:`Settings` in which every default
is resolved (machine type, zones, disk type, cluster name), so components never re-derive them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pulumi
from pydantic import ValidationError

from components.catalog import Catalog, load_catalog
from components.config_cluster import ClusterRules
from components.config_common import (
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    MAX_SHARED_CLIENTS,
    NAMESPACE,
    REGION_PATTERN,
    TOP_LEVEL_KEYS,
    WORKLOAD_NAMES,
    ConfigError,
    Problems,
)
from components.config_pools import PoolRules
from components.config_schema import StackConfig, dashboard_on, describe_pydantic_error
from components.config_workloads import WorkloadRules
from components.settings import (
    GPU_TAINT,
    AlertSettings,
    AuthorizedNetwork,
    ClusterSettings,
    DevicePluginSettings,
    GpuPool,
    MonitoringSettings,
    NetworkSettings,
    Reservation,
    Settings,
    Sharing,
    SystemPool,
    Taint,
    Workload,
)

# The public names of the config layer; components import the settings types from here.
__all__ = [
    "GPU_TAINT",
    "GPU_TAINT_KEY",
    "GPU_TAINT_VALUE",
    "MAX_SHARED_CLIENTS",
    "NAMESPACE",
    "WORKLOAD_NAMES",
    "AlertSettings",
    "AuthorizedNetwork",
    "ClusterSettings",
    "ConfigError",
    "DevicePluginSettings",
    "GpuPool",
    "MonitoringSettings",
    "NetworkSettings",
    "Reservation",
    "Settings",
    "Sharing",
    "SystemPool",
    "Taint",
    "Workload",
    "load_settings",
    "parse_settings",
]


class _Resolver(ClusterRules, PoolRules, WorkloadRules):
    """Checks a shape-valid StackConfig for meaning and resolves it into Settings."""

    def __init__(
        self,
        config: StackConfig,
        *,
        project: str | None,
        region: str | None,
        stack: str,
        catalog: Catalog,
    ) -> None:
        self.config = config
        self.project = project
        self.region = region
        self.stack = stack
        self.catalog = catalog
        self.problems = Problems()
        self.warnings: list[str] = []

    # -- top level --------------------------------------------------------------------------------

    def resolve(self) -> Settings:
        cfg = self.config
        mode = cfg.cluster.mode
        if mode != "existing" or dashboard_on(cfg) or cfg.monitoring.alerts.enabled:
            self._require_gcp(needed_for=None if mode != "existing" else "the dashboard or alerts")
        cluster = self._cluster()
        network = self._network() if mode != "existing" else self._no_network()
        pools = self._pools(cluster)
        monitoring = self._monitoring(cluster, pools)
        workloads = self._workloads(cluster, pools)
        device_plugin, gpu_nodes = self._existing_gpu_layer(cluster)
        if network is not None and cluster.mode == "standard":
            self._check_address_capacity(network, cluster, pools)
        if network is not None and network.existing is not None and cluster.private_nodes:
            self.warnings.append(
                f"{NAMESPACE}:network.existing: private nodes have no external IP; the samples and the "
                "DCGM exporter pull from nvcr.io and docker.io, so the subnet needs Cloud NAT"
            )
        if cluster.mode != "existing" and cluster.deletion_protection and not cluster.authorized_networks:
            self.warnings.append(
                f"{NAMESPACE}:cluster.masterAuthorizedNetworks: empty, so the control plane's public "
                "endpoint accepts connections from any address (authentication is still required); "
                "see README 'Access'"
            )
        if self.problems.items:
            raise ConfigError(self.problems.items)
        return Settings(
            project=self.project,
            region=self.region,
            stack=self.stack,
            cluster=cluster,
            network=network,
            gpu_pools=pools,
            monitoring=monitoring,
            workloads=workloads,
            device_plugin=device_plugin,
            gpu_nodes=gpu_nodes,
        )

    def _require_gcp(self, needed_for: str | None) -> None:
        suffix = f" (needed for {needed_for})" if needed_for else ""
        if not self.project:
            self.problems.add(
                "gcp:project",
                f"required{suffix}; set it with `pulumi config set gcp:project <project-id>`",
            )
        elif not re.fullmatch(r"[a-z][-a-z0-9]{4,28}[a-z0-9]", self.project):
            self.problems.add(
                "gcp:project",
                f"{self.project!r} is not a GCP project ID (6-30 lowercase letters, digits, hyphens)",
            )
        if self.config.cluster.mode == "existing":
            return
        if not self.region:
            self.problems.add(
                "gcp:region",
                f"required{suffix}; set it with `pulumi config set gcp:region us-central1`",
            )
        elif not REGION_PATTERN.fullmatch(self.region):
            self.problems.add("gcp:region", f"{self.region!r} is not a GCP region name (e.g. us-central1)")

    # -- network ----------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# Entry points.


def parse_settings(
    raw: Mapping[str, Any],
    *,
    project: str | None,
    region: str | None,
    stack: str,
    catalog: Catalog | None = None,
) -> tuple[Settings, list[str]]:
    """Validate the `gke-gpu:` config (keys without the namespace) and resolve it into Settings.

    Returns the settings and any warnings; raises ConfigError with every problem found.
    """
    unknown = sorted(set(raw) - set(TOP_LEVEL_KEYS))
    problems = [
        f"{NAMESPACE}:{key}: unknown key; allowed keys: "
        + ", ".join(f"{NAMESPACE}:{k}" for k in TOP_LEVEL_KEYS)
        for key in unknown
    ]
    if "cluster" not in raw:
        problems.append(
            f"{NAMESPACE}:cluster: required; at least `{NAMESPACE}:cluster: {{mode: autopilot}}` "
            "(autopilot, standard or existing)"
        )
    try:
        config = StackConfig.model_validate(
            {k: v for k, v in raw.items() if v is not None and k in TOP_LEVEL_KEYS}
        )
    except ValidationError as exc:
        problems += [
            describe_pydantic_error(e)
            for e in exc.errors()
            if not (e["type"] == "missing" and tuple(e["loc"]) == ("cluster",))
        ]
    if problems:
        raise ConfigError(problems)
    resolver = _Resolver(
        config,
        project=project,
        region=region,
        stack=stack,
        catalog=catalog or load_catalog(),
    )
    settings = resolver.resolve()
    return settings, resolver.warnings


def _all_config_keys() -> set[str]:
    """Every config key the engine passed to this program (set explicitly or via PULUMI_CONFIG)."""
    from pulumi.runtime import config as runtime_config

    return set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())


def load_settings() -> Settings:
    """Read this stack's config from the Pulumi engine and validate it. The only reader of config."""
    from pulumi.runtime import config as runtime_config

    raw: dict[str, Any] = {}
    for key in sorted(_all_config_keys()):
        namespace, _, name = key.partition(":")
        if namespace != NAMESPACE:
            continue
        # Read through the runtime rather than pulumi.Config so that a secret nested in an object
        # (cluster.kubeconfig) does not trigger the "use get_secret" warning; the program wraps it
        # in Output.secret itself before handing it to a provider.
        text = runtime_config.get_config(key)
        if text is None:
            continue
        try:
            raw[name] = json.loads(text)
        except (json.JSONDecodeError, TypeError):
            raw[name] = text
    gcp = pulumi.Config("gcp")
    settings, warnings = parse_settings(
        raw,
        project=gcp.get("project"),
        region=gcp.get("region"),
        stack=pulumi.get_stack(),
    )
    for warning in warnings:
        pulumi.log.warn(warning)
    return settings
