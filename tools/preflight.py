#!/usr/bin/env python3
"""Check a stack's preflight against the real project before `pulumi up`: the APIs it needs are
enabled, the caller holds the permissions `pulumi up` (or, with --for preview, `pulumi preview`)
needs, and the regional GPU quota covers what the pools can ask for. It says what to enable, grant or
request, with the commands.

    python tools/preflight.py --stack serve                 # as the identity `pulumi up` will use
    python tools/preflight.py --stack serve --for preview   # the read-only identity of previews

What it compares with is the offline render's preflight (`tools/render.py` prints it; computed from
what the stack declares, gke_gpu/project). It calls, with Application Default Credentials
(`gcloud auth application-default login`, a key file in GOOGLE_APPLICATION_CREDENTIALS, or Workload
Identity Federation in CI), through google-auth's AuthorizedSession:

* Service Usage `services:batchGet` (serviceusage.services.get): which APIs are enabled;
* Resource Manager `projects.testIamPermissions` (v1), and Cloud Storage's bucket
  `iam/testPermissions`: which of the permissions the caller holds (no permission needed to ask);
* Compute Engine `regions.get` and `projects.get` (compute.regions.get, compute.projects.get): the
  quota limits and usage per metric.

Exit codes: 0 everything present; 2 nothing could be checked (an invalid stack, no credentials or
ones that cannot be refreshed or read, no network, a Python without google-auth); 4 the project lacks
something (listed with the commands); 5 something could not be checked (an API call failed: the error
is printed).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

EXIT_OK, EXIT_CANNOT_RUN, EXIT_MISSING, EXIT_UNCHECKED = 0, 2, 4, 5
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
SERVICE_USAGE = "https://serviceusage.googleapis.com/v1"
RESOURCE_MANAGER = "https://cloudresourcemanager.googleapis.com/v1"
COMPUTE = "https://compute.googleapis.com/compute/v1"
STORAGE = "https://storage.googleapis.com/storage/v1"
# Service Usage batchGet takes at most 30 names per call; testIamPermissions at most 100 permissions.
BATCH_SERVICES = 30
BATCH_PERMISSIONS = 100
LOGIN = (
    "run `gcloud auth application-default login` (your user), or set GOOGLE_APPLICATION_CREDENTIALS to "
    "a service account key file, or in CI authenticate first (google-github-actions/auth, docs/ci.md); "
    "then run this again"
)
NO_CREDENTIALS = f"no Google credentials found: {LOGIN}"


class Session(Protocol):
    """What the checks call: google.auth.transport.requests.AuthorizedSession (a requests.Session)."""

    def get(self, url: str, **kwargs: Any) -> Any: ...

    def post(self, url: str, **kwargs: Any) -> Any: ...


class ApiCallError(Exception):
    """An API call answered with an error the check cannot read past."""


@dataclass
class Report:
    ok: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)

    def exit_code(self) -> int:
        if self.unchecked:
            return EXIT_UNCHECKED
        return EXIT_MISSING if self.missing else EXIT_OK


def _json(response: Any, what: str) -> dict[str, Any]:
    if response.status_code >= 400:
        try:
            error = response.json().get("error", {})
            message = error.get("message") if isinstance(error, dict) else str(error)
        except ValueError:
            message = response.text[:200]
        raise ApiCallError(f"{what}: HTTP {response.status_code}: {message}")
    body = response.json()
    return body if isinstance(body, dict) else {}


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def enabled_services(session: Session, project: str, apis: list[str]) -> dict[str, bool]:
    """Each API's state in the project (True: ENABLED), by Service Usage's batchGet."""
    states: dict[str, bool] = {}
    for chunk in _chunks(apis, BATCH_SERVICES):
        params = [("names", f"projects/{project}/services/{api}") for api in chunk]
        body = _json(
            session.get(f"{SERVICE_USAGE}/projects/{project}/services:batchGet", params=params),
            f"Service Usage services:batchGet in project {project}",
        )
        for service in body.get("services") or []:
            name = (service.get("config") or {}).get("name") or str(service.get("name", "")).rsplit("/", 1)[
                -1
            ]
            states[name] = service.get("state") == "ENABLED"
    return {api: states.get(api, False) for api in apis}


def held_permissions(session: Session, project: str, permissions: list[str]) -> set[str]:
    """The permissions the caller holds on the project (testIamPermissions answers with those)."""
    held: set[str] = set()
    for chunk in _chunks(sorted(permissions), BATCH_PERMISSIONS):
        body = _json(
            session.post(
                f"{RESOURCE_MANAGER}/projects/{project}:testIamPermissions", json={"permissions": chunk}
            ),
            f"Resource Manager projects.testIamPermissions on {project}",
        )
        held.update(body.get("permissions") or [])
    return held


def held_bucket_permissions(session: Session, bucket: str, permissions: list[str]) -> set[str]:
    params = [("permissions", p) for p in sorted(permissions)]
    body = _json(
        session.get(f"{STORAGE}/b/{bucket}/iam/testPermissions", params=params),
        f"Cloud Storage testIamPermissions on bucket {bucket}",
    )
    return set(body.get("permissions") or [])


def quota_limits(session: Session, project: str, region: str) -> dict[str, tuple[float, float]]:
    """metric -> (limit, usage) of a region (Compute regions.get), or of the project for "global"
    (projects.get: GPUS_ALL_REGIONS is a project quota)."""
    url = f"{COMPUTE}/projects/{project}" + ("" if region == "global" else f"/regions/{region}")
    body = _json(
        session.get(url),
        f"Compute Engine quotas of {project}" + ("" if region == "global" else f" in {region}"),
    )
    return {
        q["metric"]: (float(q.get("limit", 0)), float(q.get("usage", 0)))
        for q in body.get("quotas") or []
        if isinstance(q, dict) and "metric" in q
    }


def _role_for(permission: str, grants: list[dict[str, Any]]) -> str | None:
    return next((g["role"] for g in grants if permission in g["permissions"]), None)


def check_project(session: Session, entry: dict[str, Any], *, mode: str, member: str, report: Report) -> None:
    """Compare one project of a render's preflight with the project itself."""
    project = entry["project"]
    apis = [a["api"] for a in entry["apis"]]
    try:
        states = enabled_services(session, project, apis)
    except ApiCallError as exc:
        report.unchecked.append(str(exc))
    else:
        off = [api for api, on in states.items() if not on]
        report.ok += [f"{project}: API {api} enabled" for api, on in states.items() if on]
        report.missing += [f"{project}: API {api} is not enabled" for api in off]
        if off:
            report.commands.append(f"gcloud services enable {' '.join(off)} --project {project}")
    grants = entry["roles"][mode]
    needed = sorted({p for g in grants for p in g["permissions"]})
    try:
        held = held_permissions(session, project, needed)
    except ApiCallError as exc:
        report.unchecked.append(str(exc))
    else:
        _permissions(
            project, needed, held, grants, member, report, target=f"projects add-iam-policy-binding {project}"
        )
    for bucket in entry.get("buckets") or []:
        bucket_grants = bucket["roles"][mode]
        wanted = sorted({p for g in bucket_grants for p in g["permissions"]})
        try:
            held = held_bucket_permissions(session, bucket["bucket"], wanted)
        except ApiCallError as exc:
            report.unchecked.append(str(exc))
            continue
        _permissions(
            f"bucket {bucket['bucket']}",
            wanted,
            held,
            bucket_grants,
            member,
            report,
            target=f"storage buckets add-iam-policy-binding gs://{bucket['bucket']}",
            project_target=f"projects add-iam-policy-binding {project}",
        )
    if mode == "up":
        _quotas(session, project, entry.get("quotas") or [], report)


