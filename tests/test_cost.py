"""The cost estimate: figures computed by hand from components/data/prices.yaml, n/a and errors."""

from __future__ import annotations

import re

import pytest

from gke_gpu.core.catalog import load_catalog
from tests.conftest import STANDARD_CLUSTER, render, stack_config, stack_render
from tools.cost import HOURS_PER_MONTH, NA, estimate, load_prices
from tools.plan import to_document
from tools.sample_cost import format_samples, sample_runs

# Figures from components/data/prices.yaml, us-central1 (read by eye, not by code).
G2_STANDARD_8 = (0.85362, 0.43623)  # (on-demand, Spot) whole VM with its L4
N1_STANDARD_16 = (0.76, 0.2553)  # VM only
T4 = (0.35, 0.1915)  # per attached GPU
A3_HIGHGPU_8G_SPOT = 47.86592  # its on-demand is null (suspect in the source)


def pool(name="p", **fields):
    base = {
        "name": name,
        "kind": "node-pool",
        "accelerator": "nvidia-l4",
        "gpusPerNode": 1,
        "machineType": "g2-standard-8",
        "spot": False,
        "minNodes": 0,
        "maxNodes": 4,
    }
    base.update(fields)
    return base


def document(*pools, region="us-central1", mode="standard", location=None, resources=()):
    outputs = {"clusterMode": mode, "location": location or region, "gpuPools": list(pools)}
    if region is not None:
        outputs["region"] = region
    return {"format": "gke-gpu-render/v1", "stack": "test", "resources": list(resources), "outputs": outputs}


def month(hourly):
    return round(hourly * HOURS_PER_MONTH, 2)


def test_l4_pool_by_hand() -> None:
    cost = estimate(document(pool("l4", minNodes=1, maxNodes=4)))
    assert cost["error"] is None
    (p,) = cost["pools"]
    od, spot = G2_STANDARD_8
    assert (p["machineType"], p["gpusPerNode"], p["gpusAtMin"], p["gpusAtMax"]) == ("g2-standard-8", 1, 1, 4)
    assert p["nodeHourly"] == {"onDemand": od, "spot": spot}
    assert p["hourly"]["atMin"]["onDemand"] == pytest.approx(0.85362)
    assert p["hourly"]["atMax"]["onDemand"] == pytest.approx(3.41448)  # 4 x 0.85362
    assert p["hourly"]["atMax"]["spot"] == pytest.approx(1.74492)  # 4 x 0.43623
    assert p["monthly"]["atMax"]["onDemand"] == pytest.approx(2492.57)  # 3.41448 x 730
    assert p["monthly"]["atMax"]["spot"] == pytest.approx(1273.79)
    assert p["expected"] == "onDemand"
    assert p["hourly"]["atMax"]["expected"] == p["hourly"]["atMax"]["onDemand"]


def test_n1_with_t4_adds_the_vm_and_each_gpu() -> None:
    t4 = pool(
        "t4",
        accelerator="nvidia-tesla-t4",
        gpusPerNode=2,
        machineType="n1-standard-16",
        spot=True,
        minNodes=1,
        maxNodes=3,
    )
    (p,) = estimate(document(t4))["pools"]
    node_od = N1_STANDARD_16[0] + 2 * T4[0]  # 1.46
    node_spot = N1_STANDARD_16[1] + 2 * T4[1]  # 0.6383
    assert p["nodeHourly"]["onDemand"] == pytest.approx(1.46)
    assert p["nodeHourly"]["spot"] == pytest.approx(0.6383)
    assert p["hourly"]["atMin"]["onDemand"] == pytest.approx(node_od)
    assert p["hourly"]["atMax"]["onDemand"] == pytest.approx(3 * node_od)
    assert p["hourly"]["atMax"]["spot"] == pytest.approx(3 * node_spot)
    assert p["monthly"]["atMax"]["spot"] == pytest.approx(month(3 * node_spot))  # 1397.88
    assert (p["gpusAtMin"], p["gpusAtMax"]) == (2, 6)


