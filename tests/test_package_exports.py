"""What `import gke_gpu` offers a program outside this repository: the components, their args, the
error type and the version, from the package itself, without import cycles."""

import inspect
import subprocess
import sys
import tomllib
from pathlib import Path

import pulumi
import pytest
from typing_extensions import is_typeddict

import gke_gpu
from gke_gpu import PUBLIC_COMPONENTS, public_components
from gke_gpu.core.package import PACKAGE, component_type
from gke_gpu.core.validation import InvalidArgsError

ROOT = Path(__file__).resolve().parent.parent


def test_all_names_the_components_their_args_the_error_and_the_version() -> None:
    expected = {"__version__", "InvalidArgsError"}
    for cls in PUBLIC_COMPONENTS:
        expected |= {cls, f"{cls}Args"}
    assert sorted(gke_gpu.__all__) == sorted(expected)


@pytest.mark.parametrize("name", sorted(PUBLIC_COMPONENTS))
def test_each_component_and_its_args_import_from_the_package(name: str) -> None:
    cls = getattr(gke_gpu, name)
    assert issubclass(cls, pulumi.ComponentResource)
    assert cls.__name__ == name, "the provider finds a class by the type token's last part"
    assert cls.__module__ == f"gke_gpu.{PUBLIC_COMPONENTS[name]}"
    # The exported Args is what the constructor takes (the analyzer reads the schema from it).
    args = getattr(gke_gpu, f"{name}Args")
    assert inspect.signature(cls.__init__).parameters["args"].annotation is args
    assert is_typeddict(args), f"{name}Args must be a TypedDict: the provider passes a dict"


def test_public_components_are_the_listed_classes_in_order() -> None:
    classes = public_components()
    assert [c.__name__ for c in classes] == list(PUBLIC_COMPONENTS)
    assert [c for c in classes] == [getattr(gke_gpu, n) for n in PUBLIC_COMPONENTS]
    assert component_type("GpuNodePool") == f"{PACKAGE}:index:GpuNodePool"


def test_the_error_type_is_the_one_components_raise() -> None:
    assert gke_gpu.InvalidArgsError is InvalidArgsError
    assert issubclass(InvalidArgsError, ValueError)


def test_the_version_is_the_installed_distributions_and_pyprojects() -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        declared = tomllib.load(f)["project"]["version"]
    assert gke_gpu.__version__ == declared, (
        "the installed gke-gpu metadata is stale: .venv/bin/pip install -e . (after a version bump)"
    )


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = gke_gpu.Nope


def _fresh_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_fresh_interpreter_reads_config_without_the_cloud_sdks_then_imports_every_name() -> None:
    # One interpreter for both (each costs seconds): the exports are lazy, so the stack-file reader
    # does not pay for pulumi_gcp and pulumi_kubernetes; then the first import of every public name
    # in the process finds no cycle between __init__ and the component modules.
    names = ", ".join(gke_gpu.__all__)
    out = _fresh_python(
        "import sys, gke_gpu.stack.config; "
        "print(sorted(m for m in ('pulumi_gcp', 'pulumi_kubernetes') if m in sys.modules)); "
        f"from gke_gpu import {names}; print(GpuNodePool.__name__, __version__)"
    )
    assert out.splitlines() == ["[]", f"GpuNodePool {gke_gpu.__version__}"]
