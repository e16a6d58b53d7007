"""The cluster component alone: secure defaults, Autopilot vs Standard, kubeconfig and provider."""

from __future__ import annotations

import pulumi
import pytest
import yaml

import tools.offline
from gke_gpu.cluster.gke_cluster import GkeCluster, node_service_account_id
from gke_gpu.cluster.model import ReleaseChannel
from tools.offline import SECRET, run_program

SYSTEM_POOL = {
    "machine_type": "e2-standard-4",
    "min_nodes": 1,
    "max_nodes": 3,
    "spot": False,
    "disk_size_gb": 100,
}

# GKE's default monitoring packages for a new cluster (GKE's kube state metrics and cAdvisor/Kubelet
# metrics pages): written out here, so a change to the list in cluster/gke_managed.py shows.
GKE_DEFAULT_PACKAGES = [
    "SYSTEM_COMPONENTS",
    "STORAGE",
    "POD",
    "DEPLOYMENT",
    "STATEFULSET",
    "DAEMONSET",
    "HPA",
    "JOBSET",
    "CADVISOR",
    "KUBELET",
]


def declare(*, preview: bool = True, **overrides):
    args = dict(
        project="test-project",
        name="gpu-test",
        location="us-central1",
        autopilot=False,
        network="net",
        subnetwork="subnet",
        pods_range_name="pods",
        services_range_name="services",
        system_pool=SYSTEM_POOL,
    )
    args.update(overrides)
    args = {k: v for k, v in args.items() if v is not None}  # None: leave the key out
    holder = {}

    def program():
        cluster = holder["cluster"] = GkeCluster("gke", args)
        return {
            "kubeconfig": cluster.kubeconfig,
            "plain": cluster.kubeconfig.apply(str),
            "unsecret": pulumi.Output.unsecret(cluster.kubeconfig),
            "dnsEndpoint": cluster.dns_endpoint,
        }

    result = run_program({}, program=program, preview=preview)
    assert result.error is None, result.error
    return result


def cluster_inputs(result):
    return result.one("gcp:container/cluster:Cluster").inputs


