"""InferenceService: a vLLM model server on a GPU pool, its weights read from Cloud Storage (or Hugging
Face), behind a Service that only its namespace and the listed clients reach, scraped by GMP."""

from typing import Any, NotRequired, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s

from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import (
    Toleration,
    app_labels,
    pod_security_labels,
)
from ..dra.claims import gpu_claim_template_name, gpu_claim_template_spec
from .autoscaler import horizontal_pod_autoscaler
from .deployment import deployment
from .disaggregated import declare_roles, role_selector
from .gpu_nics import GpuNicsArgs, nic_claim_template_spec, pod_nics
from .hyperdisk_ml import TRANSFER_KSA, TRANSFER_TIMEOUT_S, declare_volume, uses_hyperdisk_ml
from .leader_worker_set import leader_worker_set, serving_selector
from .model import DECODE, service_namespace
from .role_args import DisaggregationArgs, ExpertParallelArgs, RoleSizesArgs
from .role_parts import attach_nics, nic_claim, uses_nics
from .rollout import pod_disruption_budget
from .rules import weights_source
from .server_parts import (
    PORT,
    egress_policies,
    network_policy,
    pod_annotations,
    server_labels,
)
from .server_pod import KSA, server_pod_spec
from .service_rules import service_notes, service_rules
from .service_spec import InferenceServiceSpec
from .weights_reader import declare_weights_reader

ROLLOUT_TIMEOUT_S = 45 * 60


class ModelWeights(TypedDict):
    """How a gs:// model's files reach the server."""

    via: NotRequired[str]
    """`cloudStorageFuse` (mounted from the bucket; the default) or `hyperdiskMl`: copied once by the
    GKE Volume Populator into a read-only-many Hyperdisk ML volume per zone that every replica mounts
    (needs the cluster's HyperdiskMlTransferClass, and machines that attach Hyperdisk ML: A2, A3, A4,
    A4X, G2, G4)."""
    size_gib: NotRequired[int]
    """hyperdiskMl: the volume's size in GiB (5 to 65,536), larger than the model's files. Required
    with it."""
    throughput_mi_bps: NotRequired[int]
    """hyperdiskMl: the volume's provisioned throughput in MiB/s (400 to 1,200,000, at least 0.12 per
    GiB), shared by the replicas reading it. Defaults to 2400 (or the size's minimum)."""


class ModelInfoArgs(TypedDict):
    """What the rules need to know of a model the catalogue (components/data/models.yaml) does not
    hold: a catalogued Hugging Face id it is a copy of, or its config.json's figures."""

    catalog: NotRequired[str]
    """A catalogued Hugging Face id whose figures apply (its files copied into a bucket)."""
    parameters: NotRequired[int]
    """The weights' element count."""
    dtype: NotRequired[str]
    """The weights' dtype: bfloat16, float16, float32 (served in 16 bits), fp8, int8, mxfp4 or int4."""
    attention_heads: NotRequired[int]
    """num_attention_heads: a tensor-parallel size must divide it."""
    kv_heads: NotRequired[int]
    """num_key_value_heads. Defaults to attention_heads."""
    layers: NotRequired[int]
    """num_hidden_layers (with kv_heads and head_dim: the KV cache a token takes)."""
    head_dim: NotRequired[int]
    """head_dim (hidden_size / num_attention_heads where config.json has none)."""
    max_context: NotRequired[int]
    """max_position_embeddings: the longest max_model_len vLLM takes."""
    gated: NotRequired[bool]
    """The Hugging Face repo asks to accept terms: hf_token_secret is required."""