def test_spot_pool_expects_spot_and_on_demand_pool_expects_on_demand() -> None:
    cost = estimate(document(pool("od", spot=False), pool("sp", spot=True)))
    od, sp = cost["pools"]
    assert (od["expected"], sp["expected"]) == ("onDemand", "spot")
    for p in (od, sp):  # both columns are always there
        assert p["hourly"]["atMax"]["spot"] < p["hourly"]["atMax"]["onDemand"]
    assert sp["hourly"]["atMax"]["expected"] == pytest.approx(4 * G2_STANDARD_8[1])
    assert od["hourly"]["atMax"]["expected"] == pytest.approx(4 * G2_STANDARD_8[0])
    totals = cost["totals"]["gpuHourly"]["atMax"]
    assert totals["expected"] == pytest.approx(4 * G2_STANDARD_8[0] + 4 * G2_STANDARD_8[1])
    assert totals["onDemand"] == pytest.approx(8 * G2_STANDARD_8[0])
    assert totals["spot"] == pytest.approx(8 * G2_STANDARD_8[1])


def test_min_zero_costs_nothing_even_where_the_price_is_unknown() -> None:
    a3 = pool("h100", accelerator="nvidia-h100-80gb", gpusPerNode=8, machineType="a3-highgpu-8g")
    cost = estimate(document(pool("l4"), a3))
    for p in cost["pools"]:
        assert p["gpusAtMin"] == 0
        assert p["hourly"]["atMin"] == {"onDemand": 0.0, "spot": 0.0, "expected": 0.0}
        assert p["monthly"]["atMin"] == {"onDemand": 0.0, "spot": 0.0, "expected": 0.0}
    assert cost["totals"]["gpuHourly"]["atMin"]["expected"] == 0.0


def test_null_price_is_na_with_the_reason() -> None:
    a3 = pool("h100", accelerator="nvidia-h100-80gb", gpusPerNode=8, machineType="a3-highgpu-8g", maxNodes=2)
    cost = estimate(document(a3))
    (p,) = cost["pools"]
    assert p["nodeHourly"]["onDemand"] == NA
    assert p["hourly"]["atMax"]["onDemand"] == NA
    assert p["monthly"]["atMax"]["onDemand"] == NA
    assert p["hourly"]["atMax"]["expected"] == NA  # an on-demand pool
    assert p["reasons"]["onDemand"].startswith("on-demand price unknown for a3-highgpu-8g in us-central1")
    assert p["hourly"]["atMax"]["spot"] == pytest.approx(2 * A3_HIGHGPU_8G_SPOT)
    assert cost["totals"]["hourly"]["atMax"]["onDemand"] == NA
    assert cost["totals"]["hourly"]["atMax"]["spot"] == pytest.approx(2 * A3_HIGHGPU_8G_SPOT + 0.10)
    text = "\n".join(cost["table"])
    assert "n/a" in text and "on-demand price unknown for a3-highgpu-8g in us-central1" in text


def test_machine_or_gpu_missing_from_the_table_is_na() -> None:
    g4 = pool("g4", accelerator="nvidia-rtx-pro-6000", machineType="g4-standard-48", minNodes=1)
    v100 = pool("v100", accelerator="nvidia-tesla-v100", machineType="n1-standard-8", minNodes=1)
    cost = estimate(document(g4, v100, region="us-east4"))
    g4_est, v100_est = cost["pools"]
    assert g4_est["hourly"]["atMin"] == {"onDemand": NA, "spot": NA, "expected": NA}
    assert g4_est["reasons"]["spot"] == "no price for g4-standard-48 in us-east4: not in the price table"
    # n1-standard-8 has a price in us-east4, the V100 does not: no half-priced node.
    assert v100_est["hourly"]["atMin"]["onDemand"] == NA
    assert "gpu/nvidia-tesla-v100 in us-east4" in v100_est["reasons"]["onDemand"]
    assert cost["totals"]["hourly"]["atMin"]["expected"] == NA


def test_unknown_region_is_an_error_without_figures() -> None:
    cost = estimate(document(pool("l4", minNodes=1), region="mars-north1"))
    assert "mars-north1" in cost["error"]
    assert "us-central1" in cost["error"] and "europe-west4" in cost["error"]
    assert cost["regions"] == sorted(load_prices().regions)
    assert cost["pools"] == [] and cost["totals"] is None and cost["managementFee"] is None
    text = "\n".join(cost["table"])
    assert "mars-north1" in text
    assert not re.search(r"\d\.\d", text)  # no price anywhere


