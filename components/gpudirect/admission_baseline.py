"""Pod Security `baseline` in CEL: the checks of the standard at the newest Kubernetes version GKE offers,
one `BaselineCheck` per check of the upstream implementation, for the admission policy that confines the
GPUDirect namespaces (admission_cel.py `pod_policy`: those namespaces enforce `privileged` at Pod Security,
so this copy is what holds them to `baseline`).

Source: kubernetes/pod-security-admission at tag kubernetes-1.37.0-alpha.2 (commit 648066d9bc61,
2026-07), `policy/check_*.go`, vendored under tests/upstream/pod-security-admission/ and compared check
by check in tests/test_admission_baseline.py. GKE's Rapid channel offers 1.37 (GKE release notes,
"Current versions", read 2026-12); the final 1.37 tag was not in the snapshot read (UNVERIFIED that it
keeps alpha.2's lists; 1.36.2 differs only in the two sysctls 1.37 adds). What each check refuses:

* hostNamespaces, privileged, windowsHostProcess, hostPorts: as their names say;
* capabilities_baseline: adding a capability outside the default set (`BASELINE_CAPABILITIES`), where
  `pod_policy` adds GPUDirect's exceptions;
* seccompProfile_baseline, appArmorProfile: a profile type other than RuntimeDefault or Localhost (and an
  AppArmor annotation other than empty, `runtime/default` or `localhost/*`);
* seLinuxOptions: a user, a role, or a type outside `SELINUX_TYPES`;
* procMount: other than Default, unless the Pod runs in a user namespace (`hostUsers: false`, 1.35+);
* sysctls: outside `SAFE_SYSCTLS` (1.37's list);
* hostProbesAndHostLifecycle (1.34+, KEP-4940): a probe's or lifecycle handler's `httpGet.host` or
  `tcpSocket.host` (a probe the kubelet sends to another address, such as the metadata server);
* hostPathVolumes: every hostPath volume; `pod_policy` replaces it with GPUDirect's own host path rules.

The checks visit containers, init containers and ephemeral containers (upstream's `visitContainers`);
Kubernetes types each list apart, so each expression runs over each list on its own (`typed_lists` in
admission_common.py expands `variables.containers` and `variables.contexts`).
"""

from typing import NamedTuple

from ..core.k8s import BASELINE_CAPABILITIES
from .admission_common import cel

# check_sysctls.go, sysctlsAllowedV1Dot37.
SAFE_SYSCTLS = (
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_notsent_lowat",
)
# check_seLinuxOptions.go, selinuxAllowedTypes1_31.
SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
# check_seccompProfile_baseline.go and check_appArmorProfile.go: the profile types allowed.
PROFILE_TYPES = ("RuntimeDefault", "Localhost")
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
LIFECYCLE_HANDLERS = ("postStart", "preStop")
# The check upstream has that `pod_policy` writes itself (GPUDirect's host paths).
REPLACED_CHECKS = ("hostPathVolumes",)


class BaselineCheck(NamedTuple):
    """One check of Pod Security `baseline`: upstream's check ID, and the CEL that admits what it
    admits."""

    id: str
    expression: str
    message: str


def _set_host(handler: str) -> str:
    """CEL: handler `handler` (a probe or lifecycle handler of container `c`) sets an httpGet or
    tcpSocket host."""
    return " || ".join(
        f"(has({handler}.{kind}) && has({handler}.{kind}.host) && {handler}.{kind}.host != '')"
        for kind in ("httpGet", "tcpSocket")
    )


def _host_probes() -> str:
    probes = [f"!(has(c.{p}) && ({_set_host(f'c.{p}')}))" for p in PROBES]
    hooks = [
        f"!(has(c.lifecycle) && has(c.lifecycle.{h}) && ({_set_host(f'c.lifecycle.{h}')}))"
        for h in LIFECYCLE_HANDLERS
    ]
    return "variables.containers.all(c, " + " && ".join([*probes, *hooks]) + ")"


