"""The JSON copies of the data files (core/data.py): current, and the same documents as the YAML."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gke_gpu.core.catalog import _parse
from gke_gpu.core.data import DATA_DIR, JSON_COPIES, json_copy_path, load_data, load_yaml, parse_json_copy
from tools import data_json


@pytest.mark.parametrize("name", JSON_COPIES)
def test_each_json_copy_is_current_and_gives_the_yaml_document(name: str) -> None:
    path = DATA_DIR / name
    written = json_copy_path(path).read_text(encoding="utf-8")
    assert written == data_json.json_copy(path), f"stale: run tools/data_json.py ({name})"
    assert parse_json_copy(written)["data"] == load_yaml(path)
    assert load_data(path) == load_yaml(path)


def test_the_catalog_is_the_same_read_from_either() -> None:
    path = DATA_DIR / "accelerators.yaml"
    assert _parse(load_data(path)) == _parse(load_yaml(path))


def test_an_edited_yaml_is_read_itself_not_its_stale_copy(tmp_path: Path) -> None:
    source = DATA_DIR / "boot_disks.yaml"
    path = tmp_path / source.name
    shutil.copy(source, path)
    shutil.copy(json_copy_path(source), json_copy_path(path))
    assert load_data(path) == load_yaml(source)
    path.write_text(source.read_text(encoding="utf-8") + "extra: 1\n", encoding="utf-8")
    assert load_data(path) == {**load_yaml(source), "extra": 1}


def test_the_check_passes_on_the_committed_copies() -> None:
    assert data_json.main(["--check"]) == 0
