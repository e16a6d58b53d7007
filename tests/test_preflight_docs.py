"""The README's and docs/ci.md's API and role lists are generated from the preflight tables
(tools/preflight_docs.py): this fails when a block drifts from what the tables give, so a new
resource type, API or role reaches the docs the day it reaches the render."""

from __future__ import annotations

from tests.conftest import stack_render
from tools import preflight_docs
from tools.offline import stacks
from tools.plan import to_document


def test_the_generated_blocks_match_the_tables() -> None:
    documents = {stack: to_document(stack_render(stack)) for stack in stacks()}
    for path, text in preflight_docs.generated(documents).items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.name} is out of date: run `.venv/bin/python tools/preflight_docs.py --update`"
        )


def test_the_blocks_carry_what_serve_and_prod_need() -> None:
    documents = {stack: to_document(stack_render(stack)) for stack in ("serve", "prod")}
    readme = preflight_docs.readme_apis(documents) + preflight_docs.readme_roles(documents)
    for needed in (
        "artifactregistry.googleapis.com",
        "binaryauthorization.googleapis.com",
        "containerfilesystem.googleapis.com",
        "roles/artifactregistry.admin",
        "roles/storage.legacyBucketOwner` (on the model bucket)",
    ):
        assert needed in readme, needed
    ci = preflight_docs.ci_roles(documents)
    deployer, preview = ci.split('--member="serviceAccount:$PREVIEW_SA"')[0], ci
    assert "roles/artifactregistry.admin" in deployer
    assert "roles/iam.securityReviewer" in preview


def test_a_block_that_is_missing_is_an_error() -> None:
    import pytest

    with pytest.raises(ValueError, match="no <!-- preflight:apis --> block"):
        preflight_docs.rewrite("no markers here", "apis", "x")
    text = "a\n<!-- preflight:apis -->\nold\n<!-- /preflight:apis -->\nb"
    assert (
        preflight_docs.rewrite(text, "apis", "new")
        == "a\n<!-- preflight:apis -->\nnew\n<!-- /preflight:apis -->\nb"
    )
