"""The house's layout: rooms (every package, and every loose top-level module), no import cycle among
them, and no arrow running back up.

Read from the code's own imports (every import, lazy and TYPE_CHECKING ones included: a circle hidden
inside a function is still a circle), so a move that breaks the layout fails here, not in review.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("elxpk", "elxpk_contract", "elxpk_storage", "trainer")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """The project modules `path` imports (a `from package import module` names the module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return {name for name in names if name in MODULES}


def _graph() -> dict[str, set[str]]:
    """module -> the modules it imports, leaving out its own enclosing packages (importing a submodule
    runs its package's __init__, which is not an arrow of the code's design)."""
    return {m: {t for t in _imports(path) if t != m and not m.startswith(t + ".")} for m, path in MODULES.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
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
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


# The rooms of the house: every package, at any depth, is a room (elxpk.cluster.api apart from elxpk.cluster),
# and so is every loose module at the top of a project package (elxpk/catalog.py is the room elxpk.catalog,
# trainer/clock.py the room trainer.clock): those are the ground the packages stand on, not one room
# that every package would share. A module belongs to its deepest package's room.
PACKAGE_MODULES = frozenset(m for m, path in MODULES.items() if path.name == "__init__.py")


def _room(module: str) -> str:
    """`elxpk.create.spec` -> `elxpk.create`; `elxpk.cluster.api.watch` -> `elxpk.cluster.api`; a package
    is its own room (`elxpk.create`); a loose top-level module is one too (`elxpk.units`)."""
    parts = module.split(".")
    return module if module in PACKAGE_MODULES or len(parts) <= 2 else ".".join(parts[:-1])


def _room_arrows(graph: dict[str, set[str]]) -> dict[str, dict[str, str]]:
    """room -> {room it imports: one module arrow behind it (the first, sorted)}."""
    arrows: dict[str, dict[str, str]] = {}
    for module, targets in sorted(graph.items()):
        arrows.setdefault(_room(module), {})
        for target in sorted(targets):
            here, there = _room(module), _room(target)
            arrows.setdefault(there, {})
            if here != there:
                arrows[here].setdefault(there, f"{module} -> {target}")
    return arrows


def _shortest_cycle(arrows: dict[str, dict[str, str]], start: str, members: set[str]) -> list[str]:
    """The shortest walk start -> ... -> start inside one strongly connected component (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for room in frontier:
            for there in sorted(arrows[room]):
                if there == start:
                    walk = [room]
                    while walk[-1] != start:
                        walk.append(came_from[walk[-1]])
                    return [*reversed(walk), start]
                if there in members and there not in came_from:
                    came_from[there] = room
                    following.append(there)
        frontier = following
    raise AssertionError(f"{start} is on no cycle of {sorted(members)}")  # Tarjan said it is: a bug here


def _room_cycles(graph: dict[str, set[str]]) -> list[str]:
    """One line per strongly connected set of rooms (a cycle of any length): its shortest cycle through its
    first room, each step with the module arrow behind it, then every room of the set."""
    arrows = _room_arrows(graph)
    found = []
    for component in _circles({room: set(there) for room, there in arrows.items()}):
        cycle = _shortest_cycle(arrows, component[0], set(component))
        steps = " -> ".join(f"{a} ({arrows[a][b]})" for a, b in pairwise(cycle))
        found.append(f"{steps} -> {cycle[0]}; the rooms that import each other: {', '.join(component)}")
    return found


def test_there_is_no_cycle_among_rooms():
    cycles = _room_cycles(_graph())
    assert not cycles, "import cycles among rooms (each room -> the next, with the import behind it):\n" + \
        "\n".join(cycles)


# What stands below the trainer: the launcher, the contract and the storage layer they share. Only
# `elxpk local run` (elxpk/local/) runs the trainer in its own process, by design.
BELOW_THE_TRAINER = ("elxpk", "elxpk_contract", "elxpk_storage")
RUNS_THE_TRAINER = "elxpk.local"


def _imports_of_the_trainer(graph: dict[str, set[str]]) -> list[str]:
    """module -> trainer module, for every module below the trainer outside elxpk/local/."""
    return sorted(f"{module} -> {target}" for module, targets in graph.items() for target in targets
                  if module.split(".")[0] in BELOW_THE_TRAINER and target.split(".")[0] == "trainer"
                  and not (module == RUNS_THE_TRAINER or module.startswith(RUNS_THE_TRAINER + ".")))


def test_the_launcher_imports_the_trainer_only_to_run_it_locally():
    assert _imports_of_the_trainer(_graph()) == []


def _imports_of_the_launcher(graph: dict[str, set[str]]) -> list[str]:
    """module -> elxpk module, for every module of the contract, the storage layer and the trainer: the
    launcher stands on them, so an arrow back up would make the launcher's room and theirs import each other."""
    return sorted(f"{module} -> {target}" for module, targets in graph.items() for target in targets
                  if module.split(".")[0] != "elxpk" and target.split(".")[0] == "elxpk")


def test_nothing_below_the_launcher_imports_it():
    assert _imports_of_the_launcher(_graph()) == []


def test_the_room_checks_can_fail():
    """Made-up graphs: a cycle of three rooms through modules that form no cycle themselves; a loose top-level
    module (a room of its own) on a cycle with a package; a sub-package on a cycle with its parent (a room
    apart from it); and launcher modules that import the trainer (elxpk/local/ may, by design)."""
    graph = {"elxpk.cluster.a": {"elxpk.runs.b"}, "elxpk.runs.b": {"elxpk.maxtext.c"},
             "elxpk.maxtext.c": {"elxpk.cluster.d"}, "elxpk.cluster.d": set(), "elxpk.units": set(),
             "elxpk.plan.e": {"elxpk.units"}}
    assert _circles(graph) == []
    assert _room_cycles(graph) == [
        "elxpk.cluster (elxpk.cluster.a -> elxpk.runs.b) -> elxpk.runs (elxpk.runs.b -> elxpk.maxtext.c) -> "
        "elxpk.maxtext (elxpk.maxtext.c -> elxpk.cluster.d) -> elxpk.cluster; "
        "the rooms that import each other: elxpk.cluster, elxpk.maxtext, elxpk.runs"]
    graph = {"elxpk.accelerators": {"elxpk.create.gpu"}, "elxpk.create.gpu": set(),
             "elxpk.create.spec": {"elxpk.chip_hours"}, "elxpk.chip_hours": {"elxpk.accelerators"},
             "elxpk.cluster.api.watch": {"elxpk.cluster.errors"}, "elxpk.cluster.errors": set(),
             "elxpk.cluster.why": {"elxpk.cluster.api.client"}, "elxpk.cluster.api.client": set()}
    assert _room_cycles(graph) == [
        "elxpk.accelerators (elxpk.accelerators -> elxpk.create.gpu) -> elxpk.create (elxpk.create.spec -> "
        "elxpk.chip_hours) -> elxpk.chip_hours (elxpk.chip_hours -> elxpk.accelerators) -> elxpk.accelerators; "
        "the rooms that import each other: elxpk.accelerators, elxpk.chip_hours, elxpk.create",
        "elxpk.cluster (elxpk.cluster.why -> elxpk.cluster.api.client) -> elxpk.cluster.api "
        "(elxpk.cluster.api.watch -> elxpk.cluster.errors) -> elxpk.cluster; "
        "the rooms that import each other: elxpk.cluster, elxpk.cluster.api"]
    del graph["elxpk.chip_hours"], graph["elxpk.cluster.api.watch"]
    assert _room_cycles(graph) == []
    graph = {"elxpk.cluster.gcs": {"trainer.gcs_auth"}, "elxpk_contract.x": {"trainer.ckpt.digest"},
             "elxpk.local.run": {"trainer.data.data"}, "elxpk.localish": {"trainer.cpu"}, "trainer.cpu": set()}
    assert _imports_of_the_trainer(graph) == ["elxpk.cluster.gcs -> trainer.gcs_auth",
                                              "elxpk.localish -> trainer.cpu",
                                              "elxpk_contract.x -> trainer.ckpt.digest"]
    graph = {"trainer.metrics": {"elxpk.units"}, "elxpk_storage.gcs": {"elxpk_contract.codes"},
             "elxpk.units": set(), "elxpk_contract.codes": set()}
    assert _imports_of_the_launcher(graph) == ["trainer.metrics -> elxpk.units"]


def _third_party(name: str) -> bool:
    top = name.split(".")[0]
    return top not in sys.stdlib_module_names and top not in PACKAGES


def _loads_third_party(module: str, graph: dict[str, set[str]], seen: frozenset[str] = frozenset()) -> bool:
    """Whether importing `module` loads a third-party package (jax, yaml, kubernetes...), through the
    module-level imports of the modules it imports."""
    path = MODULES.get(module)
    if path is None:
        return _third_party(module)
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If):  # `if TYPE_CHECKING:` imports load nothing at run time
            continue
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            if _third_party(name) or (name in MODULES and name not in seen
                                      and _loads_third_party(name, graph, seen | {module})):
                return True
    return False


def test_imports_inside_functions_are_there_for_the_start_up_budget():
    """An import sits inside a function only to keep a third-party package (jax, yaml, kubernetes, ...)
    off the start-up path of a command that does not need it. The command tree (elxpk/cli/) loads each
    command's stage when that command runs, by design (elxpk/cli/__init__.py). Any other lazy import says
    why on its line: `# lazy: <reason>`."""
    graph = _graph()
    unexplained = []
    for module, path in sorted(MODULES.items()):
        if module.startswith("elxpk.cli"):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for function in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                if any("# lazy:" in line for line in lines[node.lineno - 1:node.end_lineno]):
                    continue
                if isinstance(node, ast.ImportFrom):
                    names = [f"{node.module}.{alias.name}" for alias in node.names] + [str(node.module)]
                else:
                    names = [alias.name for alias in node.names]
                if not any(_loads_third_party(name, graph) for name in names if name in MODULES or _third_party(name)):
                    unexplained.append(f"{path.relative_to(ROOT)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert unexplained == []


# The entry points a process really starts with: the console script, `python -m trainer`, and the init
# container's `python -m elxpk.checkpoints`. Each is imported first in its own fresh interpreter.
ENTRY_POINTS = ("elxpk.cli.main", "trainer.__main__", "elxpk.checkpoints.__main__")
# Every other module is imported first in one worker interpreter that forgets the project's modules before
# each (third-party ones, jax above all, stay loaded: they were the minute this test took with one
# interpreter per module). A project circle that depends on which module comes first fails there as it would
# in a fresh interpreter; a failure there is confirmed in a fresh interpreter before it is reported, so a
# module that only minds being imported twice in one process is not blamed.
_IMPORT_EACH_FIRST = """
import importlib, sys
for name in sys.argv[2:]:
    for loaded in [m for m in sys.modules if m.split(".")[0] in sys.argv[1].split(",")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except BaseException as exc:  # every failure is a line; the loop goes on
        print(f"{name}\t{type(exc).__name__}: {str(exc).splitlines()[:1]}")
"""


def _import_first(modules: list[str], *, fresh: bool) -> dict[str, str]:
    """module -> why it failed to import first (fresh: one interpreter per module)."""
    batches = [[m] for m in modules] if fresh else [modules]
    failed: dict[str, str] = {}
    for batch in batches:
        done = subprocess.run([sys.executable, "-c", _IMPORT_EACH_FIRST, ",".join(PACKAGES), *batch], cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            failed[",".join(batch)] = f"the worker died: {done.stderr.strip().splitlines()[-1:]}"
        failed.update(line.split("\t", 1) for line in done.stdout.splitlines() if "\t" in line)
    return failed


@pytest.mark.slow
def test_every_module_imports_first():
    """Whatever module a process imports first, it imports: an order-dependent circle would fail here."""
    assert set(ENTRY_POINTS) <= set(MODULES)
    others = sorted(m for m in MODULES if m not in ENTRY_POINTS and not m.endswith("__main__"))
    suspects = _import_first(others, fresh=False)
    failures = {**_import_first(list(ENTRY_POINTS), fresh=True), **_import_first(sorted(suspects), fresh=True)}
    assert failures == {}


def test_the_import_check_finds_a_module_that_fails_first(tmp_path):
    """The worker names a module whose import fails, and the fresh check confirms it."""
    assert _import_first(["elxpk_contract", "elxpk.no_such_module"], fresh=False).keys() == {"elxpk.no_such_module"}
    assert _import_first(["elxpk.no_such_module"], fresh=True).keys() == {"elxpk.no_such_module"}


def test_no_module_imports_another_ones_private_name():
    """A leading underscore says a name is its module's own (issue 53: `_Outage`, `fingerprint._all` were
    imported across modules): what another module needs is public, so a rename shows at its users."""
    found = []
    for path in sorted(MODULES.values()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in PACKAGES:
                found += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []
