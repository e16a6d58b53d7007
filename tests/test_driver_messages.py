"""What a refusal about a pool's GPU driver tells the user to do is something the rules accept: a
`draGpus` pool keeps `INSTALLATION_DISABLED` (the stack installs its driver), so GKE's managed DCGM
is what must change; in a fleet the keys it names are the worker's own."""

from typing import Any

from tests.conftest import DRA_L4_POOL, config_error
from tests.test_fleet import errors, fleet_raw

CLUSTER = {"mode": "standard", "location": "us-central1-a", "minimumVersion": "1.34"}


def _problem(message: str, key: str) -> str:
    (line,) = [line for line in message.splitlines() if line.strip().startswith(f"- {key}:")]
    return line


def test_a_dra_pool_under_managed_dcgm_is_told_to_change_dcgm_not_the_driver() -> None:
    line = _problem(
        config_error({"cluster": CLUSTER, "gpuPools": [DRA_L4_POOL]}), "gke-gpu:gpuPools[0].driverVersion"
    )
    assert "with gke-gpu:monitoring.dcgm managed (the default)" in line
    assert "set gke-gpu:monitoring.dcgm: none (or exporter)" in line
    assert "DEFAULT" not in line and "LATEST" not in line
    # What it says is accepted: the same pool with dcgm none is valid.
    from gke_gpu.stack.config import parse_settings

    parse_settings(
        {"cluster": CLUSTER, "gpuPools": [DRA_L4_POOL], "monitoring": {"dcgm": "none"}},
        project="test-project",
        region="us-central1",
        stack="test",
    )


def test_a_pool_without_dra_may_still_take_a_gke_installed_driver() -> None:
    pool = {k: v for k, v in DRA_L4_POOL.items() if k != "draGpus"}
    line = _problem(
        config_error({"cluster": CLUSTER, "gpuPools": [pool], "monitoring": {"dcgm": "managed"}}),
        "gke-gpu:gpuPools[0].driverVersion",
    )
    assert "with gke-gpu:monitoring.dcgm managed:" in line
    assert "use DEFAULT or LATEST, or gke-gpu:monitoring.dcgm: exporter or none" in line


def test_a_dra_pool_with_a_gke_driver_is_told_the_stack_installs_it() -> None:
    line = _problem(
        config_error(
            {
                "cluster": CLUSTER,
                "gpuPools": [{**DRA_L4_POOL, "driverVersion": "LATEST"}],
                "monitoring": {"dcgm": "none"},
            }
        ),
        "gke-gpu:gpuPools[0].driverVersion",
    )
    assert "set 'INSTALLATION_DISABLED': the stack then installs it with Google's driver installer" in line
    assert "install the driver with GKE's driver installer DaemonSet" not in line


def test_in_a_fleet_the_dcgm_key_is_the_workers() -> None:
    raw: dict[str, Any] = fleet_raw()
    central = raw["fleet"]["workers"][1]
    central["cluster"]["minimumVersion"] = "1.34"
    central["gpuPools"].append(dict(DRA_L4_POOL))
    line = _problem(errors(raw), "gke-gpu:fleet.workers[1].gpuPools[1].driverVersion")
    assert "with gke-gpu:fleet.workers[1].monitoring.dcgm managed (the default)" in line
    assert "set gke-gpu:fleet.workers[1].monitoring.dcgm: none (or exporter)" in line
    assert "gke-gpu:monitoring" not in line
