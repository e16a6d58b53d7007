"""Bring your own cluster: the GPU layer on a cluster the program does not manage."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import config_error, stack_config, stack_render
from tests.conftest import render as render_config
from tests.kubernetes_schemas import validate
from tools import plan
from tools.offline import SECRET

KUBECONFIG = yaml.safe_dump(
    {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": {"server": "https://10.0.0.1:6443"}}],
        "contexts": [{"name": "gpu-lab", "context": {"cluster": "lab", "user": "admin"}}],
        "current-context": "gpu-lab",
        "users": [{"name": "admin", "user": {"token": "not-a-real-token"}}],
    }
)
GENERIC = {"mode": "existing", "flavor": "generic", "kubeconfig": KUBECONFIG, "context": "gpu-lab"}
GKE = {"mode": "existing", "flavor": "gke", "kubeconfig": KUBECONFIG, "name": "team-cluster"}


def render(config, **options):
    """Render with the kubeconfig held as a secret, as a stack file stores it (`secure:`): it holds a
    token, which the stack refuses in plain text."""
    return render_config(config, secret_keys=("gke-gpu:cluster",), **options)


def generic(**keys):
    return stack_config(project=None, region=None, cluster=GENERIC, **keys)


def daemon_set(result, namespace: str):
    (ds,) = [
        r.inputs
        for r in result.of_type("kubernetes:apps/v1:DaemonSet")
        if r.inputs["metadata"]["namespace"] == namespace
    ]
    return ds


def test_no_gcp_resources_and_a_provider_from_the_secret_kubeconfig() -> None:
    result = render(generic(gpuNodes=["gpu-1"], workloads=["nvidia-smi"]))
    assert not [r for r in result.resources if r.type.startswith("gcp:")]
    provider = result.one("pulumi:providers:kubernetes").inputs
    assert provider["kubeconfig"] == SECRET
    assert provider["context"] == "gpu-lab"
    for r in result.resources:
        if r.type.startswith("kubernetes:"):
            assert r.provider and r.provider.startswith(result.one("pulumi:providers:kubernetes").urn)


def test_device_plugin_daemonset() -> None:
    ds = daemon_set(render(generic()), "kube-system")
    assert ds["apiVersion"] == "apps/v1"
    pod = ds["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-node-critical"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    (container,) = pod["containers"]
    assert container["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert [v["hostPath"]["path"] for v in pod["volumes"]] == ["/var/lib/kubelet/device-plugins"]
    assert "CONFIG_FILE" not in {e["name"] for e in container["env"]}


def test_a_custom_gpu_node_label_such_as_gpus_true() -> None:
    result = render(
        generic(devicePlugin={"gpuNodeLabel": "gpus=true"}, gpuNodes=["ws-1"], workloads=["nvidia-smi"])
    )
    assert daemon_set(result, "kube-system")["spec"]["template"]["spec"]["nodeSelector"] == {"gpus": "true"}
    patch = result.one("kubernetes:core/v1:NodePatch").inputs
    assert patch["metadata"]["labels"] == {"gpus": "true"}
    job = result.one("kubernetes:batch/v1:Job").inputs
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"gpus": "true"}


def test_time_slicing_through_the_plugin_config_map() -> None:
    result = render(
        generic(devicePlugin={"sharing": {"timeSlicing": {"replicas": 4}}}, workloads=["sharing-demo"])
    )
    config_map = result.one("kubernetes:core/v1:ConfigMap", "device-plugin-config").inputs
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    assert config["version"] == "v1"
    assert config["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    pod = daemon_set(result, "kube-system")["spec"]["template"]
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["CONFIG_FILE"] == "/etc/nvidia-device-plugin/config.yaml"
    assert len(pod["metadata"]["annotations"]["gke-gpu/config-sha256"]) == 64, (
        "a config change rolls the Pods"
    )
    demo = result.one("kubernetes:batch/v1:Job").inputs
    assert demo["spec"]["parallelism"] == demo["spec"]["completions"] == 4, "a client per time slice"


def test_gpu_nodes_are_labelled_and_tainted_by_minimal_patches() -> None:
    """A patch is a server-side apply: whatever it carries, the stack owns on the node. It carries
    the node's name, the one label and the GPU taint; nothing else (no annotation, no other field)."""
    result = render(generic(gpuNodes=["gpu-1", "gpu-2"]))
    patches = {r.inputs["metadata"]["name"]: r.inputs for r in result.of_type("kubernetes:core/v1:NodePatch")}
    assert sorted(patches) == ["gpu-1", "gpu-2"]
    for name, patch in patches.items():
        assert patch == {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        }