class InferenceServiceArgs(TypedDict):
    """A model, the GPUs of a replica, and where its Pods go."""

    model: str
    """gs://<bucket>/<path> (read through the Cloud Storage FUSE CSI driver with Workload Identity) or a
    Hugging Face id <owner>/<name> (with `hf_token_secret`)."""
    node_selector: dict[str, str]
    """The GPU pool's node selector (the stack output `gpuPools` has it)."""
    tolerations: list[Toleration]
    """The GPU pool's tolerations."""
    accelerator: NotRequired[str]
    """The replicas' GPU type (`nvidia-l4`, `nvidia-h100-80gb`, ...), for the checks of the model against
    the GPUs' memory. Defaults to the node selector's `cloud.google.com/gke-accelerator`; where neither
    names it (a ComputeClass selector), the GPUs' memory is not checked, and a warning says so."""
    project: str
    """The cluster's GCP project: its Workload Identity pool is `<project>.svc.id.goog`."""
    cluster_name: str
    """The cluster's name: the service's Google service account id is derived from it and the name."""
    name: NotRequired[str]
    """The service's name; its namespace is `serve-<name>`. Defaults to the resource name."""
    server: NotRequired[str]
    """The model server: `vllm`. Defaults to vllm."""
    gpus_per_replica: NotRequired[int]
    """GPUs of one replica (vLLM's tensor parallel size), on one node; with `gpus_per_node`, a whole
    multiple of it over several nodes. Defaults to 1."""
    gpus_per_node: NotRequired[int]
    """GPUs of each of the pool's nodes. A replica with more (`gpus_per_replica` a multiple of this)
    spans nodes: a LeaderWorkerSet of one leader (the API server) and headless workers, one Pod per
    node, tensor parallel within each node and pipeline parallel across them; it needs the
    LeaderWorkerSetController. Defaults to `gpus_per_replica` (one node, a Deployment)."""
    replicas: NotRequired[int]
    """Replicas (each holds its GPUs while it runs); with `max_replicas`, the fewest. Defaults to 1."""
    max_replicas: NotRequired[int]
    """Scale on the queue between `replicas` and this many (a HorizontalPodAutoscaler on vLLM's
    `vllm:num_requests_waiting` through Managed Prometheus; needs the CustomMetricsAdapter). Defaults
    to fixed replicas."""
    surge: NotRequired[bool]
    """Roll out a new version with one surge replica first (its GPUs must be free on the pool: a node
    the pool can add, or room on one), so no replica stops before its successor serves. Defaults to
    false: one replica at a time, which with one replica is an outage while the new one starts."""
    queue_target: NotRequired[float]
    """With `max_replicas`: requests waiting per replica the autoscaler aims at. Defaults to 5."""
    scale_on: NotRequired[str]
    """With `max_replicas`: `queue` (vLLM's waiting requests) or `gpu` (the GPUs' duty cycle, GKE's
    `kubernetes.io/container/accelerator/duty_cycle` as an External metric). Defaults to queue."""
    duty_cycle_target: NotRequired[float]
    """With `scale_on` gpu: the mean duty cycle of the replicas' GPUs the autoscaler aims at, in
    percent. Defaults to 80."""
    hf_token_secret: NotRequired[str]
    """A Hugging Face model: the name of a Secret in the service's namespace whose key `token` is the
    token (never the token itself). Required for a gated model only."""
    max_model_len: NotRequired[int]
    """vLLM's --max-model-len. Defaults to the model's own."""
    gpu_memory_utilization: NotRequired[float]
    """vLLM's --gpu-memory-utilization (0 to 1). Defaults to vLLM's own, 0.92."""
    model_info: NotRequired[ModelInfoArgs]
    """A model the catalogue does not hold: its figures. Without them (and outside the catalogue) the
    model's size, heads and context are not checked."""
    client_namespaces: NotRequired[list[str]]
    """Namespaces whose Pods may call the service, besides its own. Defaults to none."""
    cpu: NotRequired[float]
    """CPU of the vLLM container (request = limit), in cores. Defaults to 4."""
    memory_gib: NotRequired[int]
    """Memory of the vLLM container (request = limit), in GiB. Defaults to 24."""
    shm_gib: NotRequired[int]
    """Shared memory (/dev/shm, in RAM) for PyTorch, in GiB. Defaults to 4."""
    disk_gib: NotRequired[int]
    """Writable disk for the home directory (caches; a Hugging Face model's download), in GiB: the
    container's ephemeral-storage request and limit. Defaults to 50."""
    weights_cache_gib: NotRequired[int]
    """A gs:// model: the Cloud Storage FUSE file cache, in GiB (files fetched whole, in parallel
    chunks; a file larger than the cache is read uncached). Defaults to 0: no file cache."""
    weights_cache_medium: NotRequired[str]
    """Where the file cache lives: `memory` (tmpfs, counted in the node's memory) or `disk` (the
    node's ephemeral storage: put it on Local SSD with the pool's local_ssd_count). Defaults to
    memory."""
    image: NotRequired[str]
    """The vLLM image: `vllm/vllm-openai` at the pinned tag as a mirror serves it (ImageMirror's
    `mirrored`), so that image streaming applies. Defaults to the pinned tag on Docker Hub, which a
    new node pulls whole."""
    weights: NotRequired[ModelWeights]
    """A gs:// model: how its files reach the server. Defaults to Cloud Storage FUSE."""
    zones: NotRequired[list[str]]
    """With `weights.via` hyperdiskMl: the zones of the pool's nodes; a Hyperdisk ML volume is made
    in each (they are zonal)."""
    dra_gpus: NotRequired[bool]
    """The pool hands its GPUs out through NVIDIA's DRA driver (a GpuNodePool with dra_gpus): each Pod
    claims its GPUs through a ResourceClaimTemplate of the DeviceClass gpu.nvidia.com in the service's
    namespace instead of an nvidia.com/gpu limit (needs an NvidiaDraDriver with gpus). Not with
    scale_on gpu. Defaults to false."""
    gpu_nics: NotRequired[GpuNicsArgs]
    """The pool's GPUDirect RDMA NICs (A3 Ultra, A4, A4X, A4X Max): the Pods that talk across nodes (a
    replica over several nodes, a disaggregated service's roles) get them, as training Pods do (the
    interfaces' annotation or a DRANET claim), with NCCL's own IB transport. Defaults to none: the Pod
    network's TCP."""
    disaggregation: NotRequired[DisaggregationArgs]
    """Prefill and decode as separate workloads (`<name>-prefill`, `<name>-decode`), the KV cache moved
    by vLLM's NixlConnector, llm-d's routing sidecar on decode; needs an InferenceGateway with
    `disaggregated` in front (its endpoint picker picks the prefill Pod), and with kv_transport rdma
    `gpu_nics`. Replaces gpus_per_replica, replicas, max_replicas and scale_on. Defaults to one
    aggregated workload."""
    expert_parallel: NotRequired[ExpertParallelArgs]
    """A MoE model's data and expert parallel (with `disaggregation` only): each role's replica is
    data-parallel ranks of `tensor_parallel` GPUs under vLLM's supervisor, a LeaderWorkerSet of whole
    nodes when it spans them. Defaults to none."""
    role_sizes: NotRequired[RoleSizesArgs]
    """With `disaggregation`: each role's Pod size. Each defaults to the service's own (cpu, memory_gib,
    shm_gib, disk_gib, the file cache)."""