def test_no_region_is_an_error() -> None:
    doc = document(pool(), region=None)
    doc["outputs"].pop("location")
    cost = estimate(doc)
    assert "no region" in cost["error"] and cost["totals"] is None


def test_region_from_a_zonal_location_when_outputs_have_no_region() -> None:
    doc = document(pool(minNodes=1), region=None, location="us-central1-b")
    cost = estimate(doc)
    assert cost["region"] == "us-central1"
    assert cost["pools"][0]["hourly"]["atMin"]["onDemand"] == pytest.approx(G2_STANDARD_8[0])


def test_management_fee() -> None:
    regional = estimate(document(pool()))["managementFee"]
    assert regional["hourly"] == pytest.approx(0.10)
    assert regional["monthly"] == pytest.approx(73.00)
    assert regional["freeTierCreditPerMonth"] == pytest.approx(74.40)
    assert regional["freeTierEligible"] is False
    zonal = estimate(document(pool(), location="us-central1-a"))["managementFee"]
    assert zonal["clusterType"] == "zonal Standard" and zonal["freeTierEligible"] is True
    autopilot = estimate(document(mode="autopilot"))["managementFee"]
    assert autopilot["clusterType"] == "Autopilot" and autopilot["freeTierEligible"] is True
    # The totals add the fee to the GPU figures.
    totals = estimate(document(pool(minNodes=1)))["totals"]
    assert totals["hourly"]["atMin"]["expected"] == pytest.approx(G2_STANDARD_8[0] + 0.10)
    assert totals["monthly"]["atMin"]["expected"] == pytest.approx(month(G2_STANDARD_8[0] + 0.10))


def test_autopilot_profile_is_free_while_idle_and_priced_per_pod() -> None:
    profile = {
        "name": "l4",
        "kind": "autopilot-profile",
        "accelerator": "nvidia-l4",
        "gpusPerNode": 1,
        "spot": True,
        "onDemandFallback": True,
    }
    cost = estimate(document(profile, mode="autopilot"))
    (p,) = cost["pools"]
    assert p["machineType"] == load_catalog().accelerator("nvidia-l4").default_machine_types[1]
    assert p["expected"] == "spot"
    assert (p["gpusAtMin"], p["gpusAtMax"]) == (0, NA)
    assert p["hourly"]["atMin"] == {"onDemand": 0.0, "spot": 0.0, "expected": 0.0}
    assert p["hourly"]["atMax"]["spot"] == NA and "no upper bound" in p["reasons"]["atMax"]
    assert p["perPodHourAtLeast"] == {"onDemand": G2_STANDARD_8[0], "spot": G2_STANDARD_8[1]}
    assert any("Autopilot premium" in note for note in p["notes"])


def test_price_file_header_and_shape() -> None:
    table = load_prices()
    assert table.source.startswith("skypilot-org/skypilot-catalog@2c3d7ea7")
    assert table.captured == "2026-06-03" and table.captured_is_lower_bound
    assert table.currency == "USD"
    # Every region where the catalog has GPUs has prices.
    assert set(load_catalog().regions) <= set(table.regions)
    for region, entries in table.regions.items():
        for key, price in entries.items():
            assert set(price.flags) <= set(table.flags), (region, key)
            if price.on_demand is None:
                assert "onDemandSuspect" in price.flags, (region, key)
            if price.on_demand is not None and price.spot is not None:
                assert 0 < price.spot < price.on_demand, (region, key)


@pytest.fixture(scope="module")
def stack_costs():
    costs = {}
    for stack in ("dev", "prod"):
        result = stack_render(stack)
        assert result.error is None, result.error
        doc = to_document(result)
        costs[stack] = (doc, estimate(doc))
    return costs


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_estimates_have_no_errors(stack_costs, stack) -> None:
    doc, cost = stack_costs[stack]
    assert cost["error"] is None
    assert [p["name"] for p in cost["pools"]] == [p["name"] for p in doc["outputs"]["gpuPools"]]
    assert all(isinstance(line, str) for line in cost["table"]) and len(cost["table"]) > 5
    assert cost["source"] and cost["captured"]


