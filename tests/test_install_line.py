"""The library's install line works as written (issue 26): docs/library.md installs a ref the repository
holds on a clean clone of main, and the consumer check (tools/consumer_check.py, run by .ci/run) installs
that very line, not a private one."""

import re
import subprocess
import tomllib
from pathlib import Path

from tools import consumer_check

ROOT = Path(__file__).resolve().parent.parent


def test_the_documented_install_line_names_a_ref_a_clone_of_main_holds() -> None:
    line = consumer_check.documented_requirement()
    ref = line.rsplit("@", 1)[1]
    # main is the default branch; a tag would have to exist in the repository (it is not pushed by a
    # commit), and a commit hash must be one of main's. A release tag is the lead's to create.
    if ref != "main":
        assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{line}: pin main or a full commit hash"
        subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", ref, "HEAD"], check=True)


def test_the_consumer_check_installs_the_documented_line_with_only_the_host_replaced() -> None:
    documented = consumer_check.documented_requirement()
    clone = Path("/tmp/work/gke-gpu")
    local = consumer_check.local_requirement(documented, clone)
    assert local == documented.replace("https://<your-git-host>/gke-gpu", "file://localhost/tmp/work/gke-gpu")
    assert local.startswith("gke-gpu @ git+file://localhost/tmp/work/gke-gpu@")
    source = Path(consumer_check.__file__).read_text(encoding="utf-8")
    assert "local_requirement(documented_requirement(" in source
    assert "@v{version}" not in source, "the consumer check must not install a private form"


def test_every_install_line_in_the_docs_is_the_documented_one() -> None:
    documented = consumer_check.documented_requirement()
    for doc in [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for line in re.findall(r"gke-gpu @ git\+[^\s\"'`]+", doc.read_text(encoding="utf-8")):
            if "<your-git-host>" in line:
                assert line == documented, f"{doc.name}: {line}"


def test_the_changelog_and_pyproject_name_the_same_version() -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        version = tomllib.load(f)["project"]["version"]
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    first = re.search(r"^## \[([^\]]+)\]", changelog, re.M)
    assert first and first.group(1) == version, (first and first.group(1), version)
