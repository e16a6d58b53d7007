"""The render's tree and its outputs say the same thing (issue 26): a team queue without a borrowing
limit may borrow what the rest of its cohort holds, and the tree says that number, as the stack output
`batchQueues` does, instead of "any idle" beside an output of 8."""

import re

from tests.conftest import stack_render
from tools import plan


def test_the_tree_and_the_outputs_give_each_team_the_same_borrowing() -> None:
    document = plan.to_document(stack_render("train"))
    tree = plan.format_tree(document)
    teams = [team for queue in document["outputs"]["batchQueues"] for team in queue["teams"]]
    assert teams, "the train stack has teams"
    for team in teams:
        block = tree.split(f"ClusterQueue {team['clusterQueue']}\n", 1)[1]
        shown = re.search(r"mayBorrowGpus=(\d+)", block.split("\n", 3)[1])
        assert shown and int(shown.group(1)) == team["mayBorrowGpus"], (team, block[:300])