def test_dev_costs_nothing_in_gpus_while_idle(stack_costs) -> None:
    _, cost = stack_costs["dev"]
    assert cost["totals"]["gpusAtMin"] == 0
    assert cost["totals"]["gpuHourly"]["atMin"]["expected"] == 0.0
    assert cost["totals"]["gpuMonthly"]["atMin"]["expected"] == 0.0
    assert cost["totals"]["gpuHourly"]["atMin"]["onDemand"] == 0.0
    (p,) = cost["pools"]
    assert p["kind"] == "autopilot-profile" and p["expected"] == "spot"
    assert p["perPodHourAtLeast"]["spot"] == pytest.approx(G2_STANDARD_8[1])


def test_prod_by_hand(stack_costs) -> None:
    _, cost = stack_costs["prod"]
    l4, a100 = cost["pools"]
    assert l4["hourly"]["atMax"]["expected"] == pytest.approx(4 * 0.85362)  # 4 x g2-standard-8
    assert a100["hourly"]["atMax"]["expected"] == pytest.approx(2 * 3.67339)  # 2 x a2-highgpu-1g
    assert cost["totals"]["gpuHourly"]["atMin"]["expected"] == 0.0  # both pools scale to zero
    assert cost["totals"]["hourly"]["atMax"]["expected"] == pytest.approx(4 * 0.85362 + 2 * 3.67339 + 0.10)
    assert cost["managementFee"]["freeTierEligible"] is False  # regional Standard
    assert any("gke-system" in note for note in cost["notes"])  # the e2 system pool is not priced


def test_a_real_n1_render() -> None:
    t4 = {
        "name": "t4",
        "accelerator": "nvidia-tesla-t4",
        "gpusPerNode": 2,
        "machineType": "n1-standard-16",
        "spot": True,
        "minNodes": 1,
        "maxNodes": 3,
        "zones": ["us-central1-a"],
    }
    doc = to_document(render(stack_config(cluster=STANDARD_CLUSTER, gpuPools=[t4])))
    (p,) = estimate(doc)["pools"]
    assert p["machineType"] == "n1-standard-16" and p["expected"] == "spot"
    assert p["hourly"]["atMax"]["spot"] == pytest.approx(3 * (N1_STANDARD_16[1] + 2 * T4[1]))
    assert p["hourly"]["atMin"]["spot"] == pytest.approx(N1_STANDARD_16[1] + 2 * T4[1])


# -- sample workloads: the pool each one scales up and the most one run costs --------------------------


def job(name, *, selector, gpus=1, deadline=3600, parallelism=None, kind="Job", replicas=None):
    spec = {
        "template": {
            "spec": {
                "nodeSelector": selector,
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
            }
        }
    }
    if kind == "Job":
        if deadline is not None:
            spec["activeDeadlineSeconds"] = deadline
        if parallelism is not None:
            spec["parallelism"] = parallelism
        token = "kubernetes:batch/v1:Job"
    else:
        spec["replicas"] = replicas
        token = "kubernetes:apps/v1:Deployment"
    return {
        "type": token,
        "name": f"samples-{name}",
        "component": False,
        "inputs": {"kind": kind, "metadata": {"name": name, "namespace": "gpu-samples"}, "spec": spec},
    }


L4_SELECTOR = {"cloud.google.com/gke-nodepool": "l4", "cloud.google.com/gke-accelerator": "nvidia-l4"}


def with_samples(doc, *objects):
    doc["resources"] = [*doc["resources"], *objects]
    doc["outputs"]["sampleWorkloads"] = {o["inputs"]["metadata"]["name"]: {} for o in objects}
    return doc


def l4_pool(**fields):
    return pool("l4", nodeSelector=L4_SELECTOR, schedulableGpusPerNode=1, **fields)


def runs(doc):
    return {s["name"]: s for s in sample_runs(doc)}


def test_a_job_costs_at_most_its_nodes_for_its_deadline() -> None:
    doc = with_samples(document(l4_pool()), job("smi", selector=L4_SELECTOR, deadline=3600))
    s = runs(doc)["smi"]
    assert (s["pool"], s["machineType"], s["gpusPerNode"], s["pricing"], s["nodes"]) == (
        "l4",
        "g2-standard-8",
        1,
        "onDemand",
        1,
    )
    assert s["maxPerRun"] == pytest.approx(G2_STANDARD_8[0])  # 1 node x 1 h
    spot = with_samples(document(l4_pool(spot=True)), job("smi", selector=L4_SELECTOR, deadline=1800))
    s = runs(spot)["smi"]
    assert s["pricing"] == "spot"
    assert s["maxPerRun"] == pytest.approx(G2_STANDARD_8[1] / 2, abs=1e-4)  # Spot price x 30 min


