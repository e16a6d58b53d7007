"""tools/preflight.py against Google's APIs, offline: google-auth's own AuthorizedSession (a
requests.Session) with a requests transport adapter mounted in place of the network, answering as
the APIs' references document their responses (Service Usage services:batchGet, Resource Manager
v1 projects.testIamPermissions, Cloud Storage buckets.testIamPermissions, Compute Engine regions.get
and projects.get). The real path is the same code with Application Default Credentials."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import google.auth
import pytest
import requests
from google.auth.exceptions import DefaultCredentialsError
from google.auth.transport.requests import AuthorizedSession
from google.oauth2.credentials import Credentials

from tests.conftest import stack_render
from tools import preflight as live
from tools.plan import to_document

TOKEN = "ya29.test-token"


class FakeGoogle(requests.adapters.BaseAdapter):
    """Google's APIs for one project, as their references shape the answers."""

    def __init__(
        self,
        *,
        enabled: set[str],
        held: set[str],
        quotas: dict[str, dict[str, tuple[float, float]]],
        bucket_held: set[str] | None = None,
        fail: dict[str, int] | None = None,
    ) -> None:
        super().__init__()
        self.enabled, self.held, self.quotas = enabled, held, quotas
        self.bucket_held = bucket_held if bucket_held is not None else held
        self.fail = fail or {}
        self.calls: list[requests.PreparedRequest] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        self.calls.append(request)
        assert request.headers["Authorization"] == f"Bearer {TOKEN}"
        url = urlsplit(request.url or "")
        query = parse_qs(url.query)
        for host, status in self.fail.items():
            if url.netloc == host:
                return self._answer(request, status, {"error": {"code": status, "message": "denied"}})
        if url.netloc == "serviceusage.googleapis.com" and url.path.endswith("/services:batchGet"):
            assert len(query["names"]) <= live.BATCH_SERVICES
            services = []
            for name in query["names"]:
                api = name.rsplit("/", 1)[-1]
                services.append(
                    {
                        "name": f"projects/123456789/services/{api}",
                        "config": {"name": api, "title": api},
                        "state": "ENABLED" if api in self.enabled else "DISABLED",
                        "parent": "projects/123456789",
                    }
                )
            return self._answer(request, 200, {"services": services})
        if url.netloc == "cloudresourcemanager.googleapis.com" and url.path.endswith(":testIamPermissions"):
            asked = json.loads(request.body or b"{}")["permissions"]
            assert len(asked) <= live.BATCH_PERMISSIONS
            granted = [p for p in asked if p in self.held]
            return self._answer(request, 200, {"permissions": granted} if granted else {})
        if url.netloc == "storage.googleapis.com" and url.path.endswith("/iam/testPermissions"):
            granted = [p for p in query["permissions"] if p in self.bucket_held]
            return self._answer(
                request, 200, {"kind": "storage#testIamPermissionsResponse", "permissions": granted}
            )
        if url.netloc == "compute.googleapis.com":
            parts = url.path.split("/")
            region = parts[parts.index("regions") + 1] if "regions" in parts else "global"
            quotas = [
                {"metric": metric, "limit": limit, "usage": usage}
                for metric, (limit, usage) in self.quotas.get(region, {}).items()
            ]
            kind = "compute#region" if region != "global" else "compute#project"
            return self._answer(request, 200, {"kind": kind, "name": region, "quotas": quotas})
        return self._answer(request, 404, {"error": {"code": 404, "message": f"no such call {url.path}"}})

    @staticmethod
    def _answer(request: requests.PreparedRequest, status: int, body: dict[str, Any]) -> requests.Response:
        response = requests.Response()
        response.status_code = status
        response._content = json.dumps(body).encode()
        response.headers["Content-Type"] = "application/json"
        response.url = request.url or ""
        response.request = request
        return response

    def close(self) -> None:
        pass


def _session(adapter: FakeGoogle) -> AuthorizedSession:
    session = AuthorizedSession(Credentials(token=TOKEN))
    session.mount("https://", adapter)
    return session


