"""CIS GKE hardening on by default, each with its switch: the kubelet's read-only port off on every
pool and in Autopilot's defaults, Binary Authorization on in prod (or turned off on purpose), the DNS
endpoint's external access, application-layer Secrets encryption with a KMS key."""

import pytest

from gke_gpu.core.common import ConfigError
from gke_gpu.stack.config import parse_settings
from tests.conftest import (
    AUTOPILOT_CLUSTER,
    L4_POOL,
    STANDARD_CLUSTER,
    config_error,
    render,
    stack_config,
    stack_render,
)

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
KEY = "projects/my-project/locations/us-central1/keyRings/gke/cryptoKeys/secrets"


def test_the_kubelet_read_only_port_is_off_on_every_pool_and_for_new_ones() -> None:
    result = render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[L4_POOL]))
    pools = result.of_type(NODE_POOL)
    assert {p.name for p in pools} >= {"gke-system", "gpu-l4-pool"}
    for pool in pools:
        kubelet = pool.inputs["nodeConfig"]["kubeletConfig"]
        assert kubelet == {"insecureKubeletReadonlyPortEnabled": "FALSE"}, pool.name
    cluster = result.one(CLUSTER).inputs
    defaults = cluster["nodePoolDefaults"]["nodeConfigDefaults"]
    assert defaults["insecureKubeletReadonlyPortEnabled"] == "FALSE"


def test_the_kubelet_read_only_port_is_off_in_autopilots_defaults() -> None:
    cluster = render(stack_config(cluster=AUTOPILOT_CLUSTER)).one(CLUSTER).inputs
    assert cluster["nodePoolAutoConfig"]["nodeKubeletConfig"] == {
        "insecureKubeletReadonlyPortEnabled": "FALSE"
    }
    assert "nodePoolDefaults" not in cluster


def _dns(cluster: dict) -> bool:
    return cluster["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["allowExternalTraffic"]


def test_the_dns_endpoints_external_access_is_a_switch_off_in_prod() -> None:
    assert _dns(render(stack_config(cluster=STANDARD_CLUSTER)).one(CLUSTER).inputs) is True
    prod = stack_render("prod")
    assert _dns(prod.one(CLUSTER).inputs) is False
    assert any("dnsEndpointExternal: false" in w for w in prod.warnings)


def test_binary_authorization_is_enforced_in_prod_and_train() -> None:
    for stack in ("prod", "train"):
        cluster = stack_render(stack).one(CLUSTER).inputs
        assert cluster["binaryAuthorization"] == {"evaluationMode": "PROJECT_SINGLETON_POLICY_ENFORCE"}


def _prod_problems(cluster: dict) -> str:
    with pytest.raises(ConfigError) as info:
        parse_settings({"cluster": cluster}, project="my-project", region="us-central1", stack="prod")
    return str(info.value)


def test_binary_authorization_off_in_a_stack_named_prod_needs_an_acknowledgement() -> None:
    for cluster in (STANDARD_CLUSTER, {**STANDARD_CLUSTER, "binaryAuthorization": False}):
        message = _prod_problems(cluster)
        assert "gke-gpu:cluster.binaryAuthorization:" in message
        assert "binaryAuthorizationOffAcknowledged: true" in message
    acknowledged = {**STANDARD_CLUSTER, "binaryAuthorizationOffAcknowledged": True}
    parse_settings({"cluster": acknowledged}, project="my-project", region="us-central1", stack="prod")
    both = {**acknowledged, "binaryAuthorization": True}
    assert "binaryAuthorizationOffAcknowledged: true contradicts" in _prod_problems(both)
    # Any other stack keeps it opt-in.
    parse_settings({"cluster": STANDARD_CLUSTER}, project="my-project", region="us-central1", stack="dev")


def test_secrets_are_encrypted_with_the_stacks_kms_key() -> None:
    assert "databaseEncryption" not in render(stack_config(cluster=STANDARD_CLUSTER)).one(CLUSTER).inputs
    cluster = {**STANDARD_CLUSTER, "secretsEncryptionKey": KEY}
    inputs = render(stack_config(cluster=cluster)).one(CLUSTER).inputs
    assert inputs["databaseEncryption"] == {"state": "ENCRYPTED", "keyName": KEY}


def test_a_secrets_key_that_is_not_a_kms_key_is_refused() -> None:
    message = config_error({"cluster": {**STANDARD_CLUSTER, "secretsEncryptionKey": "my-key"}})
    assert "gke-gpu:cluster.secretsEncryptionKey:" in message
    assert "Cloud KMS key" in message


@pytest.mark.parametrize(
    "key",
    [
        "projects/my-project/locations/us-central1/keyRings/clé/cryptoKeys/secrets",  # not ASCII
        "projects/my-project/locations/us-central1/keyRings/gke/cryptoKeys/" + "k" * 64,  # 64 characters
    ],
)
def test_a_kms_key_ring_or_key_id_kms_refuses_is_refused(key: str) -> None:
    # KMS IDs are 1-63 of [A-Za-z0-9_-]; a Unicode letter is not one (the pattern once used `\w`).
    message = config_error({"cluster": {**STANDARD_CLUSTER, "secretsEncryptionKey": key}})
    assert "gke-gpu:cluster.secretsEncryptionKey:" in message


@pytest.mark.parametrize("stack", ["dev", "serve", "train", "prod", "onprem"])
def test_every_namespace_the_program_creates_or_installs_into_has_pod_security_labels(stack: str) -> None:
    result = stack_render(stack)
    for resource in result.of_type("kubernetes:core/v1:Namespace"):
        labels = resource.inputs["metadata"]["labels"]
        assert labels.get("pod-security.kubernetes.io/enforce") in ("baseline", "restricted", "privileged"), (
            resource.inputs["metadata"]["name"]
        )
        assert labels.get("pod-security.kubernetes.io/warn"), resource.inputs["metadata"]["name"]
    for patch in result.of_type("kubernetes:core/v1:NamespacePatch"):
        assert patch.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
