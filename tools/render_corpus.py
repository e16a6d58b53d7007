#!/usr/bin/env python3
"""A corpus of varied stack files, valid and invalid, rendered offline: the safety net for a refactor.

    .venv/bin/python tools/render_corpus.py --write build/corpus-before.json   # before the change
    .venv/bin/python tools/render_corpus.py --check build/corpus-before.json   # after: byte-identical?

The corpus is the example stacks, the benchmark's many-pool stack, a hand-picked list of variants and
seeded random mutations of the example stacks (a key deleted, set to another value of a small palette
of valid and invalid ones, or an unknown key added). Each stack file is rendered with
`tools/render.py` in this process, as a tree and as `--json`; the record is the exit code, stdout and
stderr of each. `--check` reports every stack whose record differs and exits 1 if any does. The
corpus is deterministic for a given `--seed` and `--random` count.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import random
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

try:
    import yaml

    from tools import render
    from tools.benchmark import generated_stack
except ModuleNotFoundError as exc:  # not the project's virtualenv: say how to get it, no traceback
    from tools.venv_guard import exit_without_venv

    exit_without_venv(exc, __name__, "tools/render_corpus.py")

EXAMPLES = ["dev", "prod", "onprem", "train"]

# Values a mutation may put anywhere: valid ones for some keys, invalid for most.
PALETTE: list[Any] = [
    None,
    "",
    " ",
    0,
    1,
    -1,
    2,
    8,
    100000,
    1.5,
    True,
    False,
    [],
    {},
    ["x"],
    {"bogus": 1},
    "nvidia-l4",
    "nvidia-h100-mega-80gb",
    "nvidia-tesla-a100",
    "a3-megagpu-8g",
    "g2-standard-8",
    "e2-standard-4",
    "us-central1-a",
    "europe-west4",
    "10.0.0.0/8",
    "192.168.0.0/16",
    "not a cidr",
    "standard",
    "autopilot",
    "existing",
    "STABLE",
    "TIME_SHARING",
    "MPS",
    "LATEST",
    "exporter",
    "managed",
    "1g.5gb",
    "UPPER_case name",
    "x" * 300,
    "ünïcödé",
]

# Hand-picked variants: (name, [(path, value)]) where path is a list of keys/indexes under config,
# and a value of _DELETE removes the key.
_DELETE = object()
CURATED: list[tuple[str, str, list[tuple[list[Any], Any]]]] = [
    (
        "dev",
        "dev-standard",
        [(["gke-gpu:cluster", "mode"], "standard"), (["gke-gpu:gpuPools", 0, "maxNodes"], 3)],
    ),
    ("dev", "dev-no-spot", [(["gke-gpu:gpuPools", 0, "spot"], False)]),
    ("dev", "dev-no-monitoring", [(["gke-gpu:monitoring"], {"dcgm": "none", "dashboard": False})]),
    ("dev", "dev-exporter-on-autopilot", [(["gke-gpu:monitoring", "dcgm"], "exporter")]),
    ("dev", "dev-no-workloads", [(["gke-gpu:workloads"], _DELETE)]),
    ("dev", "dev-h100", [(["gke-gpu:gpuPools", 0, "accelerator"], "nvidia-h100-80gb")]),
    ("dev", "dev-8-l4", [(["gke-gpu:gpuPools", 0, "gpusPerNode"], 8)]),
    ("dev", "dev-3-l4", [(["gke-gpu:gpuPools", 0, "gpusPerNode"], 3)]),
    ("dev", "dev-no-project", [(["gcp:project"], _DELETE)]),
    ("dev", "dev-no-region", [(["gcp:region"], _DELETE)]),
    ("dev", "dev-region-eu", [(["gcp:region"], "europe-west4")]),
    ("dev", "dev-region-unknown", [(["gcp:region"], "mars-north1")]),
    ("dev", "dev-unknown-key", [(["gke-gpu:cluster", "nmae"], "x")]),
    ("dev", "dev-unknown-section", [(["gke-gpu:clustre"], {"mode": "standard"})]),
    ("dev", "dev-pytorch", [(["gke-gpu:workloads"], ["pytorch-smoke", "nvidia-smi"])]),
    ("dev", "dev-sharing-demo", [(["gke-gpu:workloads"], ["sharing-demo"])]),
    ("dev", "dev-private-off", [(["gke-gpu:cluster", "privateNodes"], False)]),
    ("dev", "dev-public-endpoint", [(["gke-gpu:cluster", "publicEndpoint"], True)]),
    (
        "dev",
        "dev-authorized",
        [
            (["gke-gpu:cluster", "publicEndpoint"], True),
            (
                ["gke-gpu:cluster", "masterAuthorizedNetworks"],
                [{"cidrBlock": "203.0.113.0/24", "displayName": "vpn"}],
            ),
        ],
    ),
    (
        "dev",
        "dev-existing-vpc",
        [
            (
                ["gke-gpu:network"],
                {
                    "existing": {
                        "network": "v",
                        "subnetwork": "s",
                        "podsRangeName": "p",
                        "servicesRangeName": "s",
                    }
                },
            )
        ],
    ),
    (
        "dev",
        "dev-alerts",
        [
            (
                ["gke-gpu:monitoring", "alerts"],
                {"enabled": True, "notificationChannels": ["projects/p/notificationChannels/1"]},
            )
        ],
    ),
    (
        "dev",
        "dev-alerts-dup",
        [
            (
                ["gke-gpu:monitoring", "alerts"],
                {
                    "enabled": True,
                    "notificationChannels": [
                        "projects/p/notificationChannels/1",
                        "projects/p/notificationChannels/1",
                    ],
                },
            )
        ],
    ),
    ("prod", "prod-release-rapid", [(["gke-gpu:cluster", "releaseChannel"], "RAPID")]),
    ("prod", "prod-no-protect", [(["gke-gpu:cluster", "deletionProtection"], False)]),
    ("prod", "prod-mps", [(["gke-gpu:gpuPools", 1, "sharing", "strategy"], "MPS")]),
    ("prod", "prod-mig-3g", [(["gke-gpu:gpuPools", 1, "migPartitionSize"], "3g.20gb")]),
    ("prod", "prod-mig-bad", [(["gke-gpu:gpuPools", 1, "migPartitionSize"], "9g.99gb")]),
    ("prod", "prod-spot-l4", [(["gke-gpu:gpuPools", 0, "spot"], True)]),
    ("prod", "prod-min-gt-max", [(["gke-gpu:gpuPools", 0, "minNodes"], 9)]),
    ("prod", "prod-dup-pool", [(["gke-gpu:gpuPools", 1, "name"], "l4-serving")]),
    ("prod", "prod-overlap-cidr", [(["gke-gpu:network", "podsCidr"], "10.10.0.0/14")]),
    (
        "prod",
        "prod-exporter",
        [(["gke-gpu:monitoring", "dcgm"], "exporter"), (["gke-gpu:monitoring", "alerts", "xidErrors"], True)],
    ),
    ("prod", "prod-xid-managed", [(["gke-gpu:monitoring", "alerts", "xidErrors"], True)]),
    ("prod", "prod-bad-zone", [(["gke-gpu:gpuPools", 1, "zones"], ["us-central1-z"])]),
    (
        "prod",
        "prod-reservation",
        [(["gke-gpu:gpuPools", 0, "reservation"], {"type": "SPECIFIC", "name": "r1"})],
    ),
    ("prod", "prod-reservation-any", [(["gke-gpu:gpuPools", 0, "reservation"], {"type": "ANY"})]),
    ("prod", "prod-queued", [(["gke-gpu:gpuPools", 0, "queuedProvisioning"], True)]),
    ("prod", "prod-flex", [(["gke-gpu:gpuPools", 0, "flexStart"], True)]),
    ("prod", "prod-kueue", [(["gke-gpu:batch"], {"kueue": True})]),
    (
        "prod",
        "prod-taint",
        [(["gke-gpu:gpuPools", 0, "taints"], [{"key": "a", "value": "b", "effect": "NO_SCHEDULE"}])],
    ),
    ("prod", "prod-label-bad", [(["gke-gpu:gpuPools", 0, "labels"], {"Bad Key": "v"})]),
    ("prod", "prod-system-machine", [(["gke-gpu:cluster", "systemPool", "machineType"], "e2-standrd-4")]),
    ("prod", "prod-gpudirect-l4", [(["gke-gpu:gpuPools", 0, "gpudirect"], True)]),
    ("prod", "prod-binauthz", [(["gke-gpu:cluster", "binaryAuthorization"], True)]),
    ("prod", "prod-intranode", [(["gke-gpu:cluster", "intranodeVisibility"], True)]),
    ("prod", "prod-driver-bad", [(["gke-gpu:gpuPools", 0, "driverVersion"], "NEWEST")]),
    ("prod", "prod-driver-disabled", [(["gke-gpu:gpuPools", 0, "driverVersion"], "INSTALLATION_DISABLED")]),
    ("prod", "prod-workload-bad-pool", [(["gke-gpu:workloads", 3, "pool"], "nope")]),
    ("prod", "prod-autopilot", [(["gke-gpu:cluster", "mode"], "autopilot")]),
    ("train", "train-3-nodes", [(["gke-gpu:workloads", 0, "nodes"], 3)]),
    ("train", "train-1-node", [(["gke-gpu:workloads", 0, "nodes"], 1)]),
    ("train", "train-no-kueue", [(["gke-gpu:batch"], _DELETE)]),
    ("train", "train-no-gpudirect", [(["gke-gpu:gpuPools", 0, "gpudirect"], False)]),
    ("train", "train-a3-high", [(["gke-gpu:gpuPools", 0, "accelerator"], "nvidia-h100-80gb")]),
    ("train", "train-h200", [(["gke-gpu:gpuPools", 0, "accelerator"], "nvidia-h200-141gb")]),
    ("train", "train-b200", [(["gke-gpu:gpuPools", 0, "accelerator"], "nvidia-b200")]),
    ("train", "train-gpudirect-cidr", [(["gke-gpu:network"], {"gpudirectCidr": "10.0.0.0/24"})]),
    ("train", "train-autopilot", [(["gke-gpu:cluster", "mode"], "autopilot")]),
    ("onprem", "onprem-generic-dcgm", [(["gke-gpu:monitoring", "dcgm"], "managed")]),
    ("onprem", "onprem-no-kubeconfig", [(["gke-gpu:cluster", "kubeconfig"], _DELETE)]),
    ("onprem", "onprem-flavor-gke", [(["gke-gpu:cluster", "flavor"], "gke")]),
]


def _set(config: dict[str, Any], path: list[Any], value: Any) -> None:
    node: Any = config
    for part in path[:-1]:
        if isinstance(node, dict):
            node = node.setdefault(part, {})
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return
    last = path[-1]
    if isinstance(node, dict):
        if value is _DELETE:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(value)
    elif isinstance(node, list) and isinstance(last, int) and last < len(node):
        if value is _DELETE:
            del node[last]
        else:
            node[last] = copy.deepcopy(value)


def _paths(value: Any, prefix: list[Any]) -> list[list[Any]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, [*prefix, key])
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, [*prefix, index])
    return found


def _mutate(config: dict[str, Any], rng: random.Random) -> None:
    paths = [p for p in _paths(config, []) if p[0] != "gcp:project" or len(p) > 1]
    path = rng.choice(paths)
    action = rng.random()
    if action < 0.15:
        _set(config, path, _DELETE)
    elif action < 0.25 and len(path) > 1:
        _set(config, [*path[:-1], rng.choice(["bogusKey", "Name", "max_nodes"])], rng.choice(PALETTE))
    else:
        _set(config, path, rng.choice(PALETTE))


def corpus(seed: int, count: int) -> dict[str, dict[str, Any]]:
    """Stack name -> the whole stack file (as a dict), deterministic for (seed, count)."""
    examples = {name: yaml.safe_load((ROOT / f"Pulumi.{name}.yaml").read_text()) for name in EXAMPLES}
    stacks: dict[str, dict[str, Any]] = {name: copy.deepcopy(doc) for name, doc in examples.items()}
    stacks["bench64"] = generated_stack(64)
    for base, name, changes in CURATED:
        doc = copy.deepcopy(examples[base])
        for path, value in changes:
            _set(doc["config"], path, value)
        stacks[name] = doc
    rng = random.Random(seed)
    for i in range(count):
        base = EXAMPLES[i % len(EXAMPLES)]
        doc = copy.deepcopy(examples[base])
        for _ in range(rng.choice([1, 1, 2, 3])):
            _mutate(doc["config"], rng)
        stacks[f"random-{i:03d}-{base}"] = doc
    return stacks


def _render(stack: str, directory: Path, extra: list[str]) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: Any = render.main(["--stack", stack, "--stack-dir", str(directory), *extra])
        except SystemExit as exc:
            code = exc.code
        except Exception as exc:  # a traceback in the real CLI: exit 1
            code = 1
            err.write("".join(traceback.format_exception_only(exc)))
    return {"exit": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def render_all(stacks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    records: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for name, doc in stacks.items():
            (directory / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        for name in stacks:
            records[name] = {
                "tree": _render(name, directory, []),
                "json": _render(name, directory, ["--json"]),
            }
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, help="render the corpus and write the records here")
    group.add_argument("--check", type=Path, help="render the corpus and compare with these records")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--random", type=int, default=240, help="random variants (default 240)")
    args = parser.parse_args(argv)
    stacks = corpus(args.seed, args.random)
    records = render_all(stacks)
    codes: dict[Any, int] = {}
    for record in records.values():
        codes[record["tree"]["exit"]] = codes.get(record["tree"]["exit"], 0) + 1
    print(f"{len(records)} stack files rendered; exit codes: {dict(sorted(codes.items(), key=str))}")
    if args.write is not None:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(json.dumps({"seed": args.seed, "random": args.random, "records": records}))
        return 0
    before = json.loads(args.check.read_text())
    if (before["seed"], before["random"]) != (args.seed, args.random):
        print("error: the records were written with another --seed/--random", file=sys.stderr)
        return 2
    changed = [name for name in records if records[name] != before["records"].get(name)]
    for name in changed:
        for mode in ("tree", "json"):
            now, then = records[name][mode], before["records"].get(name, {}).get(mode)
            if now != then:
                print(f"--- {name} ({mode}) differs")
                print(f"before: {json.dumps(then)[:1500]}")
                print(f"after:  {json.dumps(now)[:1500]}")
    print(f"{len(changed)} of {len(records)} differ")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
