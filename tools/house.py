"""How the house reads, measured: ``once house``.

* **Cross-part calls**: the call sites in one part of the core (``router/core/parts.py``
  names them) that call another part's method, and how many methods they call.
* **One message's walk**: a message published on router B of ``line3`` to a subscriber
  on A, over the real adaptors in-process (``tools/inprocess.py``), from its transfer
  reaching B to the publisher's ``accepted`` leaving B: every call from a function in one
  file of the project to one in another is a move, and a move back into a file already
  visited is counted apart. (Only the routers' side is watched, never the clients'.)

Both are figures to compare before and after a change, not targets."""

from __future__ import annotations

import ast
import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).absolute().parents[1]  # (the package's root: once/; not resolved: a linked tree stays itself)
CORE = ROOT / "router" / "core"
# the parts, and the names a part holds another by
PARTS = {"delivery": "delivery.py", "copies": "copies.py", "failover": "failover.py", "groups": "groups.py",
         "inquiry": "inquiry.py", "dest": "destination.py", "relay": "relay.py"}


@dataclass(frozen=True)
class CrossPart:
    calls: int
    methods: int


def cross_part_calls(core: Path = CORE) -> CrossPart:
    """Calls ``self.<part>.<method>(...)`` (or through a local bound to ``self.<part>``)
    from a part's module to another part's."""
    calls = 0
    methods: set[tuple[str, str]] = set()
    for module in PARTS.values():
        tree = ast.parse((core / module).read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            local: dict[str, str] = {}  # local name -> the part it holds
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign):
                    targets = node.targets[0].elts if isinstance(node.targets[0], ast.Tuple) else node.targets
                    values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                    for t, v in zip(targets, values, strict=False):
                        part = _part_of(v)
                        if isinstance(t, ast.Name) and part is not None:
                            local[t.id] = part
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    holder = node.func.value
                    part = _part_of(holder) or (local.get(holder.id) if isinstance(holder, ast.Name) else None)
                    if part is not None and PARTS[part] != module:
                        calls += 1
                        methods.add((part, node.func.attr))
    return CrossPart(calls, len(methods))


def _part_of(node: ast.expr) -> str | None:
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
            and node.attr in PARTS):
        return node.attr
    return None


@dataclass(frozen=True)
class Walk:
    moves: int
    back: int  # moves into a file already visited
    files: int
    core_moves: int  # the same, counting only calls from one core file to another
    core_back: int
    core_files: int


class _Tracer:
    def __init__(self) -> None:
        self.on = False
        self.calls: list[tuple[str, str]] = []  # (from file, to file)

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.on or event != "call":
            return
        to = frame.f_code.co_filename
        back = frame.f_back
        if back is None or not to.startswith(str(ROOT)) or to == __file__ or to.endswith("inprocess.py"):
            return
        self.calls.append((back.f_code.co_filename, to))

    def watching(self, fn: Callable[..., Any], *args: Any) -> Any:
        self.on = True
        try:
            return fn(*args)
        finally:
            self.on = False


async def _walk() -> Walk:
    from once.router.amqp.events import DeliveriesReceived, DeliveryUpdated, LinkAttached
    from once.router.amqp.performatives import Accepted, ReceiverSettleMode, Role, Source, Target

    from .inprocess import Link, Wire, router

    a, b = router("line3.yaml", "A"), router("line3.yaml", "B")
    ab = Link(a, b)
    tracer = _Tracer()

    async def pump(wire: Wire | None = None) -> list[Any]:
        new: list[Any] = []
        for _ in range(100):
            moved = False
            for w in (sub, pub) if wire is None else (wire,):
                out = w.client.data_to_send()
                if out:
                    tracer.watching(w.conn.data_received, out)
                back = w.transport.take()
                if back:
                    new += w.client.receive_data(back)
                moved = moved or bool(out or back)
            tracer.on = True
            await asyncio.sleep(0)  # (the routers' callbacks)
            tracer.on = False
            x, y = ab.out.take(), ab.back.take()
            if x:
                tracer.watching(ab.b.data_received, x)
            if y:
                tracer.watching(ab.a.data_received, y)
            if not (moved or x or y):
                break
        return new

    sub, pub = Wire(a, "sub"), Wire(b, "pub")
    await pump()
    links = []
    for wire, role in ((sub, Role.RECEIVER), (pub, Role.SENDER)):
        wire.client.open()
        await pump()
        session = wire.client.begin()
        source, target = (Source(address="t"), Target()) if role is Role.RECEIVER else (Source(), Target(address="t"))
        links.append(wire.client.attach(session, role.name, role, source=source, target=target,
                                        rcv_settle_mode=ReceiverSettleMode.FIRST))
        events = await pump()
        assert any(isinstance(e, LinkAttached) for e in events)
    rx, tx = links
    sub.client.flow(rx, 10)
    await pump()
    sys.setprofile(tracer)
    try:
        pub.client.send(tx, b"0", b"\x00Sw\xa1\x05hello")
        got = [d for e in await pump() if isinstance(e, DeliveriesReceived) for d in e.deliveries]
        sub.client.disposition(got[0], Accepted(), settled=True)
        answered = [e for e in await pump() if isinstance(e, DeliveryUpdated)]
    finally:
        sys.setprofile(None)
    assert answered and isinstance(answered[0].state, Accepted), "the publisher heard no accepted"
    core = str(CORE)
    inside = [(f, t) for f, t in tracer.calls if f.startswith(core) and t.startswith(core)]
    return Walk(*_moves(tracer.calls), *_moves(inside))


def _moves(calls: list[tuple[str, str]]) -> tuple[int, int, int]:
    moves = back = 0
    seen: set[str] = set()
    for frm, to in calls:
        seen.add(frm)
        if frm != to:
            moves += 1
            if to in seen:
                back += 1
            seen.add(to)
    return moves, back, len(seen)


def main(argv: list[str] | None = None) -> int:
    parts = cross_part_calls()
    walk = asyncio.run(_walk())
    print(f"cross-part calls in the core: {parts.calls} call sites, {parts.methods} methods")
    print(f"one message (B -> A, accepted): {walk.moves} file-to-file moves over {walk.files} files, "
          f"{walk.back} of them back into a file already visited")
    print(f"  within the core: {walk.core_moves} moves over {walk.core_files} files, {walk.core_back} back")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