def test_parallel_pods_scale_up_more_nodes_up_to_the_pools_maximum() -> None:
    doc = with_samples(
        document(l4_pool(maxNodes=4)),
        job("three", selector=L4_SELECTOR, parallelism=3, deadline=7200),
        job("six", selector=L4_SELECTOR, parallelism=6, deadline=3600),
    )
    three, six = runs(doc)["three"], runs(doc)["six"]
    assert three["nodes"] == 3
    assert three["maxPerRun"] == pytest.approx(3 * G2_STANDARD_8[0] * 2)
    assert six["nodes"] == 4
    assert six["maxPerRun"] == pytest.approx(4 * G2_STANDARD_8[0])
    assert any("maxNodes is 4: some Pods wait" in n for n in six["notes"])


def test_no_upper_bound_is_na_with_the_reason() -> None:
    doc = with_samples(
        document(l4_pool()),
        job("forever", selector=L4_SELECTOR, deadline=None),
        job("demo", selector=L4_SELECTOR, kind="Deployment", replicas=2),
        job("nowhere", selector={"cloud.google.com/gke-nodepool": "other"}),
    )
    doc["outputs"]["sampleWorkloads"]["missing"] = {}
    r = runs(doc)
    assert r["forever"]["maxPerRun"] == NA
    assert r["forever"]["reason"] == "the Job has no activeDeadlineSeconds, so no upper bound"
    assert r["demo"]["maxPerRun"] == NA and r["demo"]["nodes"] == 2
    assert r["demo"]["reason"] == (
        f"a Deployment runs until it is deleted: ${2 * G2_STANDARD_8[0]:,.2f} per hour while it runs"
    )
    assert r["nowhere"]["pool"] is None
    assert r["nowhere"]["reason"] == "its nodeSelector matches no GPU pool of the stack"
    assert r["missing"]["reason"] == "no Job, JobSet or Deployment named missing in the render"


def test_autopilot_and_a_missing_price_give_no_upper_bound() -> None:
    selector = {"cloud.google.com/compute-class": "gpu-l4"}
    profile = {
        "name": "l4",
        "kind": "autopilot-profile",
        "accelerator": "nvidia-l4",
        "gpusPerNode": 1,
        "spot": True,
        "onDemandFallback": True,
        "nodeSelector": selector,
    }
    a3_selector = {"cloud.google.com/gke-nodepool": "h100"}
    a3 = pool(
        "h100",
        accelerator="nvidia-h100-80gb",
        gpusPerNode=8,
        machineType="a3-highgpu-8g",
        nodeSelector=a3_selector,
    )
    doc = with_samples(
        document(profile, a3, mode="autopilot"),
        job("ap", selector=selector),
        job("h100", selector=a3_selector, gpus=8),
    )
    r = runs(doc)
    assert r["ap"]["pricing"] == "onDemand", "Spot with fallback: on-demand is the most it pays"
    assert r["ap"]["maxPerRun"] == NA
    assert r["ap"]["atLeastPerRun"] == pytest.approx(G2_STANDARD_8[0])
    assert "Autopilot adds a GPU premium the price table does not have" in r["ap"]["reason"]
    assert r["h100"]["maxPerRun"] == NA
    assert r["h100"]["reason"].startswith("on-demand price unknown for a3-highgpu-8g in us-central1")


def test_samples_on_an_existing_cluster_are_not_priced() -> None:
    doc = with_samples(document(mode="existing"), job("smi", selector={"nvidia.com/gpu.present": "true"}))
    (s,) = sample_runs(doc)
    assert s["maxPerRun"] == NA
    assert "GPU nodes of an existing cluster" in s["reason"]


