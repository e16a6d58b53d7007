"""DcgmExporter's args, and the same settings as GpuMonitoring's `exporter`, with the model that
checks both at the boundary.

The two TypedDicts list the same keys: the schema takes each property's description from the class
that declares it, so a subclass would leave the inherited ones undocumented; and GpuMonitoring's
nested type cannot be named ``DcgmExporterArgs`` (code generation names the component's own args
so). tests/test_component_args.py checks that they stay the same.
"""

from typing import Annotated, NotRequired, TypedDict

from pydantic import Field

from ..core import images
from ..core.arg_types import DcgmFlavor, K8sName, LabelKey, LabelValue, enum_values, matching
from ..core.common import Problems
from ..core.image_digests import ImageDigests, check_digests
from ..core.k8s import Toleration, TolerationSpec, check_toleration
from ..core.model import DNS_LABEL
from ..core.validation import ArgsModel
from .model import ScrapeMode

# A Prometheus duration such as 30s, 1m or 1m30s.
PROMETHEUS_DURATION = r"([0-9]+(ms|s|m|h))+"


class DcgmExporterArgs(TypedDict):
    """Where the exporter runs, and what may scrape it."""

    flavor: DcgmFlavor
    """gke (GKE-installed driver, privileged) or generic (NVIDIA container toolkit)."""
    scraper_namespace: str
    """The only namespace whose Pods may reach the metrics port (a NetworkPolicy): the scraper's,
    e.g. gmp-system for Managed Prometheus' collectors."""
    namespace: NotRequired[str]
    """The exporter's namespace. Defaults to gpu-monitoring."""
    node_selector: NotRequired[dict[str, str]]
    """Labels of the GPU nodes (generic clusters). Defaults to none."""
    required_node_labels: NotRequired[list[str]]
    """Label keys a node must have (node affinity). Defaults to cloud.google.com/gke-accelerator."""
    tolerations: NotRequired[list[Toleration]]
    """Tolerations for the GPU nodes' taints. Defaults to none."""
    scrape: NotRequired[ScrapeMode]
    """What scrapes the metrics. Defaults to podMonitoring."""
    scrape_interval: NotRequired[str]
    """The scrape interval (podMonitoring, serviceMonitor), a Prometheus duration. Defaults to 30s."""
    runtime_class_name: NotRequired[str]
    """The RuntimeClass of the NVIDIA container runtime (generic clusters). Defaults to none."""
    image_digests: NotRequired[dict[str, str]]
    """The exporter image's digest (`sha256:<64 lowercase hex>`) by its name without the tag
    (nvcr.io/nvidia/k8s/dcgm-exporter): it then runs as `<name>:<tag>@<digest>`. Defaults to none."""


class DcgmExporterSettings(TypedDict):
    """The self-managed DCGM exporter: where it runs, and what may scrape it."""

    flavor: DcgmFlavor
    """gke (GKE-installed driver, privileged) or generic (NVIDIA container toolkit)."""
    scraper_namespace: str
    """The only namespace whose Pods may reach the metrics port (a NetworkPolicy): the scraper's,
    e.g. gmp-system for Managed Prometheus' collectors."""
    namespace: NotRequired[str]
    """The exporter's namespace. Defaults to gpu-monitoring."""
    node_selector: NotRequired[dict[str, str]]
    """Labels of the GPU nodes (generic clusters). Defaults to none."""
    required_node_labels: NotRequired[list[str]]
    """Label keys a node must have (node affinity). Defaults to cloud.google.com/gke-accelerator."""
    tolerations: NotRequired[list[Toleration]]
    """Tolerations for the GPU nodes' taints. Defaults to none."""
    scrape: NotRequired[ScrapeMode]
    """What scrapes the metrics. Defaults to podMonitoring."""
    scrape_interval: NotRequired[str]
    """The scrape interval (podMonitoring, serviceMonitor), a Prometheus duration. Defaults to 30s."""
    runtime_class_name: NotRequired[str]
    """The RuntimeClass of the NVIDIA container runtime (generic clusters). Defaults to none."""
    image_digests: NotRequired[dict[str, str]]
    """The exporter image's digest (`sha256:<64 lowercase hex>`) by its name without the tag
    (nvcr.io/nvidia/k8s/dcgm-exporter): it then runs as `<name>:<tag>@<digest>`. Defaults to none."""


Namespace = Annotated[str, Field(max_length=63, pattern=DNS_LABEL)]


class DcgmExporterSpec(ArgsModel):
    flavor: enum_values(DcgmFlavor)  # type: ignore[valid-type]
    scraper_namespace: Namespace
    namespace: Namespace = "gpu-monitoring"
    node_selector: Annotated[dict[LabelKey, LabelValue], Field(max_length=64)] | None = None
    required_node_labels: Annotated[list[LabelKey], Field(max_length=16)] = Field(
        default_factory=lambda: ["cloud.google.com/gke-accelerator"]
    )
    tolerations: Annotated[list[TolerationSpec], Field(max_length=32)] = Field(default_factory=list)
    scrape: enum_values(ScrapeMode) = "podMonitoring"  # type: ignore[valid-type]
    scrape_interval: matching(  # type: ignore[valid-type]
        PROMETHEUS_DURATION, "a Prometheus duration such as 30s or 1m", max_length=20
    ) = "30s"
    runtime_class_name: K8sName | None = None
    image_digests: ImageDigests = Field(default_factory=dict)


def check_exporter(spec: DcgmExporterSpec, problems: Problems, prefix: str = "") -> None:
    """What the exporter cannot run with (each arg path under `prefix`): GpuMonitoring's rules and
    DcgmExporter's share it."""
    check_digests(f"{prefix}image_digests", spec.image_digests, [images.DCGM_EXPORTER], problems)
    for i, toleration in enumerate(spec.tolerations):
        check_toleration(f"{prefix}tolerations[{i}]", toleration, problems)
    if not spec.node_selector and not spec.required_node_labels:
        problems.add(
            f"{prefix}node_selector",
            "required without required_node_labels: the exporter must run on the GPU nodes only",
        )


def exporter_rules(spec: DcgmExporterSpec) -> list[str]:
    problems = Problems()
    check_exporter(spec, problems)
    return problems.items