def test_removing_a_node_from_the_list_deletes_its_patch() -> None:
    """Deleting a Patch gives its fields up (pulumi-kubernetes): the label goes, and the taint unless
    another manager has since rewritten the node's atomic taint list (docs/bring-your-own-cluster.md)."""
    before = plan.to_document(render(generic(gpuNodes=["gpu-1", "gpu-2"])))
    after = plan.to_document(render(generic(gpuNodes=["gpu-1"])))
    changes = plan.diff(before, after)
    deleted = [c for c in changes if c.status == "delete"]
    assert [c.type for c in deleted] == ["kubernetes:core/v1:NodePatch"]
    assert deleted[0].name.endswith("gpu-2")


def test_no_taint_on_a_single_node_workstation() -> None:
    result = render(generic(gpuNodes=["workstation"], devicePlugin={"taintGpuNodes": False}))
    assert result.one("kubernetes:core/v1:NodePatch").inputs == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "workstation", "labels": {"nvidia.com/gpu.present": "true"}},
    }


def test_generic_dcgm_exporter_is_not_privileged_and_scraped_by_a_service_monitor() -> None:
    result = render(generic())
    ds = daemon_set(result, "gpu-monitoring")
    (container,) = ds["spec"]["template"]["spec"]["containers"]
    assert "privileged" not in container["securityContext"]
    assert container["securityContext"]["capabilities"] == {"add": ["SYS_ADMIN"], "drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert ds["spec"]["template"]["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    policy = result.one("kubernetes:networking.k8s.io/v1:NetworkPolicy").inputs
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    assert not [v for v in ds["spec"]["template"]["spec"]["volumes"] if "nvidia" in v["name"]]
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    monitor = result.one("kubernetes:monitoring.coreos.com/v1:ServiceMonitor").inputs
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert result.of_type("gcp:monitoring/dashboard:Dashboard") == [], (
        "no Cloud Monitoring dashboard by default"
    )


def test_annotation_scraping() -> None:
    result = render(generic(monitoring={"scrape": "annotations"}))
    service = result.one("kubernetes:core/v1:Service").inputs
    assert service["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert result.of_type("kubernetes:monitoring.coreos.com/v1:ServiceMonitor") == []


def test_runtime_class_reaches_every_gpu_pod() -> None:
    result = render(generic(devicePlugin={"runtimeClassName": "nvidia"}, workloads=["nvidia-smi"]))
    for r in result.resources:
        if r.type in ("kubernetes:apps/v1:DaemonSet", "kubernetes:batch/v1:Job"):
            assert r.inputs["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia", r.name


def test_samples_on_generic_nodes_rely_on_the_container_toolkit() -> None:
    result = render(generic(workloads=["nvidia-smi", "cuda-vector-add", "pytorch-smoke"]))
    for job in result.of_type("kubernetes:batch/v1:Job"):
        pod = job.inputs["spec"]["template"]["spec"]
        env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
        assert env["NVIDIA_DISABLE_REQUIRE"] == "true"
        assert "LD_LIBRARY_PATH" not in env
        assert pod["nodeSelector"]["nvidia.com/gpu.present"] == "true"
        assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_gke_flavor_uses_gkes_device_plugin_and_dcgm() -> None:
    result = render(
        stack_config(region=None, cluster=GKE, workloads=["nvidia-smi"], monitoring={"dcgm": "none"})
    )
    assert result.of_type("gke-gpu:index:NvidiaDevicePlugin") == []
    job = result.one("kubernetes:batch/v1:Job").inputs
    terms = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "cloud.google.com/gke-accelerator", "operator": "Exists"}
    ]
    assert result.of_type("kubernetes:apps/v1:DaemonSet") == [], "GKE's own DCGM; the exporter is refused"
    dashboard = json.loads(result.one("gcp:monitoring/dashboard:Dashboard").inputs["dashboardJson"])
    assert "team-cluster" in json.dumps(dashboard)


def test_gke_flavor_defaults_to_managed_dcgm_and_a_dashboard() -> None:
    result = render(stack_config(region=None, cluster=GKE))
    assert result.of_type("gke-gpu:index:DcgmExporter") == []
    assert result.outputs["monitoring"]["dcgm"] == "managed"
    assert result.of_type("gcp:monitoring/dashboard:Dashboard")


def test_onprem_stack() -> None:
    result = stack_render("onprem")
    assert result.error is None, result.error
    outputs = result.outputs
    assert outputs["clusterMode"] == "existing"
    assert (
        "Registered device plugin for 'nvidia.com/gpu' with Kubelet" in outputs["devicePluginHealthyLogLines"]
    )
    assert "nvidia-device-plugin" in outputs["checks"]["devicePluginLogs"]
    for obj in plan.kubernetes_objects(plan.to_document(result)):
        validate(obj)


# -- Bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "fragments"),
    [
        (
            {"cluster": {"mode": "existing", "flavor": "generic"}},
            ["gke-gpu:cluster.kubeconfig: required with mode existing"],
        ),
        (
            {"cluster": {"mode": "existing", "kubeconfig": KUBECONFIG}},
            ["gke-gpu:cluster.flavor: required with mode existing"],
        ),
        (
            {"cluster": GENERIC, "gpuPools": [{"name": "l4", "accelerator": "nvidia-l4", "maxNodes": 1}]},
            ["gke-gpu:gpuPools: not allowed with cluster.mode existing"],
        ),
        (
            {"cluster": GENERIC, "network": {"subnetCidr": "10.0.0.0/20"}},
            ["gke-gpu:network: not allowed with cluster.mode existing"],
        ),
        (
            {"cluster": {**GENERIC, "location": "us-central1"}},
            ["gke-gpu:cluster.location: not allowed with mode existing"],
        ),
        (
            {"cluster": {**GENERIC, "systemPool": {}}},
            ["gke-gpu:cluster.systemPool: not allowed with mode existing"],
        ),
        (
            {"cluster": GENERIC, "devicePlugin": {"gpuNodeLabel": ""}},
            ["gke-gpu:devicePlugin.gpuNodeLabel: '' is not a Kubernetes label selector"],
        ),
        (
            {"cluster": GENERIC, "devicePlugin": {"gpuNodeLabel": "gpus"}},
            ["gke-gpu:devicePlugin.gpuNodeLabel: 'gpus' is not"],
        ),
        (
            {"cluster": GENERIC, "devicePlugin": {"sharing": {"timeSlicing": {"replicas": 1}}}},
            ["gke-gpu:devicePlugin.sharing.timeSlicing.replicas: 1 is not allowed; must be >= 2"],
        ),
        (
            {"cluster": GENERIC, "devicePlugin": {"runtimeClassName": "Nvidia_X"}},
            ["gke-gpu:devicePlugin.runtimeClassName: 'Nvidia_X' is not allowed: expected lowercase letters"],
        ),
        (
            {"cluster": GKE, "devicePlugin": {}},
            ["gke-gpu:devicePlugin: only allowed with cluster.mode existing and cluster.flavor generic"],
        ),
        (
            {"cluster": {"mode": "standard"}, "gpuNodes": ["n"]},
            ["gke-gpu:gpuNodes: only allowed with cluster.mode existing"],
        ),
        (
            {"cluster": {**GENERIC, "context": "prod"}},
            ["gke-gpu:cluster.context: 'prod' is not a context of the kubeconfig; allowed: gpu-lab"],
        ),
        (
            {"cluster": GENERIC, "monitoring": {"dcgm": "managed"}},
            ["gke-gpu:monitoring.dcgm: 'managed' is GKE's DCGM"],
        ),
        (
            {"cluster": {"mode": "standard", "kubeconfig": KUBECONFIG}},
            ["gke-gpu:cluster.kubeconfig: only allowed with mode existing"],
        ),
        (
            {"cluster": GENERIC, "gpuNodes": ["Bad_Node"]},
            ["gke-gpu:gpuNodes[0]: 'Bad_Node' is not a Kubernetes node name"],
        ),
        (
            {"cluster": GENERIC, "workloads": [{"name": "nvidia-smi", "pool": "l4"}]},
            ["gke-gpu:workloads[0].pool: not allowed with cluster.mode existing"],
        ),
        (
            {"cluster": GENERIC, "workloads": ["sharing-demo"]},
            ["gke-gpu:workloads[0].name: 'sharing-demo' on an existing cluster needs"],
        ),
    ],
)
def test_bad_existing_cluster_config(raw: dict, fragments: list[str]) -> None:
    message = config_error(raw, project=None, region=None)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message}"