def _permissions(
    where: str,
    needed: list[str],
    held: set[str],
    grants: list[dict[str, Any]],
    member: str,
    report: Report,
    *,
    target: str,
    project_target: str | None = None,
) -> None:
    from gke_gpu.project.roles import bucket_grantable

    lacking = [p for p in needed if p not in held]
    if not lacking:
        report.ok.append(f"{where}: the caller holds all {len(needed)} permissions")
        return
    roles = sorted({r for p in lacking if (r := _role_for(p, grants))})
    report.missing.append(
        f"{where}: the caller lacks {len(lacking)} permission(s): {', '.join(lacking[:8])}"
        + (" ..." if len(lacking) > 8 else "")
        + f" (granted by {', '.join(roles)})"
    )
    for role in roles:
        # A bucket's own policy takes Cloud Storage's roles only; another is granted on the project.
        on = target if project_target is None or bucket_grantable(role) else project_target
        report.commands.append(f"gcloud {on} --member={member} --role={role}")


def _quotas(session: Session, project: str, quotas: list[dict[str, Any]], report: Report) -> None:
    regions = sorted({q["region"] for q in quotas if q["kind"] != "reserved"})
    limits: dict[str, dict[str, tuple[float, float]]] = {}
    for region in regions:
        try:
            limits[region] = quota_limits(session, project, region)
        except ApiCallError as exc:
            report.unchecked.append(str(exc))
    console = f"https://console.cloud.google.com/iam-admin/quotas?project={project}"
    for q in quotas:
        if q["kind"] == "reserved" or q["region"] not in limits:
            continue
        where = f"{project} {q['region']}: {q['metric']}"
        found = limits[q["region"]].get(q["metric"])
        if found is None:
            scope = "project" if q["region"] == "global" else "region"
            report.unchecked.append(
                f"{where}: not in Compute Engine's quota list for the {scope} (newer GPU metrics are "
                f"not always listed there): see {console}"
            )
            continue
        limit, usage = found
        if q["max"] is None:
            if limit <= 0:
                report.missing.append(
                    f"{where}: limit 0; the GPU profile needs some (request it at {console})"
                )
            else:
                report.ok.append(f"{where}: limit {limit:g} (usage {usage:g})")
        elif limit - usage < q["max"]:
            asks = "the stack creates" if q["kind"] == "networks" else "the pools may ask"
            report.missing.append(
                f"{where}: {asks} {q['max']}, but the limit is {limit:g} and {usage:g} is in "
                f"use; request at least {int(usage) + q['max']} at {console}"
            )
        else:
            report.ok.append(f"{where}: {q['max']} fit (limit {limit:g}, usage {usage:g})")


