"""The stack-file loader: every unreadable file is one `Pulumi.<stack>.yaml:LINE: ...` error (exit 2
from the render), valid files read as the Pulumi engine reads them, and decode_config_value is
json.loads with bounds."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import pytest
import yaml

from gke_gpu.stack.config_value import decode_config_value
from gke_gpu.stack.stack_file import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_NODES,
    MAX_VALUE_CHARS,
    SECRET_NOT_DECRYPTED,
    StackFileError,
    load_stack_file,
    parse_stack_text,
)
from tests.hang_guard import no_hang
from tools import render
from tools.offline import ROOT, stacks

HEAD = "config:\n  gcp:project: test-project\n  gcp:region: us-central1\n"


def laughs(levels: int = 9, width: int = 9) -> str:
    lines = ["config:", "  gke-gpu:a0: &a0 [lol]"]
    for i in range(1, levels + 1):
        lines.append(f"  gke-gpu:a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


# name -> (file content, line of the error, text the message must contain)
BAD: dict[str, tuple[str | bytes, int, str]] = {
    "syntax": (
        HEAD + "  gke-gpu:cluster: [unclosed\n",
        5,
        "YAML syntax: while parsing a flow sequence (line 4)",
    ),
    "tab": ("config:\n\tgcp:project: p\n", 2, "a tab character where YAML expects spaces"),
    "not-utf8": (b"config:\n  gcp:project: caf\xe9\n", 2, "byte 0xe9 at column 19 is not UTF-8"),
    "control-char": (
        "config:\n  gcp:project: a\x07b\n",
        2,
        "the character '\\x07' (U+0007) is not allowed in YAML",
    ),
    "document-list": ("- config\n", 1, "the document is a list; a stack file is a map with a `config:` key"),
    "document-scalar": ("just text\n", 1, "the document is the scalar 'just text'"),
    "unknown-top-key": (
        "confg:\n  gcp:project: p\n",
        1,
        "unknown top-level key 'confg'; a stack file has: config,",
    ),
    "config-list": ("config:\n  - gcp:project\n", 2, "config is a list; it must be a map"),
    "config-scalar": ("config: 3\n", 1, "config is the scalar '3'; it must be a map"),
    "two-documents": (HEAD + "---\nconfig: {}\n", 4, "a second YAML document (after ---)"),
    "no-namespace": (
        HEAD + "  monitoring: {dcgm: none}\n",
        4,
        "config key 'monitoring' is not `<namespace>:<name>`",
    ),
    "int-key": (
        HEAD + "  gke-gpu:monitoring: {1: x}\n",
        4,
        "a key of gke-gpu:monitoring: '1' is a number, not a string",
    ),
    "bool-key": (
        HEAD + "  gke-gpu:cluster:\n    yes: 1\n",
        5,
        "'yes' is a boolean, not a string; keys must be strings",
    ),
    "null-key": ("config:\n  ~: x\n", 2, "a key of config: '~' is null, not a string"),
    "list-key": ("config:\n  ? [a, b]\n  : x\n", 2, "a key of config is a list; keys must be strings"),
    "duplicate-top": (HEAD + "  gcp:region: europe-west4\n", 4, "gcp:region is set twice (first on line 3)"),
    "duplicate-nested": (
        HEAD + "  gke-gpu:cluster:\n    mode: standard\n    name: a\n    mode: autopilot\n",
        7,
        "gke-gpu:cluster.mode is set twice (first on line 5); the Pulumi engine refuses duplicate keys",
    ),
    "date": (
        HEAD + "  gke-gpu:cluster: {name: 2024-01-01}\n",
        4,
        "gke-gpu:cluster.name: '2024-01-01' is a date or time",
    ),
    "binary": (HEAD + "  gke-gpu:cluster: {name: !!binary aGk=}\n", 4, "'aGk=' is binary data (!!binary)"),
    "set": (HEAD + "  gke-gpu:gpuNodes: !!set {a, b}\n", 4, "gke-gpu:gpuNodes: a set (!!set)"),
    "omap": (HEAD + "  gke-gpu:cluster: !!omap [{mode: standard}]\n", 4, "an ordered map (!!omap)"),
    "python-tag": (
        HEAD + "  gke-gpu:cluster: {mode: !!python/name:os.system x}\n",
        4,
        "tagged !!python/name:os.system",
    ),
    "custom-tag": (HEAD + "  gcp:zone: !Ref zone\n", 4, "gcp:zone: 'zone' is a value tagged !Ref"),
    "nan": (HEAD + "  gke-gpu:cluster: {name: .nan}\n", 4, "'.nan' is not a finite number"),
    "huge-int": (HEAD + "  gke-gpu:cluster: {name: " + "9" * 5000 + "}\n", 4, "an integer beyond 64 bits"),
    "int-over-64-bits": (HEAD + f"  gke-gpu:cluster: {{name: {2**64}}}\n", 4, "an integer beyond 64 bits"),
    "deep": (
        HEAD + "  gke-gpu:cluster: " + "[" * 400 + "]" * 400 + "\n",
        4,
        f"nested deeper than {MAX_DEPTH} levels",
    ),
    "very-deep": (HEAD + "  gke-gpu:cluster: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", 4, "nested deeper"),
    "alias-bomb": (
        laughs(),
        6,
        f"more than {MAX_NODES:,} values (an alias counts as every value it repeats)",
    ),
    "alias-chars": (
        "config:\n  gke-gpu:a: &s " + "x" * 500_000 + "\n  gke-gpu:b: [" + ", ".join(["*s"] * 10) + "]\n",
        3,
        "makes the file's values exceed 4,194,304 characters",
    ),
    "alias-recursive": (HEAD + "  gke-gpu:cluster: &a [*a]\n", 4, "alias *a is used inside its own anchor"),
    "alias-undefined": (
        HEAD + "  gke-gpu:cluster: *nowhere\n",
        4,
        "alias *nowhere has no anchor &nowhere before it",
    ),
    "alias-deep": (
        HEAD
        + "  gke-gpu:a: &a "
        + "[" * 20
        + "]" * 20
        + "\n  gke-gpu:b: "
        + "[" * 20
        + "*a"
        + "]" * 20
        + "\n",
        5,
        f"nested deeper than {MAX_DEPTH} levels",
    ),
    "odd-key-in-path": (
        HEAD + "  gke-gpu:cluster: {'a b': {'': 2024-01-01}}\n",
        4,
        "gke-gpu:cluster.'a b'.'': '2024-01-01'",
    ),
    "merge-not-a-map": (
        HEAD + "  gke-gpu:cluster: {<<: [1, 2]}\n",
        4,
        "a merge key (<<) takes a map or a list of maps",
    ),
}


def _write(directory: Path, name: str, content: str | bytes) -> Path:
    path = directory / f"Pulumi.{name}.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_each_kind_of_bad_file_is_one_error_with_file_and_line(tmp_path: Path, case: str) -> None:
    content, line, expected = BAD[case]
    path = _write(tmp_path, case, content)
    with no_hang(), pytest.raises(StackFileError) as info:
        load_stack_file(path)
    message = str(info.value)
    assert message.startswith(f"Pulumi.{case}.yaml:{line}: "), message
    assert expected in message, message
    assert (info.value.path, info.value.line) == (path.name, line)
    assert len(message) < 400, "values are cut, not dumped"


@pytest.mark.parametrize("case", ["tab", "duplicate-top", "alias-bomb", "very-deep", "not-utf8", "set"])
def test_render_exits_2_with_the_loader_message(tmp_path: Path, capsys, case: str) -> None:
    content, line, expected = BAD[case]
    _write(tmp_path, case, content)
    assert render.main(["--stack", case, "--stack-dir", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: Pulumi.{case}.yaml:{line}: ")
    assert expected in captured.err
    assert captured.out == ""


def test_a_file_over_the_size_bound_names_the_line_where_it_passes_it(tmp_path: Path) -> None:
    line = "# " + "x" * 98 + "\n"  # 101 bytes
    path = _write(tmp_path, "big", "config:\n" + line * (MAX_FILE_BYTES // len(line) + 10))
    with pytest.raises(StackFileError) as info:
        load_stack_file(path)
    expected_line = MAX_FILE_BYTES // len(line) + 1 + 1  # "config:" + the full comment lines before it
    assert str(info.value).startswith(f"Pulumi.big.yaml:{expected_line}: the file passes 1,048,576 bytes")
    assert "a stack file may have at most 1,048,576" in str(info.value)


def test_a_file_that_cannot_be_read_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.dir.yaml").mkdir()
    with pytest.raises(StackFileError) as info:
        load_stack_file(tmp_path / "Pulumi.dir.yaml")
    assert str(info.value).startswith("Pulumi.dir.yaml: cannot be read: ")
    with pytest.raises(FileNotFoundError):
        load_stack_file(tmp_path / "Pulumi.absent.yaml")


# -- valid files read as the engine reads them -------------------------------------------------------


def _pyyaml_reading(path: Path) -> dict[str, str]:
    """What the loader did before (PyYAML): the reference for files without the hazards."""
    config = yaml.safe_load(path.read_text(encoding="utf-8"))["config"]
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


@pytest.mark.parametrize("stack", stacks())
def test_the_repository_stacks_read_as_before(stack: str) -> None:
    path = ROOT / f"Pulumi.{stack}.yaml"
    loaded = load_stack_file(path)
    before = _pyyaml_reading(path)
    assert set(loaded.config) == set(before)
    for key, text in loaded.config.items():
        if key in loaded.secret_keys:
            assert SECRET_NOT_DECRYPTED in text
        else:
            assert text == before[key], key


def test_scalars_keep_their_text_and_objects_become_json() -> None:
    loaded = parse_stack_text(
        "config:\n  gcp:project: 0x10\n  gcp:zone: True\n  gcp:x: ~\n  gcp:y:\n  gcp:z: '007'\n"
        "  gke-gpu:cluster: {mode: standard, maxNodes: 0x10, spot: yes, name: null, f: 1.5}\n",
        "Pulumi.t.yaml",
    )
    assert loaded.config["gcp:project"] == "0x10"  # the engine passes a scalar as written
    assert loaded.config["gcp:zone"] == "True"
    assert loaded.config["gcp:x"] == loaded.config["gcp:y"] == ""
    assert loaded.config["gcp:z"] == "007"
    assert json.loads(loaded.config["gke-gpu:cluster"]) == {
        "mode": "standard",
        "maxNodes": 16,
        "spot": True,
        "name": None,
        "f": 1.5,
    }
    assert loaded.secret_keys == []


def test_secure_values_are_placeholders_and_marked_secret() -> None:
    loaded = parse_stack_text(
        "config:\n  gcp:credentials: {secure: AAABAC}\n"
        "  gke-gpu:cluster: {mode: existing, kubeconfig: {secure: AAAB}}\n"
        "  gke-gpu:network: {secure: 1}\n",
        "Pulumi.t.yaml",
    )
    assert loaded.config["gcp:credentials"] == SECRET_NOT_DECRYPTED
    assert json.loads(loaded.config["gke-gpu:cluster"]) == {
        "mode": "existing",
        "kubeconfig": SECRET_NOT_DECRYPTED,
    }
    assert loaded.secret_keys == ["gcp:credentials", "gke-gpu:cluster"]
    # Only a string is a ciphertext (as in the engine): {secure: 1} is an ordinary object.
    assert json.loads(loaded.config["gke-gpu:network"]) == {"secure": 1}


def test_anchors_aliases_and_merge_keys_within_bounds() -> None:
    loaded = parse_stack_text(
        "config:\n"
        "  gke-gpu:network: &net {subnetCidr: 10.0.0.0/20}\n"
        "  gke-gpu:gpuPools:\n"
        "    - &pool {name: a, accelerator: nvidia-l4, maxNodes: 2}\n"
        "    - {<<: *pool, name: b}\n"
        "    - {<<: [*pool, *net], maxNodes: 3}\n"
        "  gke-gpu:monitoring: {'<<': quoted}\n",
        "Pulumi.t.yaml",
    )
    pools = json.loads(loaded.config["gke-gpu:gpuPools"])
    assert pools[1] == {"name": "b", "accelerator": "nvidia-l4", "maxNodes": 2}
    assert pools[2] == {"name": "a", "accelerator": "nvidia-l4", "maxNodes": 3, "subnetCidr": "10.0.0.0/20"}
    assert json.loads(loaded.config["gke-gpu:monitoring"]) == {"<<": "quoted"}  # a quoted << is a key


def test_empty_files_and_an_environment_block() -> None:
    assert parse_stack_text("", "Pulumi.t.yaml").config == {}
    assert parse_stack_text("config:\n", "Pulumi.t.yaml").config == {}
    loaded = parse_stack_text("environment: [my-env]\nencryptionsalt: abc\nconfig: {gcp:project: p}\n", "P")
    assert loaded.config == {"gcp:project": "p"}
    assert loaded.notes and "not read offline" in loaded.notes[0]


def test_a_legitimate_anchor_reused_many_times_is_fine_until_the_bound() -> None:
    items = ", ".join(["*z"] * 200)
    loaded = parse_stack_text(f"config:\n  gke-gpu:a: &z [1, 2, 3]\n  gke-gpu:b: [{items}]\n", "P")
    assert len(json.loads(loaded.config["gke-gpu:b"])) == 200


# -- decode_config_value ------------------------------------------------------------------------------

VALID = [
    '{"mode": "standard"}',
    '[1, 2.5, true, null, "x"]',
    "12",
    "-0.5e3",
    "true",
    "null",
    '"quoted"',
    "plain text",
    "",
    "[unclosed",
    "{not json}",
    "NaN",
    "Infinity",
    json.dumps([[[[1]]]]),
    "[" * MAX_DEPTH + "]" * MAX_DEPTH,
]


@pytest.mark.parametrize("text", VALID)
def test_decode_is_json_loads_or_the_string(text: str) -> None:
    try:
        expected = json.loads(text)
    except json.JSONDecodeError:
        expected = text
    value = decode_config_value("gke-gpu:cluster", text)
    assert json.dumps(value) == json.dumps(expected)
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested deeper than {MAX_DEPTH} levels"),
        ('{"a": ' * 5000 + "1" + "}" * 5000, f"nested deeper than {MAX_DEPTH} levels"),
        ("[" * 100_000, f"nested deeper than {MAX_DEPTH} levels"),
        ("9" * 5000, "not a value the program can read"),
        ('"' + "x" * MAX_VALUE_CHARS + '"', f"at most {MAX_VALUE_CHARS:,}"),
    ],
    ids=["deep", "deep-objects", "unclosed-deep", "digits", "large"],
)
def test_decode_refuses_values_over_the_bounds_naming_the_key(text: str, expected: str) -> None:
    with pytest.raises(StackFileError) as info:
        decode_config_value("gke-gpu:cluster", text)
    message = str(info.value)
    assert message.startswith("gke-gpu:cluster: ")
    assert expected in message
    assert len(message) < 400


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    text = json.dumps({"name": "[" * 100})
    assert decode_config_value("k", text) == {"name": "[" * 100}
    assert re.fullmatch(r"\[+", decode_config_value("k", text)["name"])


@pytest.mark.parametrize(
    "text",
    ['"' + '\\"' * 500_000, '"' * 1_000_000, '["' * 300_000, "a" * MAX_VALUE_CHARS],
    ids=["escaped-quotes", "quotes", "open-strings", "plain"],
)
def test_decode_takes_linear_time_on_a_value_at_the_size_bound(text: str) -> None:
    # A quadratic scan takes hours on this value.
    with no_hang(), contextlib.suppress(StackFileError):
        decode_config_value("k", text)


def test_a_file_at_the_size_bound_loads_in_bounded_time() -> None:
    text = "config:\n  gcp:project: |\n" + "    line of text\n" * ((MAX_FILE_BYTES - 100) // 17)
    with no_hang():
        loaded = parse_stack_text(text, "Pulumi.t.yaml")
    assert loaded.config["gcp:project"].count("\n") == (MAX_FILE_BYTES - 100) // 17
