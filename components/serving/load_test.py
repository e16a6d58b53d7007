"""ServingLoadTest: a bounded Job that loads a model server at a few concurrency levels and judges
what it measured against floors (the stack file's `workloads: [{name: serving-load, service: ...}]`)."""

import hashlib
from typing import Annotated, Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from ..core import images
from ..core.arg_types import matching
from ..core.common import K8S_NAME, Problems
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.data import SCRIPTS_DIR
from ..core.egress import NON_PUBLIC_IPV4, dns_egress_rule
from ..core.k8s import (
    JOB_TTL_SECONDS,
    NONROOT_ID,
    SCRIPT_HASH_ANNOTATION,
    SKIP_AWAIT,
    app_labels,
    restricted_container_security_context,
    restricted_pod_security_context,
    selector_labels,
)
from ..core.validation import ArgsModel
from .load_floors import REFERENCE_LEVELS
from .model import IMAGE_MEANING, IMAGE_REFERENCE, MAX_SERVICE_NAME, SERVICE_NAME_MEANING, service_namespace
from .server_parts import PORT, server_labels

JOB = "serving-load"
SCRIPT_FILES = ("serving_load.py", "vllm_bench_judge.py")
# Read once, at import: the ConfigMap carries them as they are.
SCRIPTS = {f: (SCRIPTS_DIR / f).read_text(encoding="utf-8") for f in SCRIPT_FILES}
SCRIPT_HASH = hashlib.sha256("".join(SCRIPTS[f] for f in SCRIPT_FILES).encode()).hexdigest()
MOUNT = "/opt/serving-load"
# The server may be starting from zero (a GPU node, the image, the weights): wait as long as `pulumi up`
# waits for it, then give the levels a quarter of an hour.
WAIT_S = 45 * 60
DEADLINE_S = WAIT_S + 15 * 60
# The client's own defaults (scripts/serving_load.py): left off its command line when unchanged.
DEFAULT_PROMPT_WORDS, DEFAULT_MAX_TOKENS = 200, 128
# The Kubernetes API's port, which the client reads the Gateway's address from (any address: as the
# endpoint picker's egress, gateway.py), and the load balancer's listener.
API_PORT, GATEWAY_PORT = 443, 80
# The Gateway's address is an internal one of the VPC (its nodes' subnet): the private ranges.
PRIVATE_RANGES = tuple(cidr for cidr in NON_PUBLIC_IPV4 if not cidr.startswith("169.254."))


class ServingLoadTestArgs(TypedDict):
    """Which service to load, and the floors its last level must reach."""

    service: str
    """The InferenceService's name: the test runs in its namespace `serve-<service>` and calls
    `http://<service>.serve-<service>.svc:8000` with the served model name `<service>`."""
    min_output_tok_s: float
    """At the last level: output tokens a second at least."""
    max_p99_ttft_ms: float
    """At the last level: the 99th percentile of time to first token, at most (ms)."""
    max_mean_tpot_ms: float
    """At the last level: the mean time per output token after the first, at most (ms)."""
    levels: NotRequired[list[int]]
    """Concurrency levels, run in order; the last is judged. Defaults to 1, 4, 16."""
    label: NotRequired[str]
    """What is measured (e.g. the GPU), for the result line. Defaults to the service's name."""
    gateway: NotRequired[bool]
    """Load the service through its Inference Gateway (a disaggregated service's requests are split
    there): the client reads the Gateway `<service>`'s address from the Kubernetes API (a Role that
    may read that Gateway only, and the Pod's token), then sends its requests to it. Defaults to false:
    the service's ClusterIP Service."""
    prompt_words: NotRequired[int]
    """Words of each prompt (about 1.3 tokens each; the summary reports the server's count). Defaults
    to 200."""
    max_tokens: NotRequired[int]
    """Output tokens of each request (`ignore_eos`). Defaults to 128."""
    image: NotRequired[str]
    """The client's image: Python's slim image at the pinned tag as a mirror serves it (ImageMirror's
    `mirrored`). Defaults to the pinned tag on Docker Hub."""


class ServingLoadTestSpec(ArgsModel):
    service: matching(K8S_NAME, SERVICE_NAME_MEANING, max_length=MAX_SERVICE_NAME)  # type: ignore[valid-type]
    min_output_tok_s: float = Field(gt=0, le=1_000_000)
    max_p99_ttft_ms: float = Field(gt=0, le=3_600_000)
    max_mean_tpot_ms: float = Field(gt=0, le=60_000)
    levels: Annotated[list[Annotated[int, Field(ge=1, le=256)]], Field(min_length=1, max_length=8)] = Field(
        default_factory=lambda: list(REFERENCE_LEVELS)
    )
    label: Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9 ._/-]+$")] | None = None
    gateway: bool = False
    prompt_words: int = Field(DEFAULT_PROMPT_WORDS, ge=1, le=100_000)
    max_tokens: int = Field(DEFAULT_MAX_TOKENS, ge=1, le=100_000)
    image: matching(IMAGE_REFERENCE, IMAGE_MEANING, max_length=512) | None = None  # type: ignore[valid-type]


