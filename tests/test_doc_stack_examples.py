"""Every stack-file example in README.md and docs/ is tested (issue 26): a fenced block that holds
`gke-gpu:` keys says, in an HTML comment on the line before its fence, what it is:

    <!-- stack-example: Pulumi.train.yaml -->   it shows that file: every key and value it shows
                                                 is the file's (a mapping may leave keys out)
    <!-- stack-fragment: Pulumi.serve.yaml -->  its sections, put in place of that file's, render
                                                 offline without a problem
    <!-- stack-fragment: Pulumi.serve.yaml without workloads -->   the same, with the file's
                                                 `gke-gpu:workloads` left out (comma-separated keys)

`<your-bucket>` and other `<...>` placeholders stand for a value of one's own: any value where the
example is compared with its file, `example-<name>` where a fragment is rendered.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.offline import _engine_string, load_stack_config, run_program

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```")
_STACK_KEY = re.compile(r"^\s*gke-gpu:[A-Za-z]+:(\s|$)", re.M)
_MARKER = re.compile(
    r"^<!-- stack-(example|fragment): (Pulumi\.[a-z0-9-]+\.yaml)(?: without ([A-Za-z, ]+))? -->$"
)
_PLACEHOLDER = re.compile(r"<([a-z][a-z0-9-]*)>")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    marker: str  # the comment line before the fence, or ""
    text: str

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def stack_blocks(doc: Path) -> list[Block]:
    """The fenced blocks of `doc` that hold a stack file's `gke-gpu:` keys."""
    lines = doc.read_text(encoding="utf-8").split("\n")
    blocks, i = [], 0
    while i < len(lines):
        if _FENCE.match(lines[i]):
            end = next(j for j in range(i + 1, len(lines)) if _FENCE.match(lines[j]))
            text = "\n".join(lines[i + 1 : end])
            if _STACK_KEY.search(text):
                marker = lines[i - 1].strip() if i else ""
                blocks.append(Block(doc, i + 1, marker, text))
            i = end
        i += 1
    return blocks


BLOCKS = [block for doc in DOCS for block in stack_blocks(doc)]


def sections(block: Block, *, rendered: bool) -> dict[str, Any]:
    text = block.text
    if rendered:
        text = _PLACEHOLDER.sub(lambda m: f"example-{m.group(1)}", text)
    loaded = yaml.safe_load(textwrap.dedent(text))
    assert isinstance(loaded, dict), f"{block.id}: not a mapping of stack keys"
    return loaded


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.id)
def test_every_stack_example_says_what_it_is(block: Block) -> None:
    assert _MARKER.match(block.marker), (
        f"{block.id}: a block of stack keys needs `<!-- stack-example: Pulumi.<stack>.yaml -->` (it shows "
        "that file) or `<!-- stack-fragment: Pulumi.<stack>.yaml -->` (it renders on that file) on the "
        f"line before its fence; found {block.marker!r}"
    )
    assert (ROOT / _MARKER.match(block.marker).group(2)).is_file(), block.marker  # type: ignore[union-attr]


def _differences(shown: Any, actual: Any, path: str) -> list[str]:
    """Where `shown` (the doc) says something `actual` (the file) does not."""
    if isinstance(shown, dict):
        if not isinstance(actual, dict):
            return [f"{path}: the file has {actual!r}"]
        return [
            problem
            for key, value in shown.items()
            for problem in (
                _differences(value, actual[key], f"{path}.{key}")
                if key in actual
                else [f"{path}.{key}: not in the file (the doc shows {value!r})"]
            )
        ]
    if isinstance(shown, list):
        if not isinstance(actual, list) or len(actual) != len(shown):
            return [f"{path}: the doc shows {len(shown)} entries, the file {actual!r}"]
        return [
            p
            for i, (s, a) in enumerate(zip(shown, actual, strict=True))
            for p in _differences(s, a, f"{path}[{i}]")
        ]
    if isinstance(shown, str) and _PLACEHOLDER.search(shown):
        pattern = "".join(
            "[^/]+" if _PLACEHOLDER.fullmatch(part) else re.escape(part)
            for part in re.split(r"(<[^>]+>)", shown)
        )
        return (
            []
            if isinstance(actual, str) and re.fullmatch(pattern, actual)
            else [f"{path}: the file has {actual!r}"]
        )
    return (
        []
        if shown == actual and type(shown) is type(actual)
        else [f"{path}: the doc shows {shown!r}, the file {actual!r}"]
    )


def _file_config(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / name).read_text(encoding="utf-8"))["config"]


EXAMPLES = [b for b in BLOCKS if b.marker.startswith("<!-- stack-example:")]
FRAGMENTS = [b for b in BLOCKS if b.marker.startswith("<!-- stack-fragment:")]


def test_the_docs_hold_stack_examples_of_both_kinds() -> None:
    assert EXAMPLES and FRAGMENTS and len(BLOCKS) >= 8


@pytest.mark.parametrize("block", EXAMPLES, ids=lambda b: b.id)
def test_an_example_of_a_stack_file_is_what_that_file_holds(block: Block) -> None:
    name = _MARKER.match(block.marker).group(2)  # type: ignore[union-attr]
    assert _differences(sections(block, rendered=False), _file_config(name), name) == []


def test_the_comparison_finds_a_key_the_file_does_not_have() -> None:
    shown = {"gke-gpu:batch": {"teams": [{"name": "platform", "namespace": "platform-jobs"}]}}
    actual = {"gke-gpu:batch": {"teams": [{"name": "platform"}]}}
    assert _differences(shown, actual, "f") == [
        "f.gke-gpu:batch.teams[0].namespace: not in the file (the doc shows 'platform-jobs')"
    ]
    assert _differences({"m": "gs://<your-bucket>/x"}, {"m": "gs://b/x"}, "f") == []
    assert _differences({"m": "gs://<your-bucket>/x"}, {"m": "gs://b/y"}, "f") != []


@pytest.mark.parametrize("block", FRAGMENTS, ids=lambda b: b.id)
def test_a_fragment_renders_offline_on_its_stack_file(block: Block) -> None:
    name = _MARKER.match(block.marker).group(2)  # type: ignore[union-attr]
    stack = name.removeprefix("Pulumi.").removesuffix(".yaml")
    config, secret_keys = load_stack_config(stack)
    marker = _MARKER.match(block.marker)
    for key in (marker.group(3) or "").split(","):  # type: ignore[union-attr]
        if key.strip():
            config.pop(f"gke-gpu:{key.strip()}")
    for key, value in sections(block, rendered=True).items():
        config[key] = _engine_string(value)
    result = run_program(config, stack=stack, secret_keys=secret_keys)
    assert result.error is None, f"{block.id}: {result.error}"
