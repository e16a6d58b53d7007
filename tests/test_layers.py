"""The package's layers (docs/architecture.md): core <- domain packages <- stack <- __main__.py and tools/.

Every import in every module of the library, top-level or inside a function, is read from its source
(ast), so a lazy import cannot hide a violation; nor can a dynamic one: `importlib.import_module` and
`__import__` of a "gke_gpu..." string or f-string count too (an f-string's open part may be any module).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "components"
DOMAINS = (
    "gpu",
    "cluster",
    "network",
    "gpudirect",
    "monitoring",
    "workloads",
    "serving",
    "dra",
    "fleet",
    "project",
)
MAX_LINES = 500  # "no module over about 500 lines": the longest today is well under it


def _module_name(path: Path) -> str:
    parts = path.relative_to(LIBRARY).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("gke_gpu", *parts))


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The module's syntax tree, parsed once per test process (the walks here only read it)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _imports(path: Path, *, at_import: bool = False, runtime: bool = False) -> set[str]:
    """The gke_gpu modules (or packages) `path` imports, as absolute names: every import, with
    `at_import` those that run when the module is imported (not in a function, not for type checkers),
    with `runtime` those that run at all (in a function too, not for type checkers)."""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    tree = _tree(path)
    found: set[str] = set()
    nodes = _run_at_import(tree.body) if at_import else _run_ever(tree) if runtime else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Call):
            found.update(_dynamic_import(node, _module_name(path), ".".join(package)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names = [module] + [f"{module}.{alias.name}" for alias in node.names]
            found.update(name for name in names if name.startswith("gke_gpu"))
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("gke_gpu"))
    return found


def _run_ever(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of `tree` but those under `if TYPE_CHECKING:` (what only a type checker reads)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for other in node.orelse:
                yield other
                yield from _run_ever(other)
            continue
        yield node
        yield from _run_ever(node)


def _run_at_import(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The statements (and their calls) a module runs when imported: its body, into `if`, `try`,
    `with` and class bodies, but not into functions or `if TYPE_CHECKING:`."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _run_at_import(node.orelse)
            continue
        yield node
        nested = [getattr(node, field, []) for field in ("body", "orelse", "finalbody")]
        nested += [handler.body for handler in getattr(node, "handlers", [])]
        for inner in nested:
            yield from _run_at_import(inner)
        if not hasattr(node, "body"):  # a simple statement: its calls (import_module, __import__)
            yield from (n for n in ast.walk(node) if isinstance(n, ast.Call))


ANY = "*"  # the open part of an f-string: any module


def _dynamic_import(call: ast.Call, module: str, package: str) -> set[str]:
    """The gke_gpu module an `importlib.import_module(...)` or `__import__(...)` call names, as far as
    its source says: a string, or an f-string up to its first open part (`f"gke_gpu.{name}"` is
    `gke_gpu.*`); relative to `__name__` or `__package__` where it passes one."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if called not in ("import_module", "__import__") or not call.args:
        return set()
    first = call.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        name = first.value
    elif isinstance(first, ast.JoinedStr):
        fixed = next(iter(first.values), None)
        start = fixed.value if isinstance(fixed, ast.Constant) and isinstance(fixed.value, str) else ""
        name = start + ANY
    else:
        return set()
    if called == "import_module" and name.startswith("."):
        anchor = call.args[1] if len(call.args) > 1 else None
        base = {"__name__": module, "__package__": package}.get(
            anchor.id if isinstance(anchor, ast.Name) else ""
        )
        if base is None:
            return set()
        level = len(name) - len(name.lstrip("."))
        name = ".".join([*base.split(".")[: len(base.split(".")) - level + 1], name[level:]])
    return {name} if name.startswith("gke_gpu") else set()


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


MODULES = sorted(LIBRARY.rglob("*.py"))


def test_the_library_has_the_layered_packages() -> None:
    packages = {p.parent.name for p in LIBRARY.glob("*/__init__.py")}
    assert packages == {"core", "stack", *DOMAINS}
    flat = sorted(p.name for p in LIBRARY.glob("*.py") if p.name != "__init__.py")
    assert flat == [], f"modules belong in a layer's package: {flat}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(LIBRARY)))
