"""``once reload [TOPOLOGY] [--id ID ...]``: every router of a topology running on this host
takes up its users file, policy, consumer groups, certificates and links again (SIGHUP), whether
``once launch`` started it or an operator did, and no router of another topology is
touched (``kill -HUP $(pgrep -f "once router")`` missed the first and hit the second).

The routers are found by their command lines (``/proc``): ``once router TOPOLOGY --id ID``
with the same topology file (a shipped name, or a path relative to the process's working
directory, resolved as the router resolved it)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

from once.topologies import resolve

from .exits import CommandError, Exit

# ``once router``'s options that take a value (the topology is its one positional argument)
_VALUED = frozenset({"--id", "--listen", "--journal", "--log-level", "--log-format", "--state", "--http", "--mqtt"})


def _router_args(argv: list[str]) -> tuple[str, str | None] | None:
    """(topology, router id) of a ``once router`` command line, else None."""
    for i, arg in enumerate(argv[:-1]):
        if arg == "router" and i > 0 and (argv[i - 1] == "once.tools.cli" or Path(argv[i - 1]).name == "once"):
            rest, topology, rid = argv[i + 1:], None, None
            j = 0
            while j < len(rest):
                a = rest[j]
                if a in _VALUED and j + 1 < len(rest):
                    if a == "--id":
                        rid = rest[j + 1]
                    j += 2
                    continue
                if a.startswith("--id="):
                    rid = a.split("=", 1)[1]
                elif not a.startswith("-") and topology is None:
                    topology = a
                j += 1
            return (topology, rid) if topology is not None else None
    return None


def running(topology: Path) -> Iterator[tuple[int, str]]:
    """(pid, router id) of each router of ``topology`` running on this host."""
    target = topology.resolve()
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            argv = [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
            found = _router_args(argv)
            if found is None:
                continue
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue  # (gone meanwhile, or not ours to read)
        name, rid = found
        try:
            path = Path(resolve(name))
        except Exception:  # noqa: BLE001 - a name this install does not ship: not ours
            continue
        if not path.is_absolute():
            path = cwd / path
        if path.resolve() == target and rid is not None:
            yield int(entry.name), rid


def reload(topology: str, ids: list[str]) -> int:
    path = Path(topology)
    found = sorted(running(path), key=lambda p: p[1])
    if ids:
        unknown = sorted(set(ids) - {rid for _, rid in found})
        if unknown:
            raise CommandError(Exit.UNREACHABLE, f"no router {', '.join(unknown)} of {topology} runs on this host")
        found = [(pid, rid) for pid, rid in found if rid in ids]
    if not found:
        raise CommandError(Exit.UNREACHABLE, f"no router of {topology} runs on this host (`once launch {topology}` "
                                             "starts them)")
    for pid, rid in found:
        try:
            os.kill(pid, signal.SIGHUP)
        except ProcessLookupError:
            print(f"router {rid} (pid {pid}) ended meanwhile")
            continue
        print(f"router {rid} (pid {pid}): reloading (its log says what it took up)")
    return Exit.OK
