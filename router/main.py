"""Run one router in the foreground: ``once router TOPOLOGY --id A``."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from dataclasses import replace

from once.records.compiled import MODE

from .config import Address, Topology, TopologyError, load_topology
from .logs import configure
from .loop import run
from .uplink import EdgeRouter

# container allocations between young-generation passes (Python's default: 700)
GC_YOUNG = 20_000




async def serve(topology: Topology, router_id: str, journal: str | None = None, state: str | None = None,
                allow_empty_users: bool = False) -> None:
    # (imported here: an edge, ``serve_edge``, runs none of it, and its process stays small)
    from .leaving import LEAVE_WAIT
    from .server import Router

    router = Router(topology, router_id, journal, state, allow_empty_users)
    # A router restarted while a neighbour is still down must come up all the same: it
    # says ready (naming the neighbours it has) after waiting this long for the rest.
    ready = await router.start(neighbour_timeout=10.0)
    settle_heap()
    # (which build runs: a compiled install that fell back to pure Python says why here)
    logging.getLogger("once.router").info("router %s: %s", router_id, MODE.line())
    stop = asyncio.Event()
    router.on_drained = stop.set  # (drained: by an admin, ``once manage drain``, or a signal)
    loop = asyncio.get_running_loop()

    def leave() -> None:
        # SIGTERM: a clean stop, as a drain (clients resume elsewhere, what we hold is
        # answered), then every router hears we left (``router/leaving.py``). Alone (no link
        # up), or asked a second time: at once.
        if router.draining is None and router.network.links:
            router.drain("SIGTERM", LEAVE_WAIT)
        else:
            stop.set()

    loop.add_signal_handler(signal.SIGTERM, leave)
    # SIGINT (Ctrl-C): at once, as before there was a clean stop; its neighbours see its
    # links close, its clients resume elsewhere as after a crash
    loop.add_signal_handler(signal.SIGINT, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, router.log_snapshot)
    # SIGHUP reloads what can change without a restart (the users file, the links); it never
    # stops a router.
    loop.add_signal_handler(signal.SIGHUP, router.reload)
    # The ready line is the readiness protocol (stdout, one line, fixed format); logs go to
    # stderr. Said once the signals are ours: a SIGHUP sent on reading it, before, took the
    # default action and killed the router (a loaded machine's test waited for a reload line).
    print(ready.line(), flush=True)
    await stop.wait()
    await router.stop()
    try:
        print(f"router {router_id} stopped", flush=True)
    except BrokenPipeError:  # whoever read our ready line has gone; nothing to tell
        pass


def settle_heap() -> None:
    """Take start-up's objects out of the cycle collector's way, and let it run less often.

    A delivery leaves no reference cycle behind (``tests/router/test_garbage.py`` checks),
    so the collector finds nothing per message; what it costs is walking the objects in
    flight, and, at each full pass, every module, class and function loaded at start-up.
    Frozen, those are never walked again; with a larger young generation, deliveries are
    freed by reference counting before a pass sees them.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG, 20, 50)


def _address(option: str, value: str) -> Address:
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise TopologyError(f"{option} {value}: expected HOST:PORT with a port from 0 to 65535")
    return Address(host or "127.0.0.1", int(port))


def with_listen(topology: Topology, router_id: str, listen: str | None, http: str | None = None,
                mqtt: str | None = None, join: tuple[str, ...] = ()) -> Topology:
    """The topology with this router's ``--listen``, ``--http`` and ``--mqtt`` in place of its
    own addresses, and ``--join`` added to its ``join`` list."""
    if listen is None and http is None and mqtt is None and not join:
        return topology
    spec = topology.routers[router_id]
    if join:
        added = tuple(a for a in (_address("--join", j) for j in join) if a not in spec.join)
        spec = replace(spec, join=spec.join + tuple(dict.fromkeys(added)))
    if listen is not None:
        spec = replace(spec, listen=_address("--listen", listen))
    if http is not None:
        spec = replace(spec, http=_address("--http", http))
    if mqtt is not None:
        spec = replace(spec, mqtt=_address("--mqtt", mqtt))
    return replace(topology, routers={**topology.routers, router_id: spec})


def main(topology_path: str, router_id: str, listen: str | None = None, journal: str | None = None,
         log_level: str = "info", log_format: str = "text", state: str | None = None, http: str | None = None,
         mqtt: str | None = None, allow_empty_users: bool = False, join: tuple[str, ...] = ()) -> int:
    """Run one router until SIGTERM/SIGINT. Raises ``TopologyError`` (bad file, unknown id,
    bad --listen) and ``ListenError`` (cannot bind), each a one-line message."""
    topology = load_topology(topology_path)
    if router_id not in topology.routers:
        raise TopologyError(f"{topology_path}: no router {router_id!r} (have {', '.join(sorted(topology.routers))})")
    topology = with_listen(topology, router_id, listen, http, mqtt, join)
    if topology.routers[router_id].join and topology.auth.router_secret is None and topology.tls is None:
        raise TopologyError(f"--join: {topology_path} has no auth.router_secret (or ONCE_ROUTER_SECRET) nor tls: "
                            "a router joins with the network's credentials")
    configure(router_id, log_level, log_format)
    if topology.routers[router_id].uplink:
        run(serve_edge(topology, router_id))
        return 0
    run(serve(topology, router_id, journal, state, allow_empty_users))
    return 0


async def serve_edge(topology: Topology, router_id: str) -> None:
    """Run an edge router (``router/uplink.py``) until SIGTERM or SIGINT: it holds nothing to
    hand over, so either stops it at once (its clients resume as after a router's death)."""
    edge = EdgeRouter(topology, router_id)
    line = await edge.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(line, flush=True)
    await stop.wait()
    await edge.stop()
    try:
        print(f"router {router_id} stopped", flush=True)
    except BrokenPipeError:
        pass