class InferenceService(GkeGpuComponent[InferenceServiceSpec]):
    """A vLLM model server (`vllm/vllm-openai`, pinned) on a GPU pool, in its own namespace
    `serve-<name>`: a Deployment, or a LeaderWorkerSet when a replica spans nodes (`gpus_per_node`).
    Before it declares anything it refuses, as a stack file's `serving` entry is refused, a model that
    cannot start on its replica: a gated model without `hf_token_secret`, a tensor-parallel size vLLM
    refuses, a `max_model_len` over the model's context, weights larger than `disk_gib`, and weights plus
    one sequence's KV cache larger than the GPUs' memory (the GPU `accelerator` names, else the node
    selector's `cloud.google.com/gke-accelerator`); what it cannot check it logs as a warning.

    Weights: a gs:// model is mounted read-only from its bucket through GKE's Cloud Storage FUSE CSI
    driver (the cluster must have it: GkeCluster's `gcs_fuse_csi_driver`), read as the service's own
    Google service account (Workload Identity), which may read that bucket only
    (`roles/storage.objectViewer`). A Hugging Face model is downloaded at start with the token of
    `hf_token_secret`.

    The container runs as vLLM's non-root user with a read-only root filesystem, every capability
    dropped and seccomp RuntimeDefault; its caches, /tmp and /dev/shm are emptyDirs. A startup probe
    waits for the model to load; readiness and liveness use vLLM's /health. A ClusterIP Service
    (port 8000, the OpenAI API) admits only its namespace, `client_namespaces` and GMP's scraper
    (NetworkPolicy); a PodMonitoring scrapes vLLM's /metrics. Rolling updates replace one replica at a
    time, or with `surge` a new replica first; a PodDisruptionBudget never lets a drain take the last
    replica that serves (rollout.disruption_budget). On a DRA-GPU pool (`dra_gpus`) each Pod claims its
    GPUs through a ResourceClaimTemplate in the namespace instead of an nvidia.com/gpu limit.

    With `disaggregation`, prefill and decode are workloads of their own (`<name>-prefill`,
    `<name>-decode`: disaggregated.py), vLLM's NixlConnector moving the KV cache between them and llm-d's
    routing sidecar in front of decode; with `expert_parallel` too, each role's replica is data-parallel
    ranks of a MoE model. With `gpu_nics` (a GPUDirect RDMA pool), the Pods that talk across nodes get
    the NICs (gpu_nics.py). It refuses, besides, what pd_rules.py and pd_fit.py refuse."""

    service_url: pulumi.Output[str]
    """The in-cluster URL of the OpenAI-compatible API: http://<name>.serve-<name>.svc:8000."""
    namespace: pulumi.Output[str]
    """The service's namespace, `serve-<name>`."""

    _args_model = InferenceServiceSpec
    _args_rules = staticmethod(service_rules)
    _args_notes = staticmethod(service_notes)
    _args_by_name = True
    _args_type = InferenceServiceArgs
    _args_name_default = True

    def __init__(
        self,
        name: str,
        /,
        args: InferenceServiceArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        namespace = service_namespace(spec.name)
        labels = server_labels(spec.name)
        child = pulumi.ResourceOptions(parent=self)
        ns = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=namespace,
                labels={
                    **app_labels(namespace, component="inference-server"),
                    # vLLM itself passes 'restricted'; the Cloud Storage FUSE sidecar GKE injects is not
                    # checked here (UNVERIFIED), so 'baseline' is enforced and 'restricted' reported.
                    **pod_security_labels("baseline", "restricted"),
                },
            ),
            opts=child,
        )
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[ns])
        annotations: dict[str, pulumi.Input[str]] = {}
        grants: list[pulumi.Resource] = []
        hyperdisk = uses_hyperdisk_ml(spec.weights)
        if weights_source(spec.model) == "gcs":
            # With Hyperdisk ML only the transfer reads the bucket (as its own Kubernetes account).
            reader = TRANSFER_KSA if hyperdisk else KSA
            account, grants = declare_weights_reader(self, name, spec, namespace, reader)
            if hyperdisk:  # the filled claim, before the workload (whose rollout waits for it)
                grants.append(declare_volume(self, name, spec, namespace, account.email, [ns, *grants]))
            else:
                annotations["iam.gke.io/gcp-service-account"] = account.email
        ksa = k8s.core.v1.ServiceAccount(
            f"{name}-ksa",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=KSA, namespace=namespace, labels=labels, annotations=annotations or None
            ),
            opts=in_namespace,
        )
        # The grants first: a mount before them fails with PermissionDenied and retries with backoff.
        after_ksa = pulumi.ResourceOptions(parent=self, depends_on=[ns, ksa, *grants])
        # No ignoreChanges on spec.replicas: it would keep sending the count from the state (rollout.py).
        workload = after_ksa
        if spec.dra_gpus and spec.disaggregation is None:  # each Pod's claim's template, before the Pods
            template = k8s.resource.v1.ResourceClaimTemplate(
                f"{name}-gpu-claim",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=gpu_claim_template_name(spec.gpus_per_pod), namespace=namespace, labels=labels
                ),
                spec=cast(Any, gpu_claim_template_spec(spec.gpus_per_pod)),
                opts=in_namespace,
            )
            workload = pulumi.ResourceOptions(parent=self, depends_on=[ns, ksa, *grants, template])
        # A Hyperdisk ML volume is filled before the first replica can start.
        timeout_s = ROLLOUT_TIMEOUT_S + (TRANSFER_TIMEOUT_S if hyperdisk else 0)
        if spec.disaggregation is not None:
            declare_roles(
                self, name, spec, namespace, labels, timeout_s=timeout_s, depends_on=[ns, ksa, *grants]
            )
            # Without the gateway's header decode's sidecar serves alone (decode-only).
            selector = role_selector(labels, DECODE)
        else:
            self._aggregated(name, spec, namespace, labels, timeout_s, workload, in_namespace)
            selector = serving_selector(spec, labels)
        k8s.core.v1.Service(
            f"{name}-service",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=spec.name, namespace=namespace, labels=labels),
            spec=k8s.core.v1.ServiceSpecArgs(
                selector=selector,
                ports=[k8s.core.v1.ServicePortArgs(name="http", port=PORT, target_port=PORT, protocol="TCP")],
            ),
            opts=in_namespace,
        )
        k8s.networking.v1.NetworkPolicy(
            f"{name}-network-policy",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=spec.name, namespace=namespace, labels=labels),
            spec=network_policy(spec, labels),
            opts=in_namespace,
        )
        for suffix, policy_name, policy in egress_policies(spec, labels):
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{suffix}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=policy_name, namespace=namespace, labels=labels),
                spec=policy,
                opts=in_namespace,
            )
        self.namespace = pulumi.Output.from_input(namespace)
        self.service_url = pulumi.Output.from_input(f"http://{spec.name}.{namespace}.svc:{PORT}")
        self.register_outputs({"serviceUrl": self.service_url, "namespace": self.namespace})

    def _aggregated(
        self,
        name: str,
        spec: InferenceServiceSpec,
        namespace: str,
        labels: dict[str, str],
        timeout_s: int,
        workload: pulumi.ResourceOptions,
        in_namespace: pulumi.ResourceOptions,
    ) -> None:
        """One workload of identical replicas: a Deployment (one node a replica) or a LeaderWorkerSet (a
        group of Pods a replica, on the GPU NICs where the pool has them), its autoscaler, budget and
        scrape."""
        pod, annotations = server_pod_spec(spec), pod_annotations(spec)
        nics = uses_nics(spec)
        if nics is not None:
            pod, more = attach_nics(pod, nics, spec.gpus_per_pod, kv_transfer=False)
            annotations = {**(annotations or {}), **more}
            claim = nic_claim(nics, spec.gpus_per_pod)
            if claim is not None:
                template = k8s.resource.v1.ResourceClaimTemplate(
                    f"{name}-nic-claim",
                    metadata=k8s.meta.v1.ObjectMetaArgs(name=claim[1], namespace=namespace, labels=labels),
                    spec=cast(Any, nic_claim_template_spec(pod_nics(nics, spec.gpus_per_pod))),
                    opts=in_namespace,
                )
                workload = pulumi.ResourceOptions.merge(
                    workload, pulumi.ResourceOptions(depends_on=[template])
                )
        # One node a replica: a Deployment; several: a LeaderWorkerSet, a group of Pods a replica.
        build = leader_worker_set if spec.nodes_per_replica > 1 else deployment
        build(name, spec, namespace, labels, pod, annotations=annotations, timeout_s=timeout_s, opts=workload)
        if spec.max_replicas is not None:
            horizontal_pod_autoscaler(name, spec, namespace, labels, in_namespace)
        pod_disruption_budget(name, spec, namespace, labels, in_namespace)
        k8s.apiextensions.CustomResource(
            f"{name}-pod-monitoring",
            api_version="monitoring.googleapis.com/v1",
            kind="PodMonitoring",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=spec.name, namespace=namespace, labels=labels),
            spec={
                "selector": {"matchLabels": serving_selector(spec, labels)},
                "endpoints": [{"port": PORT, "path": "/metrics", "interval": "15s"}],
            },
            opts=in_namespace,
        )
