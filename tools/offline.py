"""Run the real Pulumi program offline, under the Pulumi SDK's mocks, and record what it declares.

This is the engine behind `tools/render.py` and the test suite: no Pulumi CLI, no credentials, no
network. `__main__.py` runs unchanged; a recording mock answers every resource registration with
its inputs (and, in preview mode, no ID and no computed outputs, exactly as `pulumi preview` knows
nothing about values GCP computes). What comes back is the list of resources with their inputs,
parents and providers, and the stack outputs.

Limits (the same as any mock run): no provider `Check`, so provider-side defaults and validation
are absent; values that GCP computes (IDs, endpoints, service account emails) are unknown.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import re
import runpy
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings as pulumi_settings

from gke_gpu.stack.secrets_provider import check_secrets_provider

# Re-exported: the render's marker for a secure value, which the policy pack knows too.
from gke_gpu.stack.stack_file import SECRET_NOT_DECRYPTED as SECRET_NOT_DECRYPTED
from gke_gpu.stack.stack_file import StackFile, load_stack_file

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "__main__.py"
PROJECT = "gke-gpu"
UNKNOWN = "(known after apply)"
SECRET = "[secret]"
_SECRET_SIG = "4dabf18193072939515e22adb298388d"
SERVICE_ACCOUNT_TOKEN_TYPE = "kubernetes.io/service-account-token"
# What the mocks put in a ServiceAccount token Secret's data (then `<resource name>`).
MOCK_TOKEN_PREFIX = "mock-service-account-token-"


@dataclass
class Resource:
    """One registered resource or component, with normalised inputs."""

    urn: str
    type: str
    name: str
    custom: bool
    parent: str | None
    provider: str | None
    inputs: dict[str, Any]
    # The type tokens this resource was known by before (its `aliases=[Alias(type_=...)]`).
    alias_types: tuple[str, ...] = ()
    # The inputs left to the provider and GCP after creation (`ignore_changes`).
    ignore_changes: tuple[str, ...] = ()

    @property
    def is_component(self) -> bool:
        return not self.custom and not self.type.startswith("pulumi:providers:")


@dataclass
class RunResult:
    stack: str
    resources: list[Resource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    error: BaseException | None = None

    def of_type(self, type_token: str) -> list[Resource]:
        return [r for r in self.resources if r.type == type_token]

    def one(self, type_token: str, name: str | None = None) -> Resource:
        found = [r for r in self.of_type(type_token) if name is None or r.name == name]
        if len(found) != 1:
            names = [r.name for r in self.of_type(type_token)]
            raise AssertionError(f"expected one {type_token} {name or ''}, found {names}")
        return found[0]

    def by_urn(self, urn: str) -> Resource:
        return next(r for r in self.resources if r.urn == urn)

    def children_of(self, resource: Resource) -> list[Resource]:
        return [r for r in self.resources if r.parent == resource.urn]


def normalise(value: Any) -> Any:
    """Plain JSON-able data: unknowns and secrets as markers, integral floats as ints."""
    if isinstance(value, pulumi.output.Unknown):
        return UNKNOWN
    if isinstance(value, dict):
        if _SECRET_SIG in value:
            return SECRET
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


_ZONE = re.compile(r"-[a-z]$")


class _RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self, preview: bool) -> None:
        self.preview = preview
        self.current = threading.local()
        self.resources: list[Resource] = []
        self.monitor: _RecordingMonitor | None = None

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict]:
        parent = getattr(self.current, "parent", "") or None
        assert self.monitor is not None
        urn = self.monitor.make_urn(parent or "", args.typ, args.name)
        self.resources.append(
            Resource(
                urn=urn,
                type=args.typ,
                name=args.name,
                custom=bool(args.custom),
                parent=parent,
                provider=(args.provider or None),
                inputs=normalise(args.inputs),
                alias_types=getattr(self.current, "alias_types", ()),
                ignore_changes=getattr(self.current, "ignore_changes", ()),
            )
        )
        if self.preview:
            return None, _with_preview_unknowns(args)
        computed = _computed_outputs(args)
        return computed.pop("id", f"{args.name}-id"), {**args.inputs, **computed}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        # The program makes no invokes (no cloud look-ups): any call is a bug worth seeing.
        raise AssertionError(f"unexpected invoke {args.token} in an offline run")


class _RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: _RecordingMocks) -> None:
        super().__init__(mocks)
        self._recorder = mocks
        self.thread_loops: set[asyncio.AbstractEventLoop] = set()
        mocks.monitor = self

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """URNs as the real engine makes them: the parent's full type chain, never the Stack's."""
        if parent:
            parent_type = parent.split("::")[2]
            if parent_type != "pulumi:pulumi:Stack":
                type_ = f"{parent_type}${type_}"
        return "urn:pulumi:" + "::".join([pulumi.get_stack(), pulumi.get_project(), type_, name])

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        self._recorder.current.parent = request.parent
        self._recorder.current.alias_types = tuple(
            alias.spec.type for alias in request.aliases if alias.HasField("spec") and alias.spec.type
        )
        self._recorder.current.ignore_changes = tuple(request.ignoreChanges)
        try:
            return super().RegisterResource(request)
        finally:
            self._recorder.current.parent = None
            self._recorder.current.alias_types = ()
            self._recorder.current.ignore_changes = ()
            # The SDK gives each RPC worker thread its own event loop; close them after the run
            # (left open, they fail noisily when the interpreter tears them down).
            with contextlib.suppress(RuntimeError):
                self.thread_loops.add(asyncio.get_event_loop())


def _with_preview_unknowns(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    """A preview's outputs: the inputs, plus the nested values the provider computes marked unknown
    (as `pulumi preview` shows them), where the program reads them."""
    outputs = dict(args.inputs)
    if args.typ == "gcp:container/cluster:Cluster":
        endpoints = dict(outputs.get("controlPlaneEndpointsConfig") or {})
        dns = dict(endpoints.get("dnsEndpointConfig") or {})
        dns["endpoint"] = pulumi.runtime.rpc.UNKNOWN
        outputs["controlPlaneEndpointsConfig"] = {**endpoints, "dnsEndpointConfig": dns}
        if outputs.get("fleet"):
            outputs["fleet"] = {**outputs["fleet"], "membership": pulumi.runtime.rpc.UNKNOWN}
    return outputs


def _computed_outputs(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    """Deterministic stand-ins for values GCP computes, for update-mode (non-preview) runs."""
    name = args.inputs.get("name", args.name)
    if args.typ == "gcp:serviceaccount/account:Account":
        email = f"{args.inputs['accountId']}@{args.inputs.get('project', 'project')}.iam.gserviceaccount.com"
        return {"email": email, "member": f"serviceAccount:{email}"}
    if args.typ == "gcp:container/cluster:Cluster":
        location = args.inputs.get("location", "us-central1")
        computed: dict[str, Any] = {
            "endpoint": "203.0.113.10",
            "masterAuth": {"clusterCaCertificate": "Q0EtREFUQQ=="},
            "controlPlaneEndpointsConfig": {
                "dnsEndpointConfig": {"endpoint": f"gke-0123456789abcdef-{name}.{location}.gke.goog"}
            },
        }
        fleet = args.inputs.get("fleet")
        if fleet:
            # A cluster born in a fleet gets a regional Membership named after it (the provider's
            # ClusterFleet.membership; hashicorp/terraform-provider-google#16795 shows one).
            region = _ZONE.sub("", location)
            project = fleet.get("project")
            membership = f"//gkehub.googleapis.com/projects/{project}/locations/{region}/memberships/{name}"
            computed["fleet"] = {
                **fleet,
                "membership": membership,
                "membershipId": name,
                "membershipLocation": region,
            }
        return computed
    if args.typ in ("gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork"):
        kind = "networks" if args.typ.endswith("Network") else "subnetworks"
        return {"selfLink": f"https://www.googleapis.com/compute/v1/{kind}/{name}"}
    if args.typ == "kubernetes:core/v1:Secret" and args.inputs.get("type") == SERVICE_ACCOUNT_TOKEN_TYPE:
        # The token controller fills a token Secret's data: a stand-in token a test can look for.
        token = base64.b64encode(f"{MOCK_TOKEN_PREFIX}{args.name}".encode()).decode()
        return {"data": {"token": token, "ca.crt": "Q0EtREFUQQ=="}}
    if args.typ == "gcp:monitoring/dashboard:Dashboard":
        return {"id": f"projects/{args.inputs.get('project', 'project')}/dashboards/{args.name}"}
    return {}


# The kind of each message the program logs, as the engine prints it: its one prefix.
_KINDS = {logging.INFO: "note: ", logging.WARNING: "warning: ", logging.ERROR: "error: "}


class _LogCapture(logging.Handler):
    """The program's messages, each with the prefix of its kind: notes (info) and warnings."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        kind = _KINDS.get(record.levelno, "warning: " if record.levelno > logging.INFO else "note: ")
        self.messages.append(kind + record.getMessage())


