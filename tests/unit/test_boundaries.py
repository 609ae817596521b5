"""The layers' boundaries (docs/architecture.md), read from every module's own imports — at the
top or inside a function alike: only bsdemo/engine imports torch; only bsdemo/ui, the pages and
app.py import streamlit; the pure layers import neither, directly or through another module."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


# a worker's entry point, run in a process of its own (a spawned child; a cluster's worker
# actor): its imports run there, not in the server's process
SPAWNED = {"bsdemo.scheduler.pool": "_worker_main", "bsdemo.cluster.workers": "_lab_loop"}


def imports(path: Path, skip: str | None = None) -> set[str]:
    """Every module name `path` imports, anywhere in it but the function named `skip`."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == skip:
            node.body = []
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def modules() -> dict[str, set[str]]:
    """Each module of the product (dotted name, or a path for pages and app.py) -> its imports."""
    out = {}
    for path in sorted((ROOT / "bsdemo").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = imports(path, SPAWNED.get(name))
    for path in [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]:
        out[str(path.relative_to(ROOT))] = imports(path)
    return out


def top(name: str) -> str:
    return name.split(".")[0]


def test_only_the_engine_imports_torch():
    wrong = sorted(
        m
        for m, names in modules().items()
        if "torch" in map(top, names) and not m.startswith("bsdemo.engine")
    )
    assert not wrong, f"torch imported outside bsdemo/engine: {wrong}"


def test_only_the_ui_the_pages_and_app_import_streamlit():
    wrong = sorted(
        m
        for m, names in modules().items()
        if "streamlit" in map(top, names)
        and not (m.startswith("bsdemo.ui") or m.startswith("pages/") or m == "app.py")
    )
    assert not wrong, f"streamlit imported outside bsdemo/ui, pages/ and app.py: {wrong}"


def test_the_pure_layers_reach_neither_torch_nor_streamlit_through_another_module():
    graph = modules()

    def reach(module: str, seen: set[str]) -> set[str]:
        for name in graph.get(module, ()):
            if top(name) in ("torch", "streamlit"):
                seen.add(top(name))
            elif name in graph and name not in seen:
                seen.add(name)
                reach(name, seen)
        return seen

    pure = [
        m
        for m in graph
        if m.startswith(("bsdemo.charts", "bsdemo.recipes", "bsdemo.scheduler", "bsdemo.classroom"))
        or m
        in (
            "bsdemo.config",
            "bsdemo.runs",
            "bsdemo.events",
            "bsdemo.footprint",
            "bsdemo.jobkinds",
            "bsdemo.lessons",
            "bsdemo.units",
            "bsdemo.fits",
        )
    ]
    assert len(pure) > 20
    leaks = {m: sorted(reach(m, set()) & {"torch", "streamlit"}) for m in pure}
    assert not {m: v for m, v in leaks.items() if v}, leaks
    # the pages reach the scheduler, never the engine (its workers run in other processes)
    pages = [m for m in graph if m.startswith("pages/")]
    assert pages and not [p for p in pages if any(n.startswith("bsdemo.engine") for n in reach(p, set()))]


def test_the_cluster_extras_are_imported_only_where_they_belong_and_only_when_asked():
    """psycopg lives in bsdemo/store/postgres.py alone and Ray in bsdemo/cluster/actor.py,
    workers.py and groups.py alone (the cluster extra), and the embedded default never loads
    those modules: a lab with SQLite, or no store, and no cluster never imports them."""
    wrong = sorted(
        m for m, names in modules().items() if "psycopg" in map(top, names) and m != "bsdemo.store.postgres"
    )
    assert not wrong, f"psycopg imported outside bsdemo/store/postgres.py: {wrong}"
    importers = sorted(m for m, names in modules().items() if "bsdemo.store.postgres" in names)
    assert importers == ["bsdemo.store"], importers  # open_store, inside the function
    ray_modules = ("bsdemo.cluster.actor", "bsdemo.cluster.workers", "bsdemo.cluster.groups")
    wrong = sorted(m for m, names in modules().items() if "ray" in map(top, names) and m not in ray_modules)
    assert not wrong, f"ray imported outside {ray_modules}: {wrong}"
    importers = sorted(m for m, names in modules().items() if "bsdemo.cluster.workers" in names)
    assert importers == ["bsdemo.cluster.actor"], importers  # inside the scheduler actor
    importers = sorted(m for m, names in modules().items() if "bsdemo.cluster.actor" in names)
    # inside course_scheduler, and for typing only in the pages' state
    assert importers == ["bsdemo.server", "bsdemo.ui.state"], importers
    importers = sorted(m for m, names in modules().items() if "bsdemo.cluster.groups" in names)
    assert importers == [], importers  # only in a worker actor's own process, by its loop:
    assert "use_cluster_groups()" in (ROOT / "bsdemo/cluster/workers.py").read_text()
    import subprocess
    import sys

    probe = (
        "import sys, tempfile; from bsdemo.store import open_store; "
        "from bsdemo.scheduler import Scheduler; from bsdemo.cli import checks; "
        "import bsdemo.ui.state, bsdemo.cluster; open_store(tempfile.mkdtemp()).count(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'ray') "
        "or m in ('bsdemo.store.postgres', 'bsdemo.cluster.actor', 'bsdemo.cluster.workers', "
        "'bsdemo.cluster.groups')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr[-500:]


MAX_LINES = 400  # a file a newcomer can read through: split a module before it grows past this


def test_no_file_of_the_product_the_benchmarks_or_the_scripts_is_over_400_lines():
    files = [
        *(ROOT / "bsdemo").rglob("*.py"),
        *(ROOT / "bench").glob("*.py"),
        *(ROOT / "scripts").glob("*.py"),
        *(ROOT / "pages").glob("*.py"),
        ROOT / "app.py",
    ]
    assert len(files) > 100  # the whole tree, not a corner of it
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long