def test_standard_cluster_is_secure_by_default() -> None:
    c = cluster_inputs(declare())
    assert c["name"] == "gpu-test"
    assert c["removeDefaultNodePool"] is True
    assert c["networkingMode"] == "VPC_NATIVE"
    assert c["ipAllocationPolicy"] == {
        "clusterSecondaryRangeName": "pods",
        "servicesSecondaryRangeName": "services",
    }
    assert c["workloadIdentityConfig"] == {"workloadPool": "test-project.svc.id.goog"}
    assert c["enableShieldedNodes"] is True
    assert c["datapathProvider"] == "ADVANCED_DATAPATH", "Dataplane V2 enforces NetworkPolicy"
    assert c["privateClusterConfig"]["enablePrivateNodes"] is True
    assert c["releaseChannel"] == {"channel": "REGULAR"}
    assert c["deletionProtection"] is True
    assert c["monitoringConfig"]["managedPrometheus"] == {"enabled": True}
    # GKE's default packages kept (cluster/gke_managed.py), DCGM added.
    assert c["monitoringConfig"]["enableComponents"] == [*GKE_DEFAULT_PACKAGES, "DCGM"]
    # GKE's short-lived default pool gets Workload Identity metadata and Shielded VM settings too.
    assert c["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert c["nodeConfig"]["shieldedInstanceConfig"]["enableSecureBoot"] is True
    assert "enableAutopilot" not in c
    # Same-node Pod traffic through the VPC is opt-in (switching it on restarts every node);
    # Calico off, explicitly.
    assert c["enableIntranodeVisibility"] is False
    assert c["networkPolicy"] == {"enabled": False}


@pytest.mark.parametrize("autopilot", [False, True], ids=["standard", "autopilot"])
def test_control_plane_is_private_and_reached_through_the_dns_endpoint(autopilot: bool) -> None:
    c = cluster_inputs(declare(autopilot=autopilot, system_pool=None if autopilot else SYSTEM_POOL))
    # The IP endpoint's public address is off; the DNS endpoint (IAM-checked) takes outside traffic.
    assert c["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": True}
    assert c["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}
    assert "ipEndpointsConfig" not in c["controlPlaneEndpointsConfig"], "the private IP endpoint stays"
    # Authorized networks on with no range: nothing outside the VPC on the IP endpoint.
    assert c["masterAuthorizedNetworksConfig"] == {"gcpPublicCidrsAccessEnabled": False}
    assert c["masterAuth"] == {"clientCertificateConfig": {"issueClientCertificate": False}}
    assert c["binaryAuthorization"] == {"evaluationMode": "DISABLED"}


def test_binary_authorization_is_opt_in() -> None:
    c = cluster_inputs(declare(binary_authorization=True))
    assert c["binaryAuthorization"] == {"evaluationMode": "PROJECT_SINGLETON_POLICY_ENFORCE"}


def test_dedicated_least_privilege_node_service_account() -> None:
    result = declare(preview=False)
    account = result.one("gcp:serviceaccount/account:Account").inputs
    assert account["accountId"] == "gpu-test-nodes"
    bindings = result.of_type("gcp:projects/iAMMember:IAMMember")
    # Google's node role, and Service Usage Consumer, which image streaming needs on a custom node
    # account (GKE "Use Image streaming", Requirements): nothing else.
    assert sorted(b.inputs["role"] for b in bindings) == [
        "roles/container.defaultNodeServiceAccount",
        "roles/serviceusage.serviceUsageConsumer",
    ]
    for binding in bindings:
        assert (
            binding.inputs["member"] == "serviceAccount:gpu-test-nodes@test-project.iam.gserviceaccount.com"
        )
    system = result.one("gcp:container/nodePool:NodePool").inputs
    assert system["nodeConfig"]["serviceAccount"] == "gpu-test-nodes@test-project.iam.gserviceaccount.com"
    assert cluster_inputs(result)["nodeConfig"]["serviceAccount"].endswith(
        "@test-project.iam.gserviceaccount.com"
    )


def test_service_account_id_fits_gcp_limits() -> None:
    long_name = "a" * 40
    account_id = node_service_account_id(long_name)
    assert 6 <= len(account_id) <= 30
    assert node_service_account_id("gpu-prod") == "gpu-prod-nodes"
    # Names too long to fit keep a hash of the whole name: no two clusters share an account.
    a = node_service_account_id("team-a-gpu-training-cluster-1")
    b = node_service_account_id("team-a-gpu-training-cluster-2")
    assert a != b
    assert all(6 <= len(x) <= 30 for x in (a, b))


def test_system_pool_is_a_separate_shielded_node_pool() -> None:
    system = declare().one("gcp:container/nodePool:NodePool").inputs
    assert system["name"] == "system"
    assert system["autoscaling"] == {
        "totalMinNodeCount": 1,
        "totalMaxNodeCount": 3,
        "locationPolicy": "BALANCED",
    }
    node = system["nodeConfig"]
    assert node["machineType"] == "e2-standard-4"
    assert node["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableIntegrityMonitoring": True}
    assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert "guestAccelerators" not in node


def test_autopilot_cluster_has_no_node_pools_and_uses_the_node_account() -> None:
    result = declare(autopilot=True, system_pool=None, preview=False)
    c = cluster_inputs(result)
    assert c["enableAutopilot"] is True
    assert "removeDefaultNodePool" not in c
    assert "nodeConfig" not in c
    defaults = c["clusterAutoscaling"]["autoProvisioningDefaults"]
    assert defaults["serviceAccount"] == "gpu-test-nodes@test-project.iam.gserviceaccount.com"
    assert result.of_type("gcp:container/nodePool:NodePool") == []


def test_authorized_networks_restrict_the_public_endpoint() -> None:
    vpn = [{"cidr_block": "203.0.113.0/24", "display_name": "vpn"}]
    c = cluster_inputs(declare(public_endpoint=True, authorized_networks=vpn))
    assert c["privateClusterConfig"]["enablePrivateEndpoint"] is False
    assert c["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [{"cidrBlock": "203.0.113.0/24", "displayName": "vpn"}],
        "gcpPublicCidrsAccessEnabled": False,
    }
    # Only a public endpoint without a list (the stack's explicit opt-in) is open to any address.
    open_endpoint = cluster_inputs(declare(public_endpoint=True))
    assert open_endpoint["privateClusterConfig"]["enablePrivateEndpoint"] is False
    assert "masterAuthorizedNetworksConfig" not in open_endpoint
    # The DNS endpoint stays on either way.
    assert open_endpoint["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["allowExternalTraffic"] is True


def test_options_follow_the_args() -> None:
    c = cluster_inputs(
        declare(
            deletion_protection=False,
            private_nodes=False,
            public_endpoint=True,
            release_channel=ReleaseChannel.STABLE,
            managed_dcgm=False,
        )
    )
    assert c["deletionProtection"] is False
    assert c["privateClusterConfig"]["enablePrivateNodes"] is False
    assert c["releaseChannel"] == {"channel": "STABLE"}
    assert c["monitoringConfig"]["enableComponents"] == GKE_DEFAULT_PACKAGES


def test_kubeconfig_is_a_secret_using_the_gke_auth_plugin() -> None:
    result = declare(preview=False)
    assert result.outputs["kubeconfig"] == SECRET
    kubeconfig = yaml.safe_load(result.outputs["plain"]) if result.outputs["plain"] != SECRET else None
    assert kubeconfig is None, "derived values of a secret stay secret"


def test_kubeconfig_content() -> None:
    from gke_gpu.cluster.gke_cluster import render_kubeconfig

    text = render_kubeconfig(
        project="p", location="us-central1", name="c", dns_endpoint="gke-0123abcd-p.us-central1.gke.goog"
    )
    config = yaml.safe_load(text)
    assert config["current-context"] == "gke_p_us-central1_c"
    # As `gcloud container clusters get-credentials --dns-endpoint` writes it: the DNS endpoint has a
    # publicly trusted certificate, so no certificate-authority-data.
    assert config["clusters"][0]["cluster"] == {"server": "https://gke-0123abcd-p.us-central1.gke.goog"}
    assert config["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert "token" not in text


def test_kubeconfig_uses_the_dns_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    dns = "gke-0123456789abcdef-test-project.us-central1.gke.goog"
    computed = tools.offline._computed_outputs

    def with_dns_endpoint(args):
        outputs = computed(args)
        if args.typ == "gcp:container/cluster:Cluster":
            outputs["controlPlaneEndpointsConfig"] = {
                "dnsEndpointConfig": {"allowExternalTraffic": True, "endpoint": dns}
            }
        return outputs

    monkeypatch.setattr(tools.offline, "_computed_outputs", with_dns_endpoint)
    result = declare(preview=False)
    assert result.outputs["dnsEndpoint"] == dns
    kubeconfig = yaml.safe_load(result.outputs["unsecret"])
    assert kubeconfig["clusters"][0]["cluster"]["server"] == f"https://{dns}"
    assert "203.0.113.10" not in result.outputs["unsecret"], "never the IP endpoint"


def test_kubernetes_provider_is_built_from_the_secret_kubeconfig() -> None:
    result = declare()
    provider = result.one("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == SECRET
    assert provider.parent == result.one("gke-gpu:index:GkeCluster").urn


def test_every_child_is_parented_to_the_component() -> None:
    result = declare()
    component = result.one("gke-gpu:index:GkeCluster")
    children = [r for r in result.resources if r is not component]
    assert children and all(r.parent == component.urn for r in children)


def test_intranode_visibility_when_asked() -> None:
    assert cluster_inputs(declare(intranode_visibility=True))["enableIntranodeVisibility"] is True


@pytest.mark.parametrize("autopilot", [False, True])
def test_the_gateway_api_when_asked(autopilot: bool) -> None:
    system = {"system_pool": None} if autopilot else {}
    on = cluster_inputs(declare(autopilot=autopilot, gateway_api=True, **system))
    assert on["gatewayApiConfig"] == {"channel": "CHANNEL_STANDARD"}
    # Left unset when off: clusters created before it see no diff.
    assert "gatewayApiConfig" not in cluster_inputs(declare(autopilot=autopilot, **system))


# The kubeconfig stacks created before the DNS endpoint hold in state (components/cluster/gke_cluster.py at
# 88e95bc): `kubeconfigEndpoint: ip` must reproduce it exactly, so pulumi-kubernetes sees no change
# of cluster while the provider's clusterIdentifier is added.
PRE_DNS_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: gke_p_us-central1_c
  cluster:
    server: https://203.0.113.10
    certificate-authority-data: Q0E=
contexts:
- name: gke_p_us-central1_c
  context:
    cluster: gke_p_us-central1_c
    user: gke_p_us-central1_c
current-context: gke_p_us-central1_c
users:
- name: gke_p_us-central1_c
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
      installHint: Install gke-gcloud-auth-plugin, see https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin
      provideClusterInfo: true
"""


def test_the_ip_kubeconfig_is_the_one_existing_stacks_hold() -> None:
    from gke_gpu.cluster.gke_cluster import render_ip_kubeconfig

    text = render_ip_kubeconfig(
        project="p", location="us-central1", name="c", endpoint="203.0.113.10", ca_certificate="Q0E="
    )
    assert text == PRE_DNS_KUBECONFIG


def test_kubeconfig_endpoint_ip_keeps_the_ip_server() -> None:
    result = declare(preview=False, kubeconfig_endpoint="ip")
    kubeconfig = yaml.safe_load(result.outputs["unsecret"])
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://203.0.113.10"


def test_the_provider_has_a_stable_cluster_identifier() -> None:
    """A kubeconfig server change (IP to DNS endpoint) is then a provider update, not a replacement
    of every Kubernetes object; the identifier is known at preview, so it never forces one either."""
    provider = declare().one("pulumi:providers:kubernetes")
    assert provider.inputs["clusterIdentifier"] == "gke/test-project/us-central1/gpu-test"


def test_no_kubeconfig_for_a_missing_dns_endpoint() -> None:
    import pulumi

    from gke_gpu.cluster.gke_cluster import render_kubeconfig

    with pytest.raises(pulumi.RunError, match="GKE reported no DNS endpoint for cluster c"):
        render_kubeconfig(project="p", location="us-central1", name="c", dns_endpoint=None)