def test_no_layer_imports_one_above_it(path: Path) -> None:
    layer = _layer(_module_name(path))
    imported = {_layer(name) for name in _imports(path)} - {None, layer}
    if layer == "core":
        assert not imported, f"core imports {sorted(imported)} ({ANY}: any): core is the bottom layer"
    elif layer in DOMAINS:
        assert not imported & {"stack", ANY}, "a domain package never imports the stack layer"


# The domains' order (docs/architecture.md, "The layers"): the domains each domain imports, besides
# core. Any other edge fails, and so does one listed here that no import makes any more, so the table
# is the order as it is. Read from the top, a domain imports only domains above it: no circle.
DOMAIN_EDGES: dict[str, set[str]] = {
    "cluster": set(),
    "network": {"cluster"},
    "gpudirect": {"network"},
    "gpu": {"cluster", "gpudirect"},
    "dra": {"gpu", "gpudirect"},
    "monitoring": {"cluster", "gpu"},
    "serving": {"cluster", "dra", "gpu", "gpudirect"},
    "workloads": {"cluster", "dra", "gpu", "gpudirect", "serving"},
    "fleet": {"cluster", "gpu", "monitoring", "network", "serving", "workloads"},
    "project": set(),
}


def _domain_edges() -> dict[str, set[str]]:
    """Each domain's imports of other domains, as its modules' source says (every import)."""
    edges: dict[str, set[str]] = {domain: set() for domain in DOMAINS}
    for path in MODULES:
        layer = _layer(_module_name(path))
        if layer in DOMAINS:
            edges[layer] |= {_layer(name) for name in _imports(path)} & set(DOMAINS) - {layer}
    return edges


def test_the_domains_import_each_other_only_along_the_table() -> None:
    measured = _domain_edges()
    extra = {domain: sorted(measured[domain] - allowed) for domain, allowed in DOMAIN_EDGES.items()}
    stale = {domain: sorted(allowed - measured[domain]) for domain, allowed in DOMAIN_EDGES.items()}
    assert set(DOMAIN_EDGES) == set(DOMAINS)
    assert {d: e for d, e in extra.items() if e} == {}, "imports outside the domains' order"
    assert {d: e for d, e in stale.items() if e} == {}, "edges the table lists that no import makes"


def test_the_domain_table_is_an_order() -> None:
    """Listed from the top, each domain imports only domains listed before it."""
    seen: set[str] = set()
    for domain, imported in DOMAIN_EDGES.items():
        assert imported <= seen, f"{domain} imports {sorted(imported - seen)}, listed after it"
        seen.add(domain)


def _runtime_imports(path: Path) -> set[str]:
    """The library modules `path` imports when it runs (at import or in a function), not for type
    checkers (`if TYPE_CHECKING:`), each name cut to the module that defines it."""
    modules = {_module_name(p) for p in MODULES}
    found = set()
    for name in _imports(path, runtime=True):
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found


def _import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of `graph` with more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    circles.append(sorted(part))
    return circles


def test_no_import_circle_anywhere() -> None:
    """No module imports, through others, a module that imports it: counting imports in functions too
    (a lazy import hides a circle from Python, not from a reader), but not those for type checkers.
    Packages' `__init__.py` are left out: the library's top imports its public components on use."""
    modules = {_module_name(p): p for p in MODULES if p.name != "__init__.py"}
    graph = {name: _runtime_imports(path) & set(modules) - {name} for name, path in modules.items()}
    assert _import_circles(graph) == []


def test_the_circle_walk_sees_a_circle() -> None:
    assert _import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _import_circles({"a": {"b"}, "b": set()}) == []


# The size rule holds beyond the library: the program, the tools, the policy pack and the provider.
SIZED = sorted(
    {
        *MODULES,
        ROOT / "__main__.py",
        *(ROOT / "tools").glob("*.py"),
        *(p for p in (ROOT / "policy").rglob("*.py") if "tests" not in p.parts),
        *(ROOT / "provider").rglob("*.py"),
    }
)