def test_sample_lines_name_pool_machine_pricing_and_the_most_per_run() -> None:
    doc = with_samples(
        document(l4_pool(spot=True)),
        job("smi", selector=L4_SELECTOR, deadline=5400),
        job("demo", selector=L4_SELECTOR, kind="Deployment", replicas=1),
    )
    lines = format_samples(sample_runs(doc))
    text = " ".join(line.strip() for line in lines)
    spot = G2_STANDARD_8[1]
    assert lines[0].startswith("Sample workloads: the GPU pool each one scales up")
    assert (
        f"smi (Job): pool l4, g2-standard-8 with 1 x nvidia-l4, Spot: 1 node(s) at ${spot:,.2f}/h; "
        f"at most ${spot * 1.5:,.2f} per run (deadline 90 min)"
    ) in text
    assert "demo (Deployment, 1 replicas): pool l4, g2-standard-8 with 1 x nvidia-l4, Spot" in text
    assert "per run n/a: a Deployment runs until it is deleted" in text
    assert format_samples([]) == []


def jobset(name, *, selector, gpus=8, nodes=2, deadline=3600, replicas=1, failure_policy=None, **spec):
    job_spec = {
        "parallelism": nodes,
        "completions": nodes,
        "template": {
            "spec": {
                "nodeSelector": selector,
                "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
            }
        },
    }
    if deadline is not None:
        job_spec["activeDeadlineSeconds"] = deadline
    spec = {
        "replicatedJobs": [{"name": "node", "replicas": replicas, "template": {"spec": job_spec}}],
        **spec,
    }
    if failure_policy is not None:
        spec["failurePolicy"] = failure_policy
    return {
        "type": "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet",
        "name": f"{name}-jobset",
        "component": False,
        "inputs": {"kind": "JobSet", "metadata": {"name": name, "namespace": f"gpu-{name}"}, "spec": spec},
    }


def with_allreduce(doc, sample, obj):
    """A sample named unlike its JobSet, found through its commands (as the all-reduce tests are)."""
    name = obj["inputs"]["metadata"]["name"]
    doc["resources"] = [*doc["resources"], obj]
    selector = f"-l jobset.sigs.k8s.io/jobset-name={name},batch.kubernetes.io/job-completion-index=0"
    doc["outputs"]["sampleWorkloads"] = {
        sample: {
            "logs": f"kubectl logs -n gpu-{name} {selector} -c main",
            "wait": f"kubectl wait jobset/{name}",
        }
    }
    return doc


H100_SELECTOR = {"cloud.google.com/gke-nodepool": "h100"}


def h100_pool(**fields):
    return pool(
        "h100",
        accelerator="nvidia-h100-80gb",
        gpusPerNode=8,
        machineType="a3-highgpu-8g",
        spot=True,
        nodeSelector=H100_SELECTOR,
        **fields,
    )


def test_a_jobset_costs_its_replicated_jobs_nodes_for_their_deadline() -> None:
    doc = with_allreduce(
        document(h100_pool()),
        "nccl-allreduce-h100",
        jobset("nccl-h100", selector=H100_SELECTOR, deadline=7200),
    )
    s = runs(doc)["nccl-allreduce-h100"]
    assert (s["kind"], s["pool"], s["pods"], s["gpusPerPod"], s["nodes"], s["pricing"]) == (
        "JobSet",
        "h100",
        2,
        8,
        2,
        "spot",
    )
    assert s["deadlineSeconds"] == 7200
    assert s["maxPerRun"] == pytest.approx(2 * A3_HIGHGPU_8G_SPOT * 2)  # 2 nodes x 2 h
    lines = " ".join(line.strip() for line in format_samples([s]))
    assert "nccl-allreduce-h100 (JobSet): pool h100, a3-highgpu-8g with 8 x nvidia-h100-80gb, Spot" in lines
    assert f"at most ${4 * A3_HIGHGPU_8G_SPOT:,.2f} per run (deadline 2 h)" in lines


