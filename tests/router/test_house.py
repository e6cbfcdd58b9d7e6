"""The house rules, read from the source: parts are composed, not inherited (the whole
router package), nobody outside a core part assigns its attributes (a compiler for typed Python needs both;
so does anyone reading one part without the others)."""

from __future__ import annotations

import ast
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
CORE = TOP / "router" / "core"
# The core's parts and the components they own: their attributes are theirs alone.
PARTS = {"Core", "LocalDelivery", "Copies", "Failover", "Groups", "CreditWindow", "LinkLifecycle", "CoreTables",
         "TopicTreatment"}


def _classes(paths: list[Path]) -> dict[str, set[str]]:
    """Class name -> its attribute names (slots and what its methods assign on self)."""
    out: dict[str, set[str]] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            names = out.setdefault(node.name, set())
            # declared fields (dataclasses, annotations)
            names |= {item.target.id for item in node.body if isinstance(item, ast.AnnAssign)
                      and isinstance(item.target, ast.Name)}
            for item in ast.walk(node):
                if isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                        for t in item.targets):
                    names |= {e.value for e in getattr(item.value, "elts", ()) if isinstance(e, ast.Constant)}
                elif isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store) \
                        and isinstance(item.value, ast.Name) and item.value.id == "self":
                    names.add(item.attr)
    return out


def _sources(*rooms: str) -> list[Path]:
    return [p for room in rooms for p in (TOP / room).rglob("*.py")]


def test_no_class_in_the_router_has_more_than_one_base_or_is_a_mixin():
    """The whole router package: the core's parts, the AMQP engine's ``Connection`` (one
    class holding its layers as objects), the adaptors, the network. No class has two
    bases, and none is a trait (a mixin's way in under the compiler)."""
    found = []
    for path in (TOP / "router").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            where = f"{path.relative_to(TOP)}: class {node.name}"
            if len(node.bases) > 1:
                found.append(f"{where}({', '.join(ast.unparse(b) for b in node.bases)})")
            if any(ast.unparse(d).endswith("trait") for d in node.decorator_list):
                found.append(f"{where} is a trait")
    assert found == []


def test_nobody_outside_a_part_assigns_its_attributes():
    """An assignment ``x.attr = ...`` (or ``+=``) anywhere in the router, the tools or the
    tests, where ``attr`` belongs to one of the core's parts only and ``x`` is not ``self``."""
    classes = _classes(_sources("router", "records", "linkstate"))
    assert PARTS <= set(classes), PARTS - set(classes)
    theirs = {name for cls, names in classes.items() if cls not in PARTS for name in names}
    only_parts = {name for cls in PARTS for name in classes[cls]} - theirs
    assert {"local_count", "unsynced", "transit_outstanding", "active_members"} <= only_parts  # the check has teeth
    found = [f"{path.relative_to(TOP)}:{hit}" for path in _sources("router", "tools", "tests")
             for hit in _assigned_from_outside(ast.parse(path.read_text()), only_parts)]
    assert found == []


def _assigned_from_outside(tree: ast.AST, names: set[str]) -> list[str]:
    hits = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Attribute) and t.attr in names \
                    and not (isinstance(t.value, ast.Name) and t.value.id == "self"):
                hits.append(f"{node.lineno}: {ast.unparse(t)}")
    return hits


def test_the_check_finds_an_assignment_from_outside():
    tree = ast.parse("core.local_count = 3\nself.local_count = 4\ncore.delivery.unsynced += 1\nx.other = 1\n")
    assert _assigned_from_outside(tree, {"local_count", "unsynced"}) == ["1: core.local_count",
                                                                         "3: core.delivery.unsynced"]


# Security modules live in their room (``router/security/``), not loose at the router's top.
SECURITY = {"tls", "tls_accept", "authn", "users", "policy", "quotas", "limits"}


def test_security_lives_in_its_own_room():
    loose = {p.stem for p in (TOP / "router").glob("*.py")}
    assert loose & SECURITY == set()
    assert {p.stem for p in (TOP / "router" / "security").glob("*.py")} >= SECURITY


def test_the_simulator_is_a_room_of_the_product_not_of_the_tests():
    """The in-process network is how the product is proven: it is installed (``once.sim``,
    ``once sim``), typed, and no test module holds a part of it."""
    assert {p.stem for p in (TOP / "sim").glob("*.py")} >= {"net", "clients", "links", "clock", "schedules", "explore"}
    assert not (TOP / "tests" / "simnet").exists()
    assert all(p.name.startswith(("test_", "__init__")) for p in (TOP / "tests" / "sim").glob("*.py"))


def test_test_modules_have_unique_basenames():
    """The test folders are not packages: pytest imports each module by its basename, and a
    second module of the same name fails a clean collection."""
    names = sorted(p.name for p in (TOP / "tests").rglob("test_*.py"))
    assert [n for i, n in enumerate(names) if names[i - 1] == n and i] == []
