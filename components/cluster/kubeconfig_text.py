"""The kubeconfig GkeCluster hands to its Kubernetes provider: one context that authenticates with
gke-gcloud-auth-plugin, for the DNS endpoint (no credential inside) or, as older stacks have it in
state, the IP endpoint with its CA."""

from __future__ import annotations

import textwrap

import pulumi


def render_ip_kubeconfig(
    *, project: str, location: str, name: str, endpoint: str | None, ca_certificate: str | None
) -> str:
    """The kubeconfig for the IP endpoint, byte for byte as stacks created before the DNS endpoint
    have it in state (so keeping it changes nothing for pulumi-kubernetes)."""
    cluster = f"server: https://{endpoint}\ncertificate-authority-data: {ca_certificate}"
    return _kubeconfig(project=project, location=location, name=name, cluster=cluster)


def render_kubeconfig(*, project: str, location: str, name: str, dns_endpoint: str | None) -> str:
    """A kubeconfig for the cluster's DNS endpoint that authenticates with gke-gcloud-auth-plugin
    (no credential inside), as `gcloud container clusters get-credentials --dns-endpoint` writes it:
    no certificate-authority-data, since the DNS endpoint serves a publicly trusted certificate."""
    if not dns_endpoint:
        # Never a kubeconfig for https://None: the provider would fail later with a worse message.
        raise pulumi.RunError(
            f"GKE reported no DNS endpoint for cluster {name}; the Kubernetes objects cannot be created "
            "through it (cluster.kubeconfigEndpoint: ip uses the IP endpoint instead)"
        )
    return _kubeconfig(
        project=project, location=location, name=name, cluster=f"server: https://{dns_endpoint}"
    )


def _kubeconfig(*, project: str, location: str, name: str, cluster: str) -> str:
    """A kubeconfig with one context that authenticates with gke-gcloud-auth-plugin; `cluster` is
    the YAML of its cluster entry (server and, for the IP endpoint, the CA)."""
    context = f"gke_{project}_{location}_{name}"
    entry = textwrap.indent(cluster, " " * 4)
    return (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        f"- name: {context}\n"
        "  cluster:\n"
        f"{entry}\n"
        + textwrap.dedent(
            f"""\
            contexts:
            - name: {context}
              context:
                cluster: {context}
                user: {context}
            current-context: {context}
            users:
            - name: {context}
              user:
                exec:
                  apiVersion: client.authentication.k8s.io/v1beta1
                  command: gke-gcloud-auth-plugin
                  installHint: Install gke-gcloud-auth-plugin, see https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin
                  provideClusterInfo: true
            """
        )
    )
