"""Golden plans: each stack's render is committed; any drift fails with the difference."""

from __future__ import annotations

import pytest

from tests.conftest import stack_render
from tools import golden
from tools.golden import GOLDEN_DIR, UPDATE_COMMAND, drift
from tools.offline import stacks


@pytest.fixture(autouse=True)
def _each_stack_rendered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # drift() compares run_stack(stack) with the golden file; stack_render(stack) is that render,
    # made once per test process (other tests render the example stacks too), a copy for each caller.
    monkeypatch.setattr(golden, "run_stack", stack_render)


@pytest.mark.parametrize("stack", stacks())
def test_render_matches_the_golden_plan(stack: str) -> None:
    difference = drift(stack)
    if difference:
        pytest.fail(difference, pytrace=False)


def test_no_golden_plan_without_a_stack() -> None:
    stale = sorted(p.stem for p in GOLDEN_DIR.glob("*.json") if p.stem not in stacks())
    assert not stale, f"golden plans without a Pulumi.<stack>.yaml: {stale}; run `{UPDATE_COMMAND}`"