def test_generic_cluster_needs_no_gcp_project() -> None:
    result = render(generic())
    assert result.outputs["project"] is None


def test_alerts_on_a_generic_cluster_are_refused() -> None:
    message = config_error(
        {
            "cluster": {**GENERIC, "name": "lab"},
            "monitoring": {
                "alerts": {
                    "enabled": True,
                    "notificationChannels": ["projects/p-1234/notificationChannels/1"],
                }
            },
        },
        region=None,
    )
    assert "gke-gpu:monitoring.alerts.enabled: true is not allowed on a generic cluster" in message


def test_a_kubeconfig_with_a_plain_text_credential_is_refused() -> None:
    from tools.offline import run_program

    result = run_program(generic(gpuNodes=["gpu-1"]))  # the same config, not held as a secret
    assert result.error is not None
    assert "gke-gpu:cluster.kubeconfig: holds a credential in plain text (users[0].user.token)" in str(
        result.error
    )
    assert "pulumi config set --secret --path gke-gpu:cluster.kubeconfig" in str(result.error)
    assert result.resources == []


def test_a_kubeconfig_with_a_credential_in_an_exec_plugins_env_is_refused() -> None:
    from tools.offline import run_program

    document = yaml.safe_load(KUBECONFIG)
    document["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "vault-kube",
            "env": [{"name": "VAULT_TOKEN", "value": "hvs.not-a-real-token"}],
        }
    }
    cluster = {**GENERIC, "kubeconfig": yaml.safe_dump(document)}
    result = run_program(stack_config(project=None, region=None, cluster=cluster, gpuNodes=["gpu-1"]))
    assert result.error is not None
    assert (
        "gke-gpu:cluster.kubeconfig: holds a credential in plain text (users[0].user.exec.env[0].value)"
        in str(result.error)
    )
    assert "hvs.not-a-real-token" not in str(result.error)
    assert result.resources == []


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        ({"token": "t"}, ["users[0].user.token"]),
        ({"client-certificate-data": "c", "client-key-data": "k"}, ["users[0].user.client-key-data"]),
        ({"username": "u", "password": "p"}, ["users[0].user.password"]),
        (
            {"auth-provider": {"name": "oidc", "config": {"client-id": "i", "refresh-token": "r"}}},
            ["users[0].user.auth-provider.config.refresh-token"],
        ),
        ({"exec": {"command": "gke-gcloud-auth-plugin"}}, []),
        ({"tokenFile": "/var/run/token", "client-key": "/etc/key.pem"}, []),
        ({"token": ""}, []),
        # Keys as client-go writes them, and differently cased (still a secret in plain text).
        ({"Token": "t", "PASSWORD": "p"}, ["users[0].user.token", "users[0].user.password"]),
        (
            {"auth-provider": {"config": {"Access-Token": "a"}}},
            ["users[0].user.auth-provider.config.access-token"],
        ),
        # An exec plugin's environment: by the variable's name, or a token's shape whatever the name.
        (
            {"exec": {"command": "cred", "env": [{"name": "VAULT_TOKEN", "value": "s.abc"}]}},
            ["users[0].user.exec.env[0].value"],
        ),
        (
            {"exec": {"command": "cred", "env": [{"name": "X", "value": "ya29.a0AfB"}]}},
            ["users[0].user.exec.env[0].value"],
        ),
        # Every shape the program hides in its messages (core/credentials.py), whatever the name.
        (
            {"exec": {"command": "cred", "env": [{"name": "X", "value": "hf_" + "a1B2c3D4e5" * 4}]}},
            ["users[0].user.exec.env[0].value"],
        ),
        (
            {"exec": {"command": "cred", "args": ["--login", "ghp_" + "Z9y8X7w6V5" * 4]}},
            ["users[0].user.exec.args[1]"],
        ),
        (
            {
                "exec": {
                    "command": "gke-gcloud-auth-plugin",
                    "env": [{"name": "USE_GKE_GCLOUD_AUTH_PLUGIN", "value": "True"}],
                }
            },
            [],
        ),
        # ... and its arguments: a secret flag's value (joined or the next argument), or a token.
        (
            {
                "exec": {
                    "command": "cred",
                    "args": ["get", "--token=abc", "--client-secret", "s", "--verbose"],
                }
            },
            ["users[0].user.exec.args[1]", "users[0].user.exec.args[2]"],
        ),
        ({"exec": {"command": "cred", "args": ["eyJhbGciOiJSUzI1NiJ9.e.s"]}}, ["users[0].user.exec.args[0]"]),
        (
            {"exec": {"command": "cred", "args": ["--token-file", "/run/t", "--region", "us"]}},
            [],  # a file holding a token is a path, not the token
        ),
    ],
)
def test_which_kubeconfig_fields_are_credentials(user: dict, expected: list[str]) -> None:
    from gke_gpu.cluster.kubeconfig import kubeconfig_credentials

    assert kubeconfig_credentials({"users": [{"name": "u", "user": user}]}) == expected