def check(
    preflight: dict[str, Any], session: Session, *, mode: str = "up", member: str = "<member>"
) -> Report:
    report = Report()
    for entry in preflight.get("projects") or []:
        check_project(session, entry, mode=mode, member=member, report=report)
    return report


def caller_member(credentials: Any) -> str:
    """The `--member` of the grant commands: the service account when the credentials name one."""
    email = getattr(credentials, "service_account_email", None)
    if isinstance(email, str) and "@" in email:
        return f"serviceAccount:{email}"
    return "user:<you@example.com>"


def authorized_session() -> tuple[Any, str] | str:
    """google-auth's AuthorizedSession on Application Default Credentials, and the caller as a member;
    or, where there are none to use, why and what to do."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError
    from google.auth.transport.requests import AuthorizedSession

    try:
        credentials, _ = google.auth.default(scopes=[SCOPE])
    except DefaultCredentialsError as exc:
        return credentials_missing(exc)
    return AuthorizedSession(credentials), caller_member(credentials)


def credentials_missing(exc: Exception) -> str:
    """Why Application Default Credentials gave none (google-auth's search order: the file
    GOOGLE_APPLICATION_CREDENTIALS names, else gcloud's application-default file, else the metadata
    server): a file that is there but cannot be read as credentials is unreadable, not missing."""
    import os

    from google.auth import _cloud_sdk, environment_vars

    named = os.environ.get(environment_vars.CREDENTIALS, "")
    if named and not Path(named).is_file():
        return f"GOOGLE_APPLICATION_CREDENTIALS names {named}, which is not a file: {LOGIN}"
    path = named or _cloud_sdk.get_application_default_credentials_path()
    if Path(path).is_file():
        return f"the credentials file {path} is unreadable ({_short(exc)}): {LOGIN}"
    return NO_CREDENTIALS


def _short(exc: BaseException) -> str:
    """An exception's text, cut short (google-auth's carry no secret, but can run long)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:199] + "…"


