"""Stack configuration: the one place that turns `Pulumi.<stack>.yaml` into typed, validated settings.

Two passes, both before any resource is declared:

1. *Shape* (pydantic): types, enums, ranges, required keys, and unknown keys (every model forbids
   extras, so a typo such as ``gpusPerNodes`` is an error, not a silently ignored key).
2. *Meaning* (each domain's `check_*` rules, which its `<domain>/section.py` runs; stack/sections.py
   loops over the sections): an accelerator GKE does not offer, a GPU count the machine type does not
   take, a zone without that GPU, MIG on a GPU without MIG, Spot with a reservation, overlapping CIDRs,
   Autopilot with Standard-only fields, and so on.

Every problem becomes one line naming the key, the bad value and what is allowed; all lines are raised
together as one :class:`ConfigError`. The result is a frozen :class:`Settings` in which every default
is resolved (machine type, zones, disk type, cluster name), so components never re-derive them.
"""

from __future__ import annotations

import dataclasses
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
    ConfigError,
    Problem,
)
from ..core.credentials import credentials_in, redact
from ..core.messages import format_path
from ..core.validation import log_message
from ..gpu.device_plugin_config import DevicePluginConfig
from ..gpu.pool import GPU_TAINT, GpuPool, ReservationConfig, SharingConfig, TaintConfig
from ..monitoring.model import AlertsConfig, MonitoringConfig
from ..network.model import NetworkConfig
from ..workloads.model import WORKLOAD_NAMES, WorkloadConfig
from .config_value import decode_config_value
from .first_pass import validate_shape
from .keys import check_config_keys
from .sections import Place, resolve
from .settings import FleetSettings, Settings
from .stack_file import StackFileError
from .stack_model import StackConfig

# The public names of the config layer, for the stack layer, tools and tests (a domain imports its own
# section models, never this layer: tests/test_layers.py).
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
    place = Place(project=project, region=region, stack=stack, secret_keys=secret_keys)
    try:
        settings, notes = resolve(shape.config, shape.broken, place, catalog or load_catalog())
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
    return settings, [redact(warning) for warning in [*notes, *fleet_notes]]


def _fleet(
    config: StackConfig, manager: Settings | None, project: str | None, stack: str, catalog: Catalog | None
) -> tuple[FleetSettings | None, list[str], list[str]]:
    """The fleet's settings (None without gke-gpu:fleet), its problems and its workers' notes."""
    if config.fleet is None:
        return None, [], []
    # Imported here: a stack without a fleet does not pay for the fleet's modules.
    from .fleet_section import fleet_settings

    try:
        fleet, notes = fleet_settings(
            config.fleet,
            manager,
            manager_name=config.cluster.name or stack,
            project=project,
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