@pytest.fixture(scope="module")
def serve() -> dict[str, Any]:
    return to_document(stack_render("serve"))["preflight"]


def _everything(preflight: dict[str, Any]) -> dict[str, Any]:
    (project,) = preflight["projects"]
    permissions = {p for mode in ("up", "preview") for g in project["roles"][mode] for p in g["permissions"]}
    bucket = {
        p
        for b in project["buckets"]
        for m in ("up", "preview")
        for g in b["roles"][m]
        for p in g["permissions"]
    }
    return {
        "enabled": {a["api"] for a in project["apis"]},
        "held": permissions | bucket,
        "quotas": {
            "us-central1": {"NVIDIA_L4_GPUS": (8.0, 0.0), "CPUS": (72.0, 0.0)},
            "global": {"GPUS_ALL_REGIONS": (16.0, 2.0), "NETWORKS": (15.0, 1.0)},
        },
    }


def test_everything_present(serve: dict[str, Any]) -> None:
    adapter = FakeGoogle(**_everything(serve))
    report = live.check(serve, _session(adapter))
    assert report.missing == [] and report.unchecked == [] and report.commands == []
    assert report.exit_code() == live.EXIT_OK
    assert any("API artifactregistry.googleapis.com enabled" in line for line in report.ok)
    assert any("NVIDIA_L4_GPUS: 3 fit (limit 8, usage 0)" in line for line in report.ok)
    hosts = {urlsplit(c.url or "").netloc for c in adapter.calls}
    assert hosts == {
        "serviceusage.googleapis.com",
        "cloudresourcemanager.googleapis.com",
        "storage.googleapis.com",
        "compute.googleapis.com",
    }


def test_a_missing_api(serve: dict[str, Any]) -> None:
    given = _everything(serve)
    given["enabled"] -= {"artifactregistry.googleapis.com", "containerfilesystem.googleapis.com"}
    report = live.check(serve, _session(FakeGoogle(**given)))
    assert report.exit_code() == live.EXIT_MISSING
    assert "example-gpu-serve: API artifactregistry.googleapis.com is not enabled" in report.missing
    assert report.commands == [
        "gcloud services enable artifactregistry.googleapis.com containerfilesystem.googleapis.com "
        "--project example-gpu-serve"
    ]


def test_a_missing_permission(serve: dict[str, Any]) -> None:
    given = _everything(serve)
    given["held"] -= {"artifactregistry.repositories.create", "artifactregistry.repositories.setIamPolicy"}
    report = live.check(
        serve, _session(FakeGoogle(**given)), member="serviceAccount:deployer@ci.iam.gserviceaccount.com"
    )
    assert report.exit_code() == live.EXIT_MISSING
    (line,) = report.missing
    assert "lacks 2 permission(s): artifactregistry.repositories.create" in line
    assert "(granted by roles/artifactregistry.admin)" in line
    assert report.commands == [
        "gcloud projects add-iam-policy-binding example-gpu-serve "
        "--member=serviceAccount:deployer@ci.iam.gserviceaccount.com --role=roles/artifactregistry.admin"
    ]


def test_a_missing_bucket_permission_names_the_bucket(serve: dict[str, Any]) -> None:
    given = _everything(serve)
    report = live.check(
        serve,
        _session(FakeGoogle(**given, bucket_held={"storage.buckets.get"})),
        member="user:me@example.com",
    )
    assert any(
        line.startswith("bucket example-gpu-serve-models: the caller lacks 2") for line in report.missing
    )
    assert (
        "gcloud storage buckets add-iam-policy-binding gs://example-gpu-serve-models "
        "--member=user:me@example.com --role=roles/storage.legacyBucketOwner" in report.commands
    )


