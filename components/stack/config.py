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

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

import pulumi

from ..cluster.model import AuthorizedNetworkConfig, ClusterConfig, SystemPoolConfig
from ..core.catalog import Catalog, load_catalog
from ..core.common import (
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    MAX_SHARED_CLIENTS,
    NAMESPACE,
    PROJECT_PATTERN,
    ConfigError,
    Problem,
    Problems,
    cut,
    listing,
)
from ..core.credentials import credentials_in, redact
from ..core.messages import format_path
from ..core.validation import log_message
from ..gpu.device_plugin_config import DevicePluginConfig
from ..gpu.pool import GPU_TAINT, GpuPool, ReservationConfig, SharingConfig, TaintConfig
from ..monitoring.model import AlertsConfig, MonitoringConfig
from ..network.model import NetworkConfig
from ..workloads.model import WORKLOAD_NAMES, BatchConfig, WorkloadConfig
from .batch_section import BatchRules
from .broken import Broken
from .cluster_section import ClusterRules
from .config_value import decode_config_value
from .fleet_section import fleet_settings
from .gateway_section import GatewayRules
from .images_section import ImageRules
from .keys import check_config_keys
from .pools_section import PoolRules
from .schema import StackConfig, dashboard_on
from .serving_section import ServingRules
from .settings import FleetSettings, Settings
from .shape import Shape, validate_shape
from .stack_file import StackFileError
from .workloads_section import WorkloadRules

# The public names of the config layer; components import the settings types from here.
__all__ = [
    "GPU_TAINT",
    "GPU_TAINT_KEY",
    "GPU_TAINT_VALUE",
    "MAX_SHARED_CLIENTS",
    "NAMESPACE",
    "WORKLOAD_NAMES",
    "AlertsConfig",
    "AuthorizedNetworkConfig",
    "ClusterConfig",
    "ConfigError",
    "DevicePluginConfig",
    "GpuPool",
    "MonitoringConfig",
    "NetworkConfig",
    "ReservationConfig",
    "Settings",
    "SharingConfig",
    "SystemPoolConfig",
    "TaintConfig",
    "WorkloadConfig",
    "load_settings",
    "parse_settings",
]


