"""Each stack's secrets under its own Cloud KMS key (components/stack/secrets_provider.py): a stack file
whose `secretsprovider` is another stack file's key, or no Cloud KMS key at all, is refused with the file
and line before anything is rendered; the repository's own stack files pass."""

from pathlib import Path

import pytest

from gke_gpu.stack.stack_file import StackFileError
from tools.offline import ROOT, load_stack_config, stacks

KEY = "gcpkms://projects/example-ci/locations/global/keyRings/gke-gpu/cryptoKeys"
CONFIG = "config:\n  gcp:project: example-gpu-dev\n"


def write(directory: Path, stack: str, provider: str | None) -> None:
    head = f"secretsprovider: {provider}\nencryptedkey: Q2lRQQ==\n" if provider else ""
    (directory / f"Pulumi.{stack}.yaml").write_text(head + CONFIG)


def test_a_key_two_stacks_share_is_refused_naming_both(tmp_path: Path) -> None:
    write(tmp_path, "dev", f"{KEY}/shared")
    write(tmp_path, "prod", f"{KEY}/shared")
    with pytest.raises(StackFileError) as info:
        load_stack_config("prod", tmp_path)
    message = str(info.value)
    assert message.startswith(
        "Pulumi.prod.yaml:1: secretsprovider: Pulumi.dev.yaml names the same Cloud KMS key"
    )
    assert "decrypts prod's too" in message


def test_a_key_per_stack_passes(tmp_path: Path) -> None:
    write(tmp_path, "dev", f"{KEY}/dev")
    write(tmp_path, "prod", f"{KEY}/prod")
    write(tmp_path, "serve", "passphrase")
    for stack in ("dev", "prod", "serve"):
        assert load_stack_config(stack, tmp_path)[0]["gcp:project"] == "example-gpu-dev"


@pytest.mark.parametrize(
    "provider",
    ["gcpkms://projects/p", f"{KEY}/k?extra=1", "gcpkms://projects/X/locations/l/keyRings/r/cryptoKeys/k"],
)
def test_a_gcpkms_provider_that_is_no_key_is_refused(tmp_path: Path, provider: str) -> None:
    write(tmp_path, "dev", provider)
    with pytest.raises(StackFileError) as info:
        load_stack_config("dev", tmp_path)
    assert "Pulumi.dev.yaml:1: secretsprovider: " in str(info.value)
    assert "is not a Cloud KMS key; e.g. gcpkms://projects/<ci-project>/" in str(info.value)


def test_a_secrets_provider_that_is_not_a_string_is_refused(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.dev.yaml").write_text("secretsprovider: [a]\n" + CONFIG)
    with pytest.raises(StackFileError, match=r"Pulumi\.dev\.yaml:1: secretsprovider is not a string"):
        load_stack_config("dev", tmp_path)


def test_an_unreadable_other_stack_file_is_its_own_renders_problem(tmp_path: Path) -> None:
    write(tmp_path, "dev", f"{KEY}/dev")
    (tmp_path / "Pulumi.broken.yaml").write_text("config: [\n")
    assert load_stack_config("dev", tmp_path)[0]


def test_the_repositorys_stack_files_pass() -> None:
    for stack in stacks(ROOT):
        load_stack_config(stack, ROOT)
