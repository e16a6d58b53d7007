"""What a kubeconfig for an existing cluster holds that must not be in plain text.

Where a credential can sit in a kubeconfig user (client-go's clientcmd/api/v1 AuthInfo): `token`,
`password`, `client-key-data` (the key itself; `client-key`, `tokenFile` and
`client-certificate-data` are a path or public), `auth-provider.config` (the legacy gcp/oidc
plugins' tokens and client secret) and `exec` (a credential plugin's `env` values and `args`).
client-go decodes a kubeconfig case-sensitively (apimachinery's JSON decoding; UNVERIFIED for every
client-go version), so a differently-cased key is ignored by it, but it is still a secret in plain
text: keys are matched here case-insensitively, which finds more, never less."""

from __future__ import annotations

import re
from typing import Any

from ..core.credentials import credential_kind

# Fields of a kubeconfig user that are credentials themselves.
USER_SECRETS = ("token", "client-key-data", "password")
# An auth provider's config (the legacy gcp/oidc plugins) that carries tokens or a client secret.
AUTH_PROVIDER_SECRETS = ("client-secret", "id-token", "refresh-token", "access-token")
# An exec plugin's environment variable or flag whose name says it holds a credential.
SECRET_NAME = re.compile(r"token|secret|passw|credential|api[-_]?key|(^|[-_])key$", re.IGNORECASE)
# Values that are credentials whatever their name: a JWT, a Google OAuth access token, a PEM key.
SECRET_VALUE = re.compile(r"^(eyJ[\w-]{10,}\.|ya29\.|-----BEGIN [A-Z ]*PRIVATE KEY)")


def kubeconfig_credentials(document: dict[str, Any]) -> list[str]:
    """The paths of the credentials in a parsed kubeconfig, e.g. `users[0].user.token`."""
    users = _get(document, "users")
    found: list[str] = []
    for index, entry in enumerate(users if isinstance(users, list) else []):
        user = _get(entry, "user") if isinstance(entry, dict) else None
        if not isinstance(user, dict):
            continue
        at = f"users[{index}].user"
        found += [f"{at}.{key}" for key in USER_SECRETS if _set(_get(user, key))]
        provider = _get(user, "auth-provider")
        config = _get(provider, "config") if isinstance(provider, dict) else None
        if isinstance(config, dict):
            found += [
                f"{at}.auth-provider.config.{key}" for key in AUTH_PROVIDER_SECRETS if _set(_get(config, key))
            ]
        command = _get(user, "exec")
        if isinstance(command, dict):
            found += _exec_credentials(command, f"{at}.exec")
    return found


def _exec_credentials(command: dict[str, Any], at: str) -> list[str]:
    """An exec plugin's env values and args that hold a credential (by name or by shape)."""
    found = []
    env = _get(command, "env")
    for i, variable in enumerate(env if isinstance(env, list) else []):
        if not isinstance(variable, dict):
            continue
        name, value = _get(variable, "name"), _get(variable, "value")
        if _set(value) and (_secret_name(name) or _secret_value(str(value))):
            found.append(f"{at}.env[{i}].value")
    args = _get(command, "args")
    args = [a for a in args if isinstance(a, str)] if isinstance(args, list) else []
    for i, arg in enumerate(args):
        flag, has_value, value = arg.partition("=")
        after = args[i + 1] if i + 1 < len(args) else ""
        if _secret_value(arg) or (
            flag.startswith("-")
            and _secret_name(flag.lstrip("-"))
            and (_set(value) if has_value else bool(after) and not after.startswith("-"))
        ):
            found.append(f"{at}.args[{i}]")
    return found


def _secret_value(value: str) -> bool:
    """A value that is a credential whatever its name: SECRET_VALUE's shapes, or any token shape the
    program hides in its messages (core/credentials.py: Hugging Face, GitHub, Google API keys, bearer)."""
    return bool(SECRET_VALUE.match(value.strip())) or credential_kind(value) is not None


def _secret_name(name: Any) -> bool:
    """A name that says it holds a credential (not a file or path naming one)."""
    return (
        isinstance(name, str)
        and bool(SECRET_NAME.search(name))
        and not re.search(r"(file|path|dir)$", name, re.IGNORECASE)
    )


def _get(mapping: Any, key: str) -> Any:
    """`mapping[key]`, the key matched case-insensitively (an exact match first)."""
    if not isinstance(mapping, dict):
        return None
    if key in mapping:
        return mapping[key]
    return next((v for k, v in mapping.items() if isinstance(k, str) and k.lower() == key), None)


def _set(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())