def test_a_jobsets_restarts_and_order_lengthen_its_run_and_unbounded_ones_have_no_figure() -> None:
    def sample(obj, *pools):
        doc = with_allreduce(document(*(pools or (h100_pool(maxNodes=8),))), "test", obj)
        return runs(doc)["test"]

    restarts = sample(jobset("a", selector=H100_SELECTOR, failure_policy={"maxRestarts": 2}))
    assert restarts["deadlineSeconds"] == 3 * 3600
    assert restarts["maxPerRun"] == pytest.approx(2 * A3_HIGHGPU_8G_SPOT * 3)
    assert any("2 restart(s)" in note for note in restarts["notes"])
    two = jobset("b", selector=H100_SELECTOR, replicas=2, startupPolicy={"startupPolicyOrder": "InOrder"})
    two["inputs"]["spec"]["replicatedJobs"].append(
        {
            "name": "leader",
            "replicas": 1,
            "template": {
                "spec": {
                    **jobset("x", selector=H100_SELECTOR, nodes=1, deadline=600)["inputs"]["spec"][
                        "replicatedJobs"
                    ][0]["template"]["spec"]
                }
            },
        }
    )
    in_order = sample(two)
    assert (in_order["pods"], in_order["nodes"], in_order["deadlineSeconds"]) == (5, 5, 3600 + 600)
    any_order = sample(jobset("c", selector=H100_SELECTOR, replicas=3))
    assert (any_order["pods"], any_order["deadlineSeconds"]) == (6, 3600)
    ignore = sample(
        jobset(
            "d",
            selector=H100_SELECTOR,
            failure_policy={"maxRestarts": 1, "rules": [{"action": "RestartJobSetAndIgnoreMaxRestarts"}]},
        )
    )
    assert ignore["maxPerRun"] == NA
    assert ignore["reason"] == (
        "the JobSet's failure policy may restart it beyond maxRestarts (RestartJobSetAndIgnoreMaxRestarts)"
    )
    forever = sample(jobset("e", selector=H100_SELECTOR, deadline=None))
    assert forever["maxPerRun"] == NA and forever["nodes"] == 2
    assert forever["reason"] == "a Job of the JobSet has no activeDeadlineSeconds, so no upper bound"
    split = jobset("f", selector=H100_SELECTOR)
    split["inputs"]["spec"]["replicatedJobs"].append(
        jobset("g", selector=L4_SELECTOR)["inputs"]["spec"]["replicatedJobs"][0]
    )
    mixed = sample(split, h100_pool(), l4_pool())
    assert mixed["maxPerRun"] == NA and mixed["reason"] == "its replicated Jobs select different pools"


def test_a_sample_on_dynamic_workload_scheduler_capacity_has_no_on_demand_figure() -> None:
    # As the pool's own estimate: flex-start and queued nodes bill at DWS prices, not in the table.
    for capacity in ({"flexStart": True}, {"queuedProvisioning": True}):
        doc = with_samples(document(l4_pool(**capacity)), job("smi", selector=L4_SELECTOR, deadline=3600))
        (s,) = sample_runs(doc)
        assert s["maxPerRun"] == NA and s["nodes"] == 1, capacity
        assert s["reason"] == estimate(doc)["pools"][0]["reasons"]["onDemand"]
        assert "Dynamic Workload Scheduler prices" in s["reason"]
        # Named as what it is, not as on-demand capacity.
        table = "\n".join(format_samples(sample_runs(doc)))
        assert "Dynamic Workload Scheduler (" in table and "on-demand:" not in table, table


def test_the_example_stacks_all_reduces_are_found_on_their_pools() -> None:
    for stack, test, pool_name in (
        ("train", "nccl-allreduce-train", "train"),
        ("nvl72", "nccl-allreduce-rack", "rack"),
    ):
        document_ = to_document(stack_render(stack))
        (s,) = [s for s in document_["cost"]["samples"] if s["name"] == test]
        assert (s["kind"], s["pool"]) == ("JobSet", pool_name), s
        assert s["nodes"] >= 2 and s["gpusPerPod"] > 0 and isinstance(s["deadlineSeconds"], int), s
        assert "not found" not in "\n".join(document_["cost"]["table"])


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_declared_sample_of_a_stack_has_a_pool_and_a_figure_or_reason(stack) -> None:
    document_ = to_document(stack_render(stack))
    samples = document_["cost"]["samples"]
    assert [s["name"] for s in samples] == sorted(document_["outputs"]["sampleWorkloads"])
    for s in samples:
        assert s["pool"] in {p["name"] for p in document_["outputs"]["gpuPools"]}, s
        assert isinstance(s["maxPerRun"], float) or s["reason"], s
    table = "\n".join(document_["cost"]["table"])
    assert "Sample workloads:" in table