class _Resolver(ClusterRules, PoolRules, WorkloadRules, BatchRules, ServingRules, GatewayRules, ImageRules):
    """Checks a shape-valid StackConfig for meaning and resolves it into Settings."""

    def __init__(
        self,
        config: StackConfig,
        *,
        project: str | None,
        region: str | None,
        stack: str,
        catalog: Catalog,
        broken: Broken,
        secret_keys: frozenset[str] | None = None,
        root: str = f"{NAMESPACE}:",
        region_key: str = "gcp:region",
        project_key: str = "gcp:project",
    ) -> None:
        self.config = config
        self.root = root
        self.region_key = region_key
        self.project_key = project_key
        self.broken = broken
        self.secret_keys = secret_keys
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
        self.region_ok = False
        broken = self.broken.sections
        # An existing cluster without a flavor (reported) or a broken monitoring section leaves the
        # dashboard and alert defaults unknown: rules that depend on them are skipped.
        self.flavor_unknown = mode == "existing" and cfg.cluster.flavor is None
        monitoring_known = "monitoring" not in broken and not self.flavor_unknown
        if mode != "existing" or (monitoring_known and (dashboard_on(cfg) or cfg.monitoring.alerts.enabled)):
            self._require_gcp(needed_for=None if mode != "existing" else "the dashboard or alerts")
        cluster = self._cluster()
        network: NetworkConfig | None
        if mode == "existing":
            self._no_network()
            network = None
        else:
            network = None if "network" in broken else self._network()
        pools = self._pools(cluster)
        if network is not None:
            network = self._gpudirect(network, pools)
        monitoring = (
            self._monitoring(cluster, pools)
            if monitoring_known
            else MonitoringConfig(dcgm="none", dashboard=False)
        )
        workloads = self._workloads(cluster, pools)
        device_plugin: DevicePluginConfig | None
        gpu_nodes: tuple[str, ...]
        if {"devicePlugin", "gpuNodes"} & broken or self.flavor_unknown:
            device_plugin, gpu_nodes = None, ()
        else:
            device_plugin, gpu_nodes = self._existing_gpu_layer(cluster)
        batch = self._batch(cluster, pools) if "batch" not in broken else BatchConfig()
        serving = self._serving(cluster, pools) if "serving" not in broken else ()
        if network is not None and "serving" not in broken:
            network = self._gateways(network)
        image_digests = (
            self._image_digests(pools, monitoring, device_plugin is not None)
            if "images" not in broken
            else {}
        )
        capacity_known = not self.broken.any_pool() and "systemPool" not in self.broken.cluster_keys
        if network is not None and cluster.mode == "standard" and capacity_known:
            self._check_address_capacity(network, cluster, pools)
        if network is not None and network.existing is not None and cluster.private_nodes:
            self.warnings.append(
                f"{self.root}network.existing: private nodes have no external IP; the samples and the "
                "DCGM exporter pull from nvcr.io and docker.io, so the subnet needs Cloud NAT"
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
            batch=batch,
            serving=serving,
            image_digests=image_digests,
        )

    def _require_gcp(self, needed_for: str | None) -> None:
        suffix = f" (needed for {needed_for})" if needed_for else ""
        if not self.project:
            self.problems.add(
                self.project_key,
                f"required{suffix}; set it with `pulumi config set gcp:project <project-id>`",
            )
        elif not PROJECT_PATTERN.fullmatch(self.project):
            self.problems.add(
                self.project_key,
                f"{cut(self.project)} is not a GCP project ID (6-30 lowercase letters, digits, hyphens, "
                "starting with a letter)",
            )
        if self.config.cluster.mode == "existing":
            return
        regions = self.catalog.gcp_regions
        if not self.region:
            self.problems.add(
                self.region_key,
                f"required{suffix}; set it with `pulumi config set gcp:region us-central1`",
            )
        elif self.region not in regions:
            close = difflib.get_close_matches(self.region, regions, n=1, cutoff=0.75)
            hint = f"did you mean {close[0]!r}? " if close else ""
            self.problems.add(
                self.region_key,
                f"{cut(self.region)} is not a Compute Engine region; {hint}regions: {listing(regions)}",
            )
        else:
            self.region_ok = True

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
    secret_keys: frozenset[str] | None = None,
) -> tuple[Settings, list[str]]:
    """Validate the `gke-gpu:` config (keys without the namespace) and resolve it into Settings.
    `secret_keys`: the config keys (`gke-gpu:cluster`) the engine holds as secrets, where known.

    Returns the settings and any warnings; raises ConfigError with every problem found. Validation
    is staged: each section (and each pool or workload) is shape-checked on its own, and a rule of
    the second pass runs only when the values it reads passed their own checks, so one run lists
    every independent problem and no follow-on ones.
    """
    shape = validate_shape(raw)
    problems = list(shape.problems)
    credentials = _credentials(raw)
    if shape.config is None:
        raise ConfigError(_with_credentials(problems, credentials))
    resolver = _resolver(
        shape, project=project, region=region, stack=stack, catalog=catalog, secret_keys=secret_keys
    )
    try:
        settings = resolver.resolve()
    except ConfigError as exc:
        fleet_problems = _fleet(shape.config, None, project, stack, catalog)[1]
        raise ConfigError(
            _with_credentials([*problems, *exc.problems, *fleet_problems], credentials)
        ) from None
    fleet, fleet_problems, fleet_notes = _fleet(shape.config, settings, project, stack, catalog)
    problems += fleet_problems
    if problems or credentials:
        raise ConfigError(_with_credentials(problems, credentials))
    if fleet is not None:
        settings = dataclasses.replace(settings, fleet=fleet)
    return settings, [redact(warning) for warning in [*resolver.warnings, *fleet_notes]]


def resolve_sections(
    sections: Mapping[str, Any],
    *,
    root_loc: tuple[Any, ...],
    project: str | None,
    project_key: str,
    region: str,
    stack: str,
    catalog: Catalog | None,
) -> tuple[Settings, list[str]]:
    """One set of a stack file's sections found elsewhere in it (a fleet worker's, under
    `gke-gpu:fleet.workers[i]`): the same shape pass and rules as a stack file's, every problem and note
    keyed where the user wrote it (`root_loc`); the region is the worker's own key."""
    shape = validate_shape(sections, root_loc)
    if shape.config is None:
        raise ConfigError(shape.problems)
    resolver = _resolver(
        shape,
        project=project,
        region=region,
        stack=stack,
        catalog=catalog,
        root=f"{format_path(root_loc)}.",
        region_key=format_path((*root_loc, "region")),
        project_key=project_key,
    )
    try:
        settings = resolver.resolve()
    except ConfigError as exc:
        raise ConfigError([*shape.problems, *exc.problems]) from None
    if shape.problems:
        raise ConfigError(shape.problems)
    return settings, list(resolver.warnings)


