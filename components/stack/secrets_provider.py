"""The stack files' secrets providers (`secretsprovider:` in `Pulumi.<stack>.yaml`, where Pulumi keeps it):
one Cloud KMS key per stack, so that the identity that previews a stack can decrypt that stack's secrets
and no other's (docs/ci.md, "Secrets per environment"; Pulumi "Secrets": `gcpkms://projects/<p>/
locations/<l>/keyRings/<r>/cryptoKeys/<k>`, `pulumi stack init --secrets-provider`).

What is refused, before anything is rendered: a `gcpkms://` provider that is not a Cloud KMS key, and a
key another stack file of the directory names too. Two stacks on one key cannot be told apart by IAM:
the preview identity that may decrypt the previewed stack's key (a pull request's) could decrypt the
other's, prod's included. Checked where the program reads stack files, the offline render
(tools/offline.py: tools/render.py, and CI's `checks` job, which renders every stack before any
preview runs); under `pulumi preview` the engine decrypts the config before the program starts, so
there the gate is IAM on each key, which the program cannot read (docs/ci.md lists the bindings).
`passphrase` and Pulumi Cloud's own provider are left to the backend (docs/ci.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from .stack_file import StackFile, StackFileError, cut, load_stack_file

GCPKMS = "gcpkms://"
_KEY = re.compile(
    r"gcpkms://projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/locations/[a-z0-9-]{1,40}"
    r"/keyRings/[\w-]{1,63}/cryptoKeys/[\w-]{1,63}"
)
EXAMPLE = "gcpkms://projects/<ci-project>/locations/global/keyRings/gke-gpu/cryptoKeys/<stack>"


def secrets_provider(loaded: StackFile, name: str) -> tuple[str | None, int | None]:
    """A stack file's `secretsprovider` and its line ((None, None) without one); raises StackFileError
    when it is not a string."""
    if "secretsprovider" not in loaded.top_level:
        return None, None
    line, node = loaded.top_level["secretsprovider"]
    if node.kind != "scalar" or node.tag != "tag:yaml.org,2002:str":
        raise StackFileError.at(name, line, "secretsprovider is not a string (e.g. gcpkms://projects/...)")
    return str(node.value), line


def _provider_of(path: Path) -> str | None:
    """Another stack file's provider, or None where it cannot be read (its own render reports that)."""
    try:
        return secrets_provider(load_stack_file(path), path.name)[0]
    except (StackFileError, OSError):
        return None


def check_secrets_provider(stack: str, loaded: StackFile, directory: Path) -> None:
    """Raise StackFileError (naming the file and line) where `loaded`, the stack file of `stack` in
    `directory`, has a secrets provider that is not a string, or shares or misnames a Cloud KMS key."""
    name = f"Pulumi.{stack}.yaml"
    provider, line = secrets_provider(loaded, name)
    if provider is None or not provider.startswith(GCPKMS):
        return
    if not _KEY.fullmatch(provider):
        raise StackFileError.at(
            name, line, f"secretsprovider: {cut(provider)} is not a Cloud KMS key; e.g. {EXAMPLE}"
        )
    for path in sorted(directory.glob("Pulumi.*.yaml")):
        other = path.name[len("Pulumi.") : -len(".yaml")]
        if other == stack:
            continue
        if _provider_of(path) == provider:
            raise StackFileError.at(
                name,
                line,
                f"secretsprovider: {path.name} names the same Cloud KMS key: one key per stack, or the "
                f"identity that may decrypt {other}'s secrets (a pull request's preview, for a stack "
                f"previewed there) decrypts {stack}'s too; create a key for each stack ({EXAMPLE}) and "
                "`pulumi stack change-secrets-provider` (docs/ci.md)",
            )
