"""What the MultiKueue manager may do on a worker, and the kubeconfig it does it with (and the
worker's Kueue metrics scraped, for the fleet's dashboard).

Kueue v0.19.2 takes a worker's credentials as a kubeconfig in a Secret of the manager's
`kueue-system` (key `kubeconfig`), and refuses one that runs an exec plugin, an auth provider, a token
or CA file, basic auth or skips TLS checks (pkg/controller/admissionchecks/multikueue/
multikueuecluster.go): a bearer token with the CA inline is what it accepts. The account, its
ClusterRole and the token Secret follow Kueue's site/static/examples/multikueue/
create-multikueue-kubeconfig.sh at v0.19.2, its rules cut to the job kinds a fleet dispatches (batch
Jobs and JobSets) and Kueue's own objects."""

import base64
import json
from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from ..core.arg_types import K8sName
from ..core.component import NO_ARGS, GkeGpuComponent
from ..core.k8s import app_labels
from ..core.validation import ArgsModel, Deferrable
from ..monitoring.kueue_metrics import KueueMetricsScrape

KUEUE_NAMESPACE = "kueue-system"
ACCOUNT = "multikueue"
_WATCH = ["create", "delete", "get", "list", "watch"]
# create-multikueue-kubeconfig.sh's ClusterRole (Kueue v0.19.2), the job kinds a fleet dispatches only.
RULES: list[dict[str, Any]] = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _WATCH},
    {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": _WATCH},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": [*_WATCH, "update", "patch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["clusterqueues", "localqueues"],
        "verbs": ["get", "list", "watch"],
    },
]


class MultiKueueWorkerAccessArgs(TypedDict):
    worker: str
    """The worker's name (the MultiKueueCluster's): names the kubeconfig's cluster and user."""
    endpoint: pulumi.Input[str]
    """The worker's control-plane address the manager's Kueue connects to (https://<endpoint>)."""
    ca_certificate: pulumi.Input[str]
    """The worker's cluster CA, base64-encoded PEM (GKE's masterAuth.clusterCaCertificate)."""


class _Spec(ArgsModel):
    worker: K8sName
    endpoint: Deferrable[str]
    ca_certificate: Deferrable[str]


def kubeconfig(worker: str, endpoint: str, ca_certificate: str, token: str) -> str:
    """A kubeconfig Kueue accepts: the CA inline and a bearer token (JSON, which is YAML)."""
    user = f"{worker}-{ACCOUNT}"
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": worker,
                    "cluster": {
                        "server": f"https://{endpoint}",
                        "certificate-authority-data": ca_certificate,
                    },
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": worker, "context": {"cluster": worker, "user": user}}],
            "current-context": worker,
        }
    )


def _token(data: Any) -> str:
    encoded = (data or {}).get("token") if isinstance(data, dict) else None
    return base64.b64decode(encoded).decode() if encoded else ""


class MultiKueueWorkerAccess(GkeGpuComponent[_Spec]):
    """On a worker: the ServiceAccount `multikueue` in kueue-system, a ClusterRole with the least
    Kueue's docs list for the kinds dispatched, its binding, and a token Secret for the account; the
    manager's kubeconfig for the worker, a Pulumi secret. And the worker's Kueue metrics scraped by
    Managed Prometheus (KueueMetricsScrape), for the fleet's dashboard."""

    kubeconfig: pulumi.Output[str]
    """The kubeconfig the manager's Kueue uses for this worker (a secret)."""

    _args_model = _Spec

    def __init__(
        self,
        name: str,
        /,
        args: MultiKueueWorkerAccessArgs = NO_ARGS,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        args = self._given(name, args, kwargs)
        spec = self._begin(name, args, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = app_labels(ACCOUNT, component="multikueue")
        account = k8s.core.v1.ServiceAccount(
            f"{name}-account",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=ACCOUNT, namespace=KUEUE_NAMESPACE, labels=labels),
            automount_service_account_token=False,
            opts=child,
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-role",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{ACCOUNT}-worker", labels=labels),
            rules=[k8s.rbac.v1.PolicyRuleArgs(**{_snake(k): v for k, v in rule.items()}) for rule in RULES],
            opts=child,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{ACCOUNT}-worker", labels=labels),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=f"{ACCOUNT}-worker"
            ),
            subjects=[
                k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=ACCOUNT, namespace=KUEUE_NAMESPACE)
            ],
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[role])),
        )
        # The token controller fills the Secret's data with the account's token (and the CA).
        token = k8s.core.v1.Secret(
            f"{name}-token",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=f"{ACCOUNT}-token",
                namespace=KUEUE_NAMESPACE,
                labels=labels,
                annotations={"kubernetes.io/service-account.name": ACCOUNT},
            ),
            type="kubernetes.io/service-account-token",
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(depends_on=[account], additional_secret_outputs=["data"])
            ),
        )
        # The worker's Kueue metrics, which the fleet's dashboard charts per worker.
        KueueMetricsScrape(f"{name}-kueue-metrics", {"namespace": KUEUE_NAMESPACE}, opts=child)
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(args["endpoint"], args["ca_certificate"], token.data).apply(
                lambda values: kubeconfig(spec.worker, values[0], values[1], _token(values[2]))
            )
        )
        self.register_outputs({"kubeconfig": self.kubeconfig})


def _snake(key: str) -> str:
    return {"apiGroups": "api_groups"}.get(key, key)