def _resolver(shape: Shape, *, catalog: Catalog | None, **context: Any) -> _Resolver:
    """The second pass over what passed the first (`context`: the GCP context and keys)."""
    assert shape.config is not None
    return _Resolver(shape.config, catalog=catalog or load_catalog(), broken=shape.broken, **context)


def _fleet(
    config: StackConfig, manager: Settings | None, project: str | None, stack: str, catalog: Catalog | None
) -> tuple[FleetSettings | None, list[str], list[str]]:
    """The fleet's settings (None without gke-gpu:fleet), its problems and its workers' notes."""
    if config.fleet is None:
        return None, [], []
    try:
        fleet, notes = fleet_settings(
            config.fleet,
            manager,
            manager_name=config.cluster.name or stack,
            project=project,
            resolve=resolve_sections,
            catalog=catalog,
        )
    except ConfigError as exc:
        return None, list(dict.fromkeys(exc.problems)), []
    return fleet, [], notes


def _with_credentials(problems: list[str], credentials: list[Problem]) -> list[str]:
    """The problems, then each credential whose value no problem refused already (there it is shown
    by its kind: a second line on the same key would be a follow-on)."""
    reported = {p.path for p in problems if isinstance(p, Problem)}
    return problems + [c for c in credentials if c.path not in reported]


def _credentials(raw: Mapping[str, Any]) -> list[Problem]:
    """A credential-shaped value anywhere but in `cluster.kubeconfig` (which holds one by design and
    has its own rule: a secret): refused by its kind and length, since a stack file's plain values are
    printed in previews, logs and renders."""
    found = []
    for loc, kind, length in credentials_in(dict(raw), skip=(("cluster", "kubeconfig"),)):
        found.append(
            Problem(
                format_path(loc),
                f"holds what looks like a {kind} ({length} characters, not shown); a stack file's plain "
                "values are printed in previews, logs and renders: keep a credential in a Kubernetes "
                "Secret (serving's hfTokenSecret names one) or a Pulumi secret read by its own key",
            )
        )
    return found


def settings_from_config(
    config: Mapping[str, str], *, stack: str, secret_keys: frozenset[str] | None = None
) -> tuple[Settings, list[str]]:
    """Validate a whole stack config as the engine passes it (`namespace:key` -> string).

    Every key is accounted for (see :mod:`gke_gpu.stack.keys`); `gke-gpu:` values are decoded
    from the engine's JSON with bounds on depth and size; then :func:`parse_settings` runs.
    """
    problems = check_config_keys(config)
    raw: dict[str, Any] = {}
    for key, text in config.items():
        namespace, _, name = key.partition(":")
        if namespace != NAMESPACE or text is None:
            continue
        try:
            raw[name] = decode_config_value(key, text)
        except StackFileError as exc:
            problems.append(str(exc))
    project = config.get("gcp:project")
    region = config.get("gcp:region")
    try:
        settings, warnings = parse_settings(
            raw, project=project, region=region, stack=stack, secret_keys=secret_keys
        )
    except ConfigError as exc:
        raise ConfigError([*problems, *exc.problems]) from None
    if problems:
        raise ConfigError(problems)
    return settings, warnings


def _all_config_keys() -> set[str]:
    """Every config key the engine passed to this program (set explicitly or via PULUMI_CONFIG)."""
    from pulumi.runtime import config as runtime_config

    return set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())


def load_settings() -> Settings:
    """Read this stack's config from the Pulumi engine and validate it. The only reader of config."""
    from pulumi.runtime import config as runtime_config

    # Read through the runtime rather than pulumi.Config so that a secret nested in an object
    # (cluster.kubeconfig) does not trigger the "use get_secret" warning; the program wraps it in
    # Output.secret itself before handing it to a provider.
    config = {key: runtime_config.get_config(key) for key in _all_config_keys()}
    # The engine lists a config key as secret when its value, or any value nested in it, is secure.
    secret_keys = frozenset(key for key in config if runtime_config.is_config_secret(key))
    settings, warnings = settings_from_config(
        {k: v for k, v in config.items() if v is not None}, stack=pulumi.get_stack(), secret_keys=secret_keys
    )
    for warning in warnings:
        log_message(warning)
    return settings
