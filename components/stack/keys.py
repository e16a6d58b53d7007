"""Which stack-config keys this program reads, and a clear error for every other one.

The Pulumi CLI hands the program every key of the stack file. A key the program never reads is
silently ignored at `pulumi up`, so a near miss (``gke_gpu:monitoring``, ``gcp:monitoring``) would
quietly drop a setting (an alert, a node taint). Every key is therefore checked here: it must be a
``gke-gpu:`` key, a configuration key of the GCP provider, or an engine (``pulumi:``) key.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from ..core.common import NAMESPACE, TOP_LEVEL_KEYS, cut
from ..core.data import DATA_DIR, load_data

PROVIDER_KEYS_PATH = DATA_DIR / "provider_config_keys.yaml"
# Namespaces whose keys have an effect on this program.
ENGINE_NAMESPACE = "pulumi"
GCP_NAMESPACE = "gcp"
_NAMESPACE_SPELLING = re.compile(r"[-_. ]")


@functools.cache
def gcp_provider_keys() -> frozenset[str]:
    """The GCP provider's configuration keys (vendored from the pinned pulumi-gcp SDK)."""
    return frozenset(load_data(PROVIDER_KEYS_PATH)["gcp"])


def _ours(name: str) -> str:
    return f"{NAMESPACE}:{name}"


def _looks_like_ours(namespace: str) -> bool:
    return _NAMESPACE_SPELLING.sub("", namespace.lower()) == _NAMESPACE_SPELLING.sub("", NAMESPACE)


def check_config_keys(keys: Iterable[str]) -> list[str]:
    """One problem per key that this program would silently ignore; empty when every key is used."""
    problems: list[str] = []
    allowed_namespaces = f"{NAMESPACE}, {GCP_NAMESPACE} (provider settings), {ENGINE_NAMESPACE}"
    for key in sorted(keys):
        shown = key if len(key) <= 80 and key.isprintable() else cut(key)
        if ":" not in key:
            hint = f"; did you mean {_ours(key)}?" if key in TOP_LEVEL_KEYS else ""
            problems.append(
                f"{shown}: configuration keys must be of the form <namespace>:<name> (as the Pulumi CLI "
                f"requires){hint}"
            )
            continue
        namespace, _, name = key.partition(":")
        if namespace in (NAMESPACE, ENGINE_NAMESPACE):
            continue  # gke-gpu keys are checked one by one by the schema; pulumi: keys are the engine's
        if _looks_like_ours(namespace):
            problems.append(
                f"{shown}: namespace {cut(namespace, 30)} is not this program's; did you mean {_ours(name)}?"
            )
        elif name in TOP_LEVEL_KEYS:
            problems.append(f"{shown}: {cut(name)} is a setting of this program; write it as {_ours(name)}")
        elif namespace == GCP_NAMESPACE:
            if name == "zone":
                problems.append(
                    f"{shown}: has no effect here: every resource names its location (gcp:region, and "
                    f"{_ours('cluster')}.location for a zonal cluster); remove it"
                )
            elif name not in gcp_provider_keys():
                import difflib

                close = difflib.get_close_matches(name, sorted(gcp_provider_keys()), n=1)
                hint = f"did you mean gcp:{close[0]}? " if close else ""
                problems.append(
                    f"{shown}: not a configuration key of the GCP provider, so it would be ignored; "
                    f"{hint}(e.g. gcp:project, gcp:region)"
                )
        elif namespace == "kubernetes":
            problems.append(
                f"{shown}: kubernetes: keys configure the default Kubernetes provider, which this program "
                f"never uses (each cluster gets its own provider), so it would be ignored; for an existing "
                f"cluster set {_ours('cluster')}.kubeconfig and .context"
            )
        else:
            problems.append(
                f"{shown}: namespace {cut(namespace, 30)} is not read by this program, so the key would be "
                f"ignored; namespaces used: {allowed_namespaces}"
            )
    return problems
