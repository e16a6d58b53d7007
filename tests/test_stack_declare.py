"""stack/declare.py: a component's failed check is keyed by the stack-file section its call names, for
every component (no table to register it in first)."""

from __future__ import annotations

from gke_gpu.stack.declare import checking_only, declare
from gke_gpu.workloads.training_data import TrainingData


def test_a_failed_check_is_keyed_by_the_section_the_call_names() -> None:
    # TrainingData was in no table of stack/declare.py: a failed check raised KeyError there.
    with checking_only() as (problems, checked):
        declare(TrainingData, "data-x", {"team": 5}, section="batch")
    assert problems
    assert all(p.startswith("gke-gpu:batch: TrainingData 'data-x': ") for p in problems), problems
    assert checked == {}