def _rules(spec: ServingLoadTestSpec) -> list[str]:
    problems = Problems()
    if len(set(spec.levels)) != len(spec.levels):
        problems.add("levels", f"{spec.levels} lists a level twice")
    return problems.items


def load_command(spec: ServingLoadTestSpec) -> list[str]:
    """The client's command line."""
    namespace = service_namespace(spec.service)
    target = (
        f"--gateway={namespace}/{spec.service}"
        if spec.gateway
        else f"--url=http://{spec.service}.{namespace}.svc:{PORT}"
    )
    lengths = []
    if (spec.prompt_words, spec.max_tokens) != (DEFAULT_PROMPT_WORDS, DEFAULT_MAX_TOKENS):
        lengths = [f"--prompt-words={spec.prompt_words}", f"--max-tokens={spec.max_tokens}"]
    return [
        "python3",
        f"{MOUNT}/serving_load.py",
        target,
        f"--model={spec.service}",
        f"--levels={','.join(str(level) for level in spec.levels)}",
        *lengths,
        f"--wait-s={WAIT_S}",
        f"--min-output-tok-s={spec.min_output_tok_s:.10g}",
        f"--max-p99-ttft-ms={spec.max_p99_ttft_ms:.10g}",
        f"--max-mean-tpot-ms={spec.max_mean_tpot_ms:.10g}",
        f"--label={spec.label or spec.service}",
    ]


class ServingLoadTest(GkeGpuComponent[ServingLoadTestSpec]):
    """A Job in the service's namespace that waits for the server (`/health`, up to 45 minutes), sends
    a fixed set of streamed completions at each concurrency level (fixed prompts, 128 output tokens,
    `ignore_eos`), prints each level's figures in `vllm bench serve`'s summary format, and ends with
    `SERVING-LOAD RESULT PASS|FAIL` for the last level against the floors.

    It asks for no GPU and tolerates no taint, so it runs on a CPU node and keeps no GPU node up. Its
    Pod: the 'restricted' Pod Security settings, a read-only root filesystem, no service account token,
    requests equal to limits; a NetworkPolicy lets it reach only the server's port and DNS. The Job
    runs once (no retry: a second run would measure a different state), gives up after an hour, and
    is deleted a day after it ends; `pulumi up` does not wait for it. A change of the scripts or the
    floors replaces it, so the new test runs."""

    job_name: pulumi.Output[str]
    """The Job's name, `serving-load`, in the service's namespace."""
    namespace: pulumi.Output[str]
    """The service's namespace, `serve-<service>`."""

    _args_model = ServingLoadTestSpec
    _args_rules = staticmethod(_rules)

    def __init__(
        self,
        name: str,
        /,
        args: ServingLoadTestArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        namespace = service_namespace(spec.service)
        labels = app_labels(JOB, component="serving-load-test", instance=f"{JOB}-{spec.service}")
        child = pulumi.ResourceOptions(parent=self)
        scripts = k8s.core.v1.ConfigMap(
            f"{name}-scripts",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{JOB}-scripts", namespace=namespace, labels=labels),
            data=dict(SCRIPTS),
            opts=child,
        )
        policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-network-policy",
            # Named after the service too: the server's own objects are named `<service>`, so a service
            # named `serving-load` would otherwise share its NetworkPolicy's name.
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=f"{JOB}-{spec.service}", namespace=namespace, labels=labels
            ),
            spec=_network_policy(spec.service, labels, gateway=spec.gateway),
            opts=child,
        )
        needs: list[pulumi.Resource] = [scripts, policy]
        if spec.gateway:
            needs += _gateway_reader(name, spec.service, namespace, labels, child)
        command = load_command(spec)
        # The Pod template carries the scripts' and the command's hash: a new script or new floors
        # make a new template, which a Job cannot take in place, so Pulumi replaces the Job.
        run_hash = hashlib.sha256((SCRIPT_HASH + " ".join(command)).encode()).hexdigest()
        job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=JOB,
                namespace=namespace,
                labels=labels,
                # `pulumi up` does not wait: the result is read from the Job's log.
                annotations=SKIP_AWAIT,
            ),
            spec=k8s.batch.v1.JobSpecArgs(
                backoff_limit=0,
                active_deadline_seconds=DEADLINE_S,
                ttl_seconds_after_finished=JOB_TTL_SECONDS,
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        labels=labels, annotations={SCRIPT_HASH_ANNOTATION: run_hash}
                    ),
                    spec=_pod_spec(command, spec.image or images.PYTHON, gateway=spec.gateway),
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=needs),
        )
        self.job_name = job.metadata.apply(lambda m: (m.name if m else None) or JOB)
        self.namespace = pulumi.Output.from_input(namespace)
        self.register_outputs({"jobName": self.job_name, "namespace": self.namespace})