def baseline_checks(capability_exceptions: str = "") -> list[BaselineCheck]:
    """The checks, `capability_exceptions` (CEL over `c` and `cap`, or '') being what may be added beyond
    the default set besides."""
    allowed_caps = f"cap in {cel(BASELINE_CAPABILITIES)}" + (
        f" || {capability_exceptions}" if capability_exceptions else ""
    )
    profiles = cel(PROFILE_TYPES)
    return [
        BaselineCheck(
            "hostNamespaces",
            "!(has(object.spec.hostNetwork) && object.spec.hostNetwork) && "
            "!(has(object.spec.hostPID) && object.spec.hostPID) && "
            "!(has(object.spec.hostIPC) && object.spec.hostIPC)",
            "host namespaces (hostNetwork, hostPID, hostIPC) are not allowed",
        ),
        BaselineCheck(
            "privileged",
            "variables.containers.all(c, !(has(c.securityContext) && has(c.securityContext.privileged) "
            "&& c.securityContext.privileged))",
            "privileged containers are not allowed",
        ),
        BaselineCheck(
            "windowsHostProcess",
            "variables.contexts.all(s, !(has(s.windowsOptions) && has(s.windowsOptions.hostProcess) "
            "&& s.windowsOptions.hostProcess))",
            "Windows HostProcess containers are not allowed",
        ),
        BaselineCheck(
            "capabilities_baseline",
            "variables.containers.all(c, !(has(c.securityContext) && has(c.securityContext.capabilities)) "
            "|| !has(c.securityContext.capabilities.add) || "
            f"c.securityContext.capabilities.add.all(cap, {allowed_caps}))",
            "capabilities beyond Pod Security baseline's are not allowed",
        ),
        BaselineCheck(
            "hostPorts",
            "variables.containers.all(c, !has(c.ports) || "
            "c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",
            "host ports are not allowed",
        ),
        BaselineCheck(
            "seccompProfile_baseline",
            f"variables.contexts.all(s, !has(s.seccompProfile) || s.seccompProfile.type in {profiles})",
            "seccomp profiles other than RuntimeDefault and Localhost are not allowed",
        ),
        BaselineCheck(
            "appArmorProfile",
            f"variables.contexts.all(s, !has(s.appArmorProfile) || s.appArmorProfile.type in {profiles}) && "
            "(!has(object.metadata.annotations) || object.metadata.annotations.all(k, "
            f"!k.startsWith({cel(APPARMOR_ANNOTATION)}) || object.metadata.annotations[k] == '' || "
            "object.metadata.annotations[k] == 'runtime/default' || "
            "object.metadata.annotations[k].startsWith('localhost/')))",
            "AppArmor profiles other than RuntimeDefault and Localhost are not allowed",
        ),
        BaselineCheck(
            "seLinuxOptions",
            "variables.contexts.all(s, !has(s.seLinuxOptions) || "
            "((!has(s.seLinuxOptions.user) || s.seLinuxOptions.user == '') && "
            "(!has(s.seLinuxOptions.role) || s.seLinuxOptions.role == '') && "
            f"(!has(s.seLinuxOptions.type) || s.seLinuxOptions.type in {cel(SELINUX_TYPES)})))",
            "SELinux user, role or a custom type are not allowed",
        ),
        BaselineCheck(
            "procMount",
            "(has(object.spec.hostUsers) && !object.spec.hostUsers) || "
            "variables.containers.all(c, !has(c.securityContext) || !has(c.securityContext.procMount) "
            "|| c.securityContext.procMount == 'Default')",
            "procMount other than Default is not allowed outside a user namespace (hostUsers: false)",
        ),
        BaselineCheck(
            "sysctls",
            "!has(object.spec.securityContext) || !has(object.spec.securityContext.sysctls) || "
            f"object.spec.securityContext.sysctls.all(s, s.name in {cel(SAFE_SYSCTLS)})",
            "only Pod Security baseline's safe sysctls are allowed",
        ),
        BaselineCheck(
            "hostProbesAndHostLifecycle",
            _host_probes(),
            "a probe or lifecycle handler may not set a host (httpGet.host, tcpSocket.host)",
        ),
    ]
