"""The RxDM sidecar runs with no_new_privs (issue 27): `allowPrivilegeEscalation: false` beside the
capabilities it adds, in every flavour that has the sidecar, as the all-reduce renders it."""

import pytest

from gke_gpu.gpudirect.flavors import GpuDirectFlavor
from gke_gpu.gpudirect.pod_parts import gpudirect_pod_parts


@pytest.mark.parametrize("flavor", [GpuDirectFlavor.TCPX, GpuDirectFlavor.TCPXO])
def test_the_sidecar_cannot_escalate_and_keeps_only_its_capabilities(flavor: GpuDirectFlavor) -> None:
    parts = gpudirect_pod_parts(flavor)
    (sidecar,) = [
        c for c in [*parts.get("initContainers", []), *parts.get("containers", [])] if "daemon" in c["name"]
    ]
    context = sidecar["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["privileged"] is False
    assert "SYS_ADMIN" not in context["capabilities"]["add"]  # Kubernetes would force escalation on