def _gateway_reader(
    name: str, service: str, namespace: str, labels: dict[str, str], opts: pulumi.ResourceOptions
) -> list[pulumi.Resource]:
    """The client's account, which may read the service's Gateway (its address) and nothing else."""
    account = k8s.core.v1.ServiceAccount(
        f"{name}-account",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=JOB, namespace=namespace, labels=labels),
        automount_service_account_token=False,
        opts=opts,
    )
    role = k8s.rbac.v1.Role(
        f"{name}-gateway-reader",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{JOB}-gateway-reader", namespace=namespace, labels=labels),
        rules=[
            k8s.rbac.v1.PolicyRuleArgs(
                api_groups=["gateway.networking.k8s.io"],
                resources=["gateways"],
                resource_names=[service],
                verbs=["get"],
            )
        ],
        opts=opts,
    )
    binding = k8s.rbac.v1.RoleBinding(
        f"{name}-gateway-reader-binding",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{JOB}-gateway-reader", namespace=namespace, labels=labels),
        role_ref=k8s.rbac.v1.RoleRefArgs(
            api_group="rbac.authorization.k8s.io", kind="Role", name=f"{JOB}-gateway-reader"
        ),
        subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=JOB, namespace=namespace)],
        opts=opts,
    )
    return [account, role, binding]


def _pod_spec(command: list[str], image: str, *, gateway: bool = False) -> k8s.core.v1.PodSpecArgs:
    resources = {"cpu": "500m", "memory": "256Mi", "ephemeral-storage": "64Mi"}
    return k8s.core.v1.PodSpecArgs(
        restart_policy="Never",
        # Through the gateway: the client's token reads the Gateway's address (its Role: that object).
        service_account_name=JOB if gateway else None,
        automount_service_account_token=gateway,
        security_context=restricted_pod_security_context(NONROOT_ID),
        containers=[
            k8s.core.v1.ContainerArgs(
                name="load",
                image=image,
                image_pull_policy="IfNotPresent",
                command=command,
                env=[
                    k8s.core.v1.EnvVarArgs(name="PYTHONDONTWRITEBYTECODE", value="1"),
                    k8s.core.v1.EnvVarArgs(name="PYTHONUNBUFFERED", value="1"),
                ],
                resources=k8s.core.v1.ResourceRequirementsArgs(limits=resources, requests=resources),
                security_context=restricted_container_security_context(),
                volume_mounts=[k8s.core.v1.VolumeMountArgs(name="scripts", mount_path=MOUNT, read_only=True)],
            )
        ],
        volumes=[
            k8s.core.v1.VolumeArgs(
                name="scripts",
                config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name=f"{JOB}-scripts", default_mode=0o444),
            )
        ],
    )


def _network_policy(
    service: str, labels: dict[str, str], *, gateway: bool = False
) -> k8s.networking.v1.NetworkPolicySpecArgs:
    """No ingress; egress to the model server's port and to DNS (port 53) only; through the gateway,
    instead of the server's port, the Kubernetes API (443, any address: its endpoint is the control
    plane's, which this component does not know) and the load balancer's port 80 on the VPC's private
    ranges (its address is an internal one)."""
    if gateway:
        reach = [
            k8s.networking.v1.NetworkPolicyEgressRuleArgs(
                ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=API_PORT, protocol="TCP")]
            ),
            k8s.networking.v1.NetworkPolicyEgressRuleArgs(
                to=[
                    k8s.networking.v1.NetworkPolicyPeerArgs(ip_block=k8s.networking.v1.IPBlockArgs(cidr=cidr))
                    for cidr in PRIVATE_RANGES
                ],
                ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=GATEWAY_PORT, protocol="TCP")],
            ),
        ]
    else:
        server = k8s.networking.v1.NetworkPolicyPeerArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector_labels(server_labels(service)))
        )
        reach = [
            k8s.networking.v1.NetworkPolicyEgressRuleArgs(
                to=[server], ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=PORT, protocol="TCP")]
            )
        ]
    return k8s.networking.v1.NetworkPolicySpecArgs(
        pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector_labels(labels)),
        policy_types=["Ingress", "Egress"],
        egress=[*reach, dns_egress_rule()],
    )