# --------------------------------------------------------------------------------------------------
# Stack files.


def stack_file(stack: str, directory: Path = ROOT) -> Path:
    return directory / f"Pulumi.{stack}.yaml"


def load_stack_config(stack: str, directory: Path = ROOT) -> tuple[dict[str, str], list[str]]:
    """A stack file's config as the engine passes it: `ns:key` -> string (objects as JSON).

    Secure values cannot be decrypted offline; they become a placeholder and are marked secret.
    Raises FileNotFoundError when there is no such file, StackFileError (naming the file and line)
    when it cannot be read the way the Pulumi engine would read it.
    """
    loaded = _load(stack, directory)
    return loaded.config, loaded.secret_keys


def _load(stack: str, directory: Path) -> StackFile:
    path = stack_file(stack, directory)
    if not path.exists():
        raise FileNotFoundError(f"no stack file {path.name} in {directory}")
    loaded = load_stack_file(path)
    # One Cloud KMS key per stack (a preview of one stack must not decrypt another's): checked where
    # the stack files are read, before the render (and, in CI, before any preview: docs/ci.md).
    check_secrets_provider(stack, loaded, directory)
    return loaded


def _engine_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def stacks(directory: Path = ROOT) -> list[str]:
    """Every stack that has a `Pulumi.<stack>.yaml` in the directory (the repository by default)."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in directory.glob("Pulumi.*.yaml"))


# --------------------------------------------------------------------------------------------------
# Running the program.


def run_program(
    config: Mapping[str, Any],
    *,
    stack: str = "test",
    preview: bool = True,
    secret_keys: Sequence[str] = (),
    program: Path | Callable[[], dict[str, Any] | None] = PROGRAM,
) -> RunResult:
    """Run `__main__.py` under mocks with this config; never raises for program errors.

    `config` maps `ns:key` to a string, or to a dict/list/bool/number that is encoded the way the
    engine encodes structured config. `preview=True` behaves like `pulumi preview` (computed values
    unknown); `preview=False` like `pulumi up` with deterministic stand-in values. `program` is
    `__main__.py` by default, or a callable (to declare one component alone) returning its outputs.
    """
    result = RunResult(stack=stack)
    engine_config = {k: _engine_string(v) for k, v in config.items()}
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    capture = _LogCapture()
    logger = logging.getLogger(f"gke-gpu.offline.{id(result)}")
    logger.addHandler(capture)
    logger.setLevel(logging.INFO)  # notes are info: the root logger's WARNING would drop them
    logger.propagate = False
    mocks = _RecordingMocks(preview)
    monitor = _RecordingMonitor(mocks)
    saved_env = os.environ.pop("PULUMI_CONFIG", None)
    saved_path = list(sys.path)
    program_globals: dict[str, Any] = {}
    try:
        pulumi.runtime.set_all_config(engine_config, list(secret_keys))
        pulumi_mocks.set_mocks(
            mocks, project=PROJECT, stack=stack, preview=preview, logger=logger, monitor=monitor
        )
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))

        def run() -> None:
            if callable(program):
                program_globals["outputs"] = program()
            else:
                program_globals.update(runpy.run_path(str(program), run_name="__main__"))

        try:
            pulumi.runtime.test(run)()
        except Exception as exc:
            result.error = exc
        outputs = program_globals.get("outputs")
        if result.error is None and isinstance(outputs, dict):
            result.outputs = loop.run_until_complete(_resolve(outputs))
    finally:
        result.resources = mocks.resources
        result.warnings = capture.messages
        pulumi.runtime.set_all_config({}, [])
        pulumi_settings.reset_options()
        pulumi_settings.SETTINGS.rpc_manager.clear()
        pulumi_settings.SETTINGS.outputs.clear()
        sys.path[:] = saved_path
        if saved_env is not None:
            os.environ["PULUMI_CONFIG"] = saved_env
        loop.close()
        for thread_loop in monitor.thread_loops - {loop}:
            if not thread_loop.is_running() and not thread_loop.is_closed():
                thread_loop.close()
        asyncio.set_event_loop(None)
        # The run's logger is read only through `capture`: unregister it, or every later run (and a
        # test runner that attaches handlers to each non-propagating logger) pays for it.
        logger.removeHandler(capture)
        logging.Logger.manager.loggerDict.pop(logger.name, None)
    return result


async def _resolve(value: Any) -> Any:
    """Await every Output in a nested structure; unknown and secret values become markers."""
    if isinstance(value, pulumi.Output):
        if await value.is_secret():
            return SECRET
        if not await value.is_known():
            return UNKNOWN
        return await _resolve(await value.future(with_unknowns=True))
    if isinstance(value, dict):
        return {k: await _resolve(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [await _resolve(v) for v in value]
    return normalise(value)


def run_stack(stack: str, *, preview: bool = True, directory: Path = ROOT) -> RunResult:
    """Run the program with a stack file's config, as `pulumi preview` on that stack would."""
    loaded = _load(stack, directory)
    result = run_program(loaded.config, stack=stack, preview=preview, secret_keys=loaded.secret_keys)
    # What the file holds that an offline run cannot use (an ESC environment) comes first.
    result.warnings[:0] = [f"warning: {note}" for note in loaded.notes]
    return result
