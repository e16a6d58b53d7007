"""What a kubeconfig for an existing cluster holds that must not be in plain text."""

from __future__ import annotations

from typing import Any

# Fields of a kubeconfig user that are credentials themselves (client-certificate-data and the file
# paths are not secrets; a client key, a bearer token and a password are).
USER_SECRETS = ("token", "client-key-data", "password")
# An auth provider's config (the legacy gcp/oidc plugins) that carries tokens or a client secret.
AUTH_PROVIDER_SECRETS = ("client-secret", "id-token", "refresh-token", "access-token")


def kubeconfig_credentials(document: dict[str, Any]) -> list[str]:
    """The paths of the credentials in a parsed kubeconfig, e.g. `users[0].user.token`."""
    users = document.get("users")
    found: list[str] = []
    for index, entry in enumerate(users if isinstance(users, list) else []):
        user = entry.get("user") if isinstance(entry, dict) else None
        if not isinstance(user, dict):
            continue
        found += [f"users[{index}].user.{key}" for key in USER_SECRETS if _set(user.get(key))]
        provider = user.get("auth-provider")
        config = provider.get("config") if isinstance(provider, dict) else None
        if isinstance(config, dict):
            found += [
                f"users[{index}].user.auth-provider.config.{key}"
                for key in AUTH_PROVIDER_SECRETS
                if _set(config.get(key))
            ]
    return found


def _set(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())