def test_a_gke_auth_plugin_kubeconfig_needs_no_secret() -> None:
    """GKE's own kubeconfig (the exec plugin, no credential inside) may be plain text."""
    from gke_gpu.stack.config import settings_from_config

    kubeconfig = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "me"}}],
            "users": [{"name": "me", "user": {"exec": {"command": "gke-gcloud-auth-plugin"}}}],
        }
    )
    cluster = {"mode": "existing", "flavor": "generic", "kubeconfig": kubeconfig, "context": "lab"}
    config = {"gke-gpu:cluster": json.dumps(cluster)}
    settings, _ = settings_from_config(config, stack="test", secret_keys=frozenset())
    assert settings.cluster.context == "lab"


def _plain_text_problems(kubeconfig: str, secret_keys: frozenset[str] = frozenset()) -> list[str]:
    from gke_gpu.stack.config import ConfigError, settings_from_config

    cluster = {"mode": "existing", "flavor": "generic", "kubeconfig": kubeconfig}
    try:
        settings_from_config({"gke-gpu:cluster": json.dumps(cluster)}, stack="test", secret_keys=secret_keys)
    except ConfigError as exc:
        return [p for p in exc.problems if p.startswith("gke-gpu:cluster.kubeconfig")]
    return []


@pytest.mark.parametrize(
    ("kubeconfig", "expected"),
    [
        # A token in a second YAML document: the first document alone does not clear it.
        (
            KUBECONFIG.replace("token: not-a-real-token", "token: ''") + "---\n" + KUBECONFIG,
            "users[0].user.token",
        ),
        ("apiVersion: v1\nusers: [unclosed", "is in plain text and not YAML, so it could not be checked"),
        (KUBECONFIG + "#" * (256 * 1024), "is in plain text and over 256 KiB, so it could not be checked"),
    ],
    ids=["second-document", "not-yaml", "too-large"],
)
def test_a_plain_text_kubeconfig_that_cannot_be_cleared_is_refused(kubeconfig: str, expected: str) -> None:
    problems = _plain_text_problems(kubeconfig)
    assert len(problems) == 1 and expected in problems[0], problems
    assert "pulumi config set --secret --path gke-gpu:cluster.kubeconfig" in problems[0]
    assert _plain_text_problems(kubeconfig, frozenset({"gke-gpu:cluster"})) == []
