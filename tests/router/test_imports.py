"""Where the import arrows may go: the core knows no protocol and no I/O; the client
library stands on the engine alone, never on the router."""

from __future__ import annotations

import ast
from pathlib import Path

ROUTER = Path(__file__).resolve().parents[2] / "router"


def _imports(path: Path, package: str) -> set[str]:
    """Absolute module names ``path`` imports (relative imports resolved against ``package``)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.add(module)
            out |= {f"{module}.{a.name}" for a in node.names}
    return out


def _offenders(folder: str, forbidden: tuple[str, ...], room: str = "router") -> list[str]:
    """Imports of ``forbidden`` names in ``room/folder`` (``folder`` "": the room's top)."""
    package = ".".join(filter(None, ("once", room, folder.replace("/", "."))))
    found = []
    files = sorted((ROUTER.parent / room / folder).rglob("*.py"))
    assert files, folder
    for path in files:
        for name in _imports(path, package):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                found.append(f"{path.relative_to(ROUTER.parent)}: {name}")
    return found


def test_the_core_imports_no_protocol_and_no_io():
    assert _offenders("core", ("once.router.amqp", "asyncio", "uvloop", "socket", "once.router.adaptors",
                               "once.router.server", "once.router.network", "once.router.engineio")) == []


def test_the_client_room_imports_neither_the_core_nor_the_router():
    """The client library, the tools' client shell and the outbox's application side stand on
    the engine and the asyncio shell, never on the router's forwarding or its adaptors."""
    assert _offenders("", ("once.router.core", "once.router.server", "once.router.adaptors.amqp.edge",
                           "once.router.adaptors.amqp.interrouter", "once.router.network", "once.outbox"),
                      room="client") == []


def test_adaptors_live_in_their_own_room():
    """Each protocol's adaptors and their helpers in ``router/adaptors/<protocol>/``; nothing
    protocol-specific beside the core at the top of ``router/`` (the engines have their own)."""
    amqp = {p.stem for p in (ROUTER / "adaptors" / "amqp").glob("*.py")}
    assert {"edge", "interrouter", "copies_wire", "dispositions", "message", "shared_subscriptions"} <= amqp
    assert not {p.stem for p in ROUTER.glob("*.py")} & amqp - {"__init__"}


def test_the_check_sees_a_relative_import():
    found = _imports(ROUTER / "core" / "facade.py", "once.router.core")
    assert "once.router.core.ports" in found and "once.router.config" in found


def _module_name(path: Path) -> tuple[str, str]:
    rel = path.relative_to(ROUTER.parent).with_suffix("")
    parts = ["once", *rel.parts]
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def test_no_import_circle_inside_router():
    """Every import counts, also those only for type checking: a circle of them is a
    tangle of responsibilities all the same."""
    import networkx as nx

    modules = {}
    for path in ROUTER.rglob("*.py"):
        name, package = _module_name(path)
        modules[name] = (path, package)
    graph = nx.DiGraph()
    for name, (path, package) in modules.items():
        graph.add_node(name)
        for imported in _imports(path, package):
            target = imported
            while target and target not in modules:  # `from .x import Name` names a module's member
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                graph.add_edge(name, target)
    cycles = list(nx.simple_cycles(graph))
    assert cycles == [], cycles[:3]
    assert graph.has_edge("once.router.server", "once.router.adaptors.amqp.edge")  # the graph really has the router in it


def test_nothing_imports_a_room_as_a_top_level_package():
    """Installed, the rooms are ``once.router``, ``once.records``, ...: an import of plain
    ``router`` or ``records`` would find another project's package (or none)."""
    rooms = ("router", "records", "linkstate", "client", "outbox", "sim", "tools", "topologies")
    top = ROUTER.parent
    found = []
    for path in [*top.joinpath("tests").rglob("*.py"), *(p for r in rooms for p in top.joinpath(r).rglob("*.py"))]:
        for name in _imports(path, "once.x.y"):
            if name.split(".")[0] in rooms:
                found.append(f"{path.relative_to(top)}: {name}")
    assert found == []


# What only the link-lifecycle service calls on the core: an adaptor calling these itself
# would be a second copy of the lifecycle.
LIFECYCLE_ONLY = {"add_publisher", "add_subscriber", "remove_publisher", "remove_subscriber", "suspend_publisher",
                  "suspend_subscriber", "resume_subscriber", "publisher_resume_map", "attach_completed", "stand_in",
                  "last_member", "key_owner"}


def _calls(path: Path) -> set[str]:
    return {node.func.attr for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}


def test_the_simulator_and_the_amqp_adaptor_run_one_link_lifecycle():
    """The in-process network's clients attach, resume, get stolen, suspend and detach
    through the service the AMQP adaptor uses, not through a copy of it."""
    service = "once.router.core.lifecycle"
    edge = ROUTER / "adaptors" / "amqp" / "edge.py"
    simnet = ROUTER.parent / "sim" / "clients.py"
    assert any(n.startswith(service) for n in _imports(edge, "once.router.adaptors.amqp"))
    assert any(n.startswith(service) for n in _imports(simnet, "once.sim"))
    for path in (edge, simnet):
        assert _calls(path) & LIFECYCLE_ONLY == set(), path
        assert {"attach_subscriber", "attach_publisher", "subscriber_gone", "publisher_gone"} <= _calls(path), path