@pytest.mark.parametrize("path", SIZED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_about_500_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{lines} lines: split it by what it owns"


def test_the_import_walk_sees_a_violation(tmp_path: Path) -> None:
    """The walk itself: a relative import of the stack layer from a domain module, inside a function."""
    domain = tmp_path / "gpu"
    domain.mkdir()
    module = domain / "bad.py"
    module.write_text("def f():\n    from ..stack.config import load_settings\n")
    global LIBRARY
    saved, LIBRARY = LIBRARY, tmp_path
    try:
        assert "gke_gpu.stack.config" in _imports(module)
        assert _layer("gke_gpu.stack.config") == "stack"
    finally:
        LIBRARY = saved


def test_the_import_walk_sees_a_dynamic_import(tmp_path: Path) -> None:
    """importlib.import_module and __import__ of a gke_gpu name: a string, an f-string, a relative name."""
    core = tmp_path / "core"
    core.mkdir()
    module = core / "bad.py"
    module.write_text(
        "import importlib\n"
        "def f(name):\n"
        "    importlib.import_module(f'gke_gpu.{name}')\n"
        "    importlib.import_module(f'gke_gpu.stack.{name}')\n"
        "    __import__('gke_gpu.gpu.pool')\n"
        "    importlib.import_module('..serving.model', __package__)\n"
        "    importlib.import_module(name)\n"
        "    importlib.import_module('json')\n"
    )
    global LIBRARY
    saved, LIBRARY = LIBRARY, tmp_path
    try:
        found = _imports(module)
        assert found == {"gke_gpu.*", "gke_gpu.stack.*", "gke_gpu.gpu.pool", "gke_gpu.serving.model"}
        assert {_layer(name) for name in found} == {ANY, "stack", "gpu", "serving"}
    finally:
        LIBRARY = saved


def test_every_sub_package_is_in_the_distribution() -> None:
    """pyproject.toml lists the packages the wheel ships: a sub-package left out would be missing for
    every consumer (`pip install gke-gpu`) while the editable install here still finds it."""
    import tomllib

    listed = tomllib.loads((LIBRARY.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]["packages"]
    on_disk = ["gke_gpu", *(f"gke_gpu.{p.parent.name}" for p in LIBRARY.glob("*/__init__.py"))]
    assert sorted(listed) == sorted(on_disk)


def _deepest_import_chain() -> tuple[str, ...]:
    """The longest chain of library modules each importing the next when imported (packages'
    `__init__.py` left out: they only re-export). The imports that run at import time form no cycle."""
    modules = {_module_name(p): p for p in MODULES if p.name != "__init__.py"}
    graph = {
        name: sorted(set(modules) & _imports(path, at_import=True) - {name}) for name, path in modules.items()
    }

    @functools.cache
    def longest(name: str) -> tuple[str, ...]:
        return max(((name, *longest(m)) for m in graph[name]), key=len, default=(name,))

    return max((longest(name) for name in sorted(graph)), key=len)


def test_the_documented_deepest_import_chain_is_the_measured_one() -> None:
    chain = _deepest_import_chain()
    text = " ".join((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").split())
    documented = re.search(r"The deepest import chain is (\d+) modules \((.*?)\)", text)
    assert documented, "docs/architecture.md names the deepest import chain"
    names = tuple(n.strip("` ") for n in documented.group(2).split("→"))
    assert (int(documented.group(1)), names) == (len(chain), tuple(n.removeprefix("gke_gpu.") for n in chain))


def test_the_documented_module_counts_are_the_packages_own() -> None:
    # docs/architecture.md's table: "| `<package>` | <modules besides __init__.py> | ... |".
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    documented = {name: int(count) for name, count in re.findall(r"^\| `(\w+)` \| (\d+) \|", text, re.M)}
    actual = {
        package.name: len([p for p in package.glob("*.py") if p.name != "__init__.py"])
        for package in sorted(LIBRARY.iterdir())
        if (package / "__init__.py").is_file()
    }
    assert documented == actual