def test_insufficient_quota(serve: dict[str, Any]) -> None:
    given = _everything(serve)
    given["quotas"] = {
        "us-central1": {"NVIDIA_L4_GPUS": (2.0, 1.0), "CPUS": (24.0, 8.0)},
        "global": {"GPUS_ALL_REGIONS": (0.0, 0.0), "NETWORKS": (5.0, 5.0)},
    }
    report = live.check(serve, _session(FakeGoogle(**given)))
    assert report.exit_code() == live.EXIT_MISSING
    assert any(
        "us-central1: NVIDIA_L4_GPUS: the pools may ask 3, but the limit is 2 and 1 is in use; "
        "request at least 4" in line
        for line in report.missing
    )
    assert any(
        "global: GPUS_ALL_REGIONS: the pools may ask 3, but the limit is 0" in line for line in report.missing
    )
    # The L4 nodes' 24 vCPUs against 16 left, and one more network where the project has none left.
    assert any(
        "us-central1: CPUS: the pools may ask 24, but the limit is 24 and 8 is in use" in m
        for m in report.missing
    )
    assert any(
        "global: NETWORKS: the stack creates 1, but the limit is 5 and 5 is in use" in m
        for m in report.missing
    )


def test_a_metric_the_region_does_not_list_is_said_unchecked(serve: dict[str, Any]) -> None:
    given = _everything(serve)
    given["quotas"]["us-central1"] = {}
    report = live.check(serve, _session(FakeGoogle(**given)))
    assert report.exit_code() == live.EXIT_UNCHECKED
    assert any(
        "NVIDIA_L4_GPUS: not in Compute Engine's quota list for the region" in u for u in report.unchecked
    )


def test_an_api_error_is_reported_not_raised(serve: dict[str, Any]) -> None:
    adapter = FakeGoogle(**_everything(serve), fail={"serviceusage.googleapis.com": 403})
    report = live.check(serve, _session(adapter))
    assert report.exit_code() == live.EXIT_UNCHECKED
    assert any(
        "services:batchGet in project example-gpu-serve: HTTP 403: denied" in u for u in report.unchecked
    )


def test_the_preview_identity_is_checked_for_the_read_only_set(serve: dict[str, Any]) -> None:
    given = _everything(serve)
    (project,) = serve["projects"]
    given["held"] = {p for g in project["roles"]["preview"] for p in g["permissions"]} | {
        p for b in project["buckets"] for g in b["roles"]["preview"] for p in g["permissions"]
    }
    adapter = FakeGoogle(**given)
    report = live.check(serve, _session(adapter), mode="preview")
    assert report.exit_code() == live.EXIT_OK
    # A preview needs no quota: none is read.
    assert not [c for c in adapter.calls if urlsplit(c.url or "").netloc == "compute.googleapis.com"]