def call_failure(exc: BaseException) -> str | None:
    """What to do when a call could not be made at all, or None for an error that is not about
    credentials or the network. google-auth refreshes the access token before the first call
    (AuthorizedSession.request): RefreshError when the token endpoint refuses (an expired or revoked
    login, a deleted key), TransportError when it cannot be reached; requests' ConnectionError and
    Timeout when an API cannot."""
    import requests
    from google.auth.exceptions import RefreshError, TransportError

    if isinstance(exc, RefreshError):
        return (
            f"the Google credentials could not be refreshed ({_short(exc)}): the login has expired or "
            f"was revoked, or the key was deleted; {LOGIN}"
        )
    if isinstance(exc, TransportError):
        return (
            f"Google's token endpoint could not be reached to refresh the credentials ({_short(exc)}): "
            f"check the network and any proxy; if they are fine, {LOGIN}"
        )
    if isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        return f"Google's APIs could not be reached ({_short(exc)}): check the network and any proxy"
    return None


def print_report(report: Report) -> None:
    for line in report.ok:
        print(f"ok: {line}")
    for line in report.missing:
        print(f"missing: {line}")
    for line in report.unchecked:
        print(f"not checked: {line}")
    if report.commands:
        print("\nto fix it:")
        for command in dict.fromkeys(report.commands):
            print(f"  {command}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Check a stack's APIs, roles and GPU quota against its project."
    )
    parser.add_argument("--stack", required=True)
    parser.add_argument(
        "--stack-dir", type=Path, help="directory of the Pulumi.<stack>.yaml files (default: repo)"
    )
    parser.add_argument(
        "--for",
        dest="mode",
        choices=("up", "preview"),
        default="up",
        help="the identity to check: the deployer (`pulumi up`, default) or the read-only previewer",
    )
    args = parser.parse_args(argv)
    try:
        from gke_gpu.core.validation import InvalidArgsError
        from gke_gpu.stack.config import ConfigError
        from gke_gpu.stack.stack_file import StackFileError
        from tools.offline import ROOT, run_stack
    except ModuleNotFoundError as exc:
        from tools.venv_guard import exit_without_venv

        exit_without_venv(exc, __name__, "tools/preflight.py")
    try:
        import google.auth  # noqa: F401  (requirements.txt pins it)
    except ModuleNotFoundError:
        print(
            "error: google-auth is missing: `.venv/bin/pip install -r requirements.txt` installs it",
            file=sys.stderr,
        )
        return EXIT_CANNOT_RUN
    try:
        result = run_stack(args.stack, directory=args.stack_dir or ROOT)
    except (FileNotFoundError, StackFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if result.error is not None:
        if isinstance(result.error, (ConfigError, StackFileError, InvalidArgsError)):
            print(f"error: stack {args.stack}: {result.error}", file=sys.stderr)
            return EXIT_CANNOT_RUN
        raise result.error
    from tools.plan import to_document

    preflight = to_document(result)["preflight"]
    if not preflight["projects"]:
        print(f"stack {args.stack} creates nothing in GCP: nothing to check")
        return EXIT_OK
    authorized = authorized_session()
    if isinstance(authorized, str):
        print(f"error: {authorized}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    session, member = authorized
    try:
        report = check(preflight, session, mode=args.mode, member=member)
    except Exception as exc:
        why = call_failure(exc)
        if why is None:
            raise
        print(f"error: {why}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    print_report(report)
    return report.exit_code()


if __name__ == "__main__":
    sys.exit(main())