def test_no_credentials_says_how_to_get_them(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_credentials(**_: Any) -> Any:
        raise DefaultCredentialsError("Your default credentials were not found.")

    monkeypatch.setattr(google.auth, "default", no_credentials)
    assert live.main(["--stack", "serve"]) == live.EXIT_CANNOT_RUN
    err = capsys.readouterr().err
    assert "gcloud auth application-default login" in err and "Traceback" not in err


def test_a_stack_without_gcp_resources_needs_no_credentials(capsys: pytest.CaptureFixture[str]) -> None:
    assert live.main(["--stack", "onprem"]) == live.EXIT_OK
    assert "creates nothing in GCP" in capsys.readouterr().out


def test_the_member_of_the_commands_is_the_service_account_when_known() -> None:
    class Service:
        service_account_email = "deployer@ci.iam.gserviceaccount.com"

    assert live.caller_member(Service()) == "serviceAccount:deployer@ci.iam.gserviceaccount.com"
    assert live.caller_member(Credentials(token=TOKEN)) == "user:<you@example.com>"


# -- credentials that exist but cannot be used --------------------------------------------------------

TOKEN_HOST = "oauth2.googleapis.com"


class WithTokenEndpoint(FakeGoogle):
    """FakeGoogle with Google's OAuth token endpoint, answering a refresh as it documents: a new access
    token, or `invalid_grant` (an expired or revoked refresh token); or, with `unreachable`, no network to
    the named hosts (requests' ConnectionError, as its HTTPAdapter raises it)."""

    def __init__(self, *, refresh: str = "ok", unreachable: set[str] | None = None, **given: Any) -> None:
        super().__init__(**given)
        self.refresh, self.unreachable = refresh, unreachable or set()

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        host = urlsplit(request.url or "").netloc
        if host in self.unreachable:
            self.calls.append(request)
            raise requests.exceptions.ConnectionError(f"Failed to resolve '{host}'", request=request)
        if host == TOKEN_HOST:
            self.calls.append(request)
            if self.refresh == "ok":
                return self._answer(
                    request, 200, {"access_token": TOKEN, "expires_in": 3599, "token_type": "Bearer"}
                )
            return self._answer(
                request,
                400,
                {"error": "invalid_grant", "error_description": "Token has been expired or revoked."},
            )
        return super().send(request, **kwargs)


def _adc_file(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, content: str) -> Any:
    """An Application Default Credentials file named by GOOGLE_APPLICATION_CREDENTIALS."""
    path = tmp_path / "adc.json"
    path.write_text(content)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    return path


AUTHORIZED_USER = json.dumps(
    {
        "type": "authorized_user",
        "client_id": "764086051850-example.apps.googleusercontent.com",
        "client_secret": "d-FL95Q19q7MQmFpd7hHD0Ty",
        "refresh_token": "1//fake-refresh-token",
    }
)


def _route_all_sessions(monkeypatch: pytest.MonkeyPatch, adapter: FakeGoogle) -> None:
    """Every requests Session (AuthorizedSession's and the token refresh's own) through `adapter`."""
    monkeypatch.setattr(requests.Session, "get_adapter", lambda self, url: adapter)


def test_a_login_that_cannot_be_refreshed_says_log_in_again(
    serve: dict[str, Any], tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _adc_file(tmp_path, monkeypatch, AUTHORIZED_USER)
    adapter = WithTokenEndpoint(refresh="invalid_grant", **_everything(serve))
    _route_all_sessions(monkeypatch, adapter)
    assert live.main(["--stack", "serve"]) == live.EXIT_CANNOT_RUN
    err = capsys.readouterr().err
    assert err.startswith("error: the Google credentials could not be refreshed (")
    assert "invalid_grant" in err and "gcloud auth application-default login" in err
    assert "Traceback" not in err and "1//fake-refresh-token" not in err
    # It stopped at the refresh: no API was asked.
    assert {urlsplit(c.url or "").netloc for c in adapter.calls} == {TOKEN_HOST}


def test_a_token_endpoint_out_of_reach_says_check_the_network(
    serve: dict[str, Any], tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _adc_file(tmp_path, monkeypatch, AUTHORIZED_USER)
    _route_all_sessions(monkeypatch, WithTokenEndpoint(unreachable={TOKEN_HOST}, **_everything(serve)))
    assert live.main(["--stack", "serve"]) == live.EXIT_CANNOT_RUN
    err = capsys.readouterr().err
    assert err.startswith("error: Google's token endpoint could not be reached to refresh the credentials")
    assert "check the network" in err and "Traceback" not in err


def test_an_api_out_of_reach_says_check_the_network(
    serve: dict[str, Any], tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _adc_file(tmp_path, monkeypatch, AUTHORIZED_USER)
    adapter = WithTokenEndpoint(unreachable={"serviceusage.googleapis.com"}, **_everything(serve))
    _route_all_sessions(monkeypatch, adapter)
    assert live.main(["--stack", "serve"]) == live.EXIT_CANNOT_RUN
    err = capsys.readouterr().err
    assert err.startswith("error: Google's APIs could not be reached (") and "Traceback" not in err


def test_a_malformed_credentials_file_is_unreadable_not_missing(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _adc_file(tmp_path, monkeypatch, '{"type": "authorized_user", ')
    assert live.main(["--stack", "serve"]) == live.EXIT_CANNOT_RUN
    err = capsys.readouterr().err
    assert err.startswith(f"error: the credentials file {path} is unreadable (")
    assert "no Google credentials found" not in err and "Traceback" not in err
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "gone.json"))
    assert live.main(["--stack", "serve"]) == live.EXIT_CANNOT_RUN
    assert f"GOOGLE_APPLICATION_CREDENTIALS names {tmp_path / 'gone.json'}, which is not a file" in (
        capsys.readouterr().err
    )
