"""``once bench --compare REF``: this tree's routers against another git ref's, back to back;
``once bench --against qdrouterd=PATH``: against another router (``peer.py``), the same way.

The same load clients drive both; only the router code differs. A short run, thrown
away, warms the machine first. Runs alternate (this tree, the ref, this tree, ...) so a
machine that slows down part-way hurts both alike, and each figure is the median of its
rounds.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from once.records.compiled import MODE
from once.tools.exits import CommandError, Exit

from .main import measure
from .procs import ROOT
from .scenarios import Result


def _repository(where: tuple[Path, ...] | None = None) -> Path:
    """The git checkout of ``once`` that refs are looked up in: the one this code runs from
    (an editable install), or else the working directory's (an installed, compiled ``once``
    run from its checkout). A git repository that is not this project's does not count:
    site-packages may sit inside one (pyenv's Pythons are a git clone), and its HEAD is not
    ours."""
    places = where or (ROOT, Path.cwd())
    for place in places:
        inside = subprocess.run(["git", "-C", str(place), "rev-parse", "--show-toplevel"], capture_output=True,
                                text=True)
        top = Path(inside.stdout.strip())
        if inside.returncode == 0 and _is_once(top):
            return top
    raise CommandError(Exit.USAGE, f"--compare: none of {', '.join(map(str, places))} is inside a git checkout of "
                                   "once (run it from one)")


def _is_once(top: Path) -> bool:
    project = top / "pyproject.toml"
    return project.is_file() and 'name = "once"' in project.read_text()


def worktree(ref: str, where: Path) -> str:
    """Check ``ref`` out into ``where``; returns its commit."""
    repo = _repository()
    r = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", f"{ref}^{{commit}}"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise CommandError(Exit.USAGE, f"--compare {ref}: not a commit of {repo} (git rev-parse says: "
                                       f"{r.stderr.strip() or 'nothing'})")
    commit = r.stdout.strip()
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "-f", str(where), commit],
                   check=True, capture_output=True)
    return commit


def remove_worktree(where: Path) -> None:
    subprocess.run(["git", "-C", str(_repository()), "worktree", "remove", "--force", str(where)], capture_output=True)


def _median(rs: list[Result], field: str) -> float:
    values = [getattr(r, field) for r in rs if getattr(r, field) is not None]
    return statistics.median(values) if values else float("nan")


def compare(ref: str, names: list[str], messages: int, credit: int, clients: str, rounds: int) -> int:
    repo = _repository()
    here = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or "this tree"
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "ref"
        commit = worktree(ref, other)
        try:
            runs: dict[str, list[list[Result]]] = {"new": [], "old": []}
            # One short run first, thrown away: the first run of a bench warms the machine
            # (page cache, clocks), and it was the slowest of its bench every time in four
            # benches of session 10, always on the side that went first.
            print("bench --compare: a warm-up run (not counted)", file=sys.stderr, flush=True)
            measure(names[:1], min(messages, 50_000), credit, clients, root=ROOT)
            for i in range(rounds):
                for side in (("new", "old") if i % 2 == 0 else ("old", "new")):
                    print(f"bench --compare: round {i + 1}/{rounds}, {'this tree' if side == 'new' else ref}",
                          file=sys.stderr, flush=True)
                    runs[side].append(measure(names, messages, credit, clients, root=ROOT if side == "new" else other))
        finally:
            remove_worktree(other)
    # (the ref runs from its source: pure Python, whatever this tree's build)
    print(f"this tree ({here}, uncommitted changes included; {MODE.line()}) vs {ref} ({commit[:10]}; pure Python), "
          f"{clients} clients, median of {rounds} alternating rounds")
    e2e = clients == "c"  # (the C receiver reads the send time from the body)
    print(f"{'scenario':<16} {'msgs/s new':>11} {'old':>8} {'ratio':>6} {'cpu us new':>11} {'old':>7} {'ratio':>6} "
          f"{'p50 ms new':>11} {'old':>8}" + (f" {'e2e p50 new':>12} {'old':>8}" if e2e else ""))
    for j, name in enumerate(names):
        new = [r[j] for r in runs["new"]]
        old = [r[j] for r in runs["old"]]
        t_new, t_old = _median(new, "msgs_per_s"), _median(old, "msgs_per_s")
        c_new, c_old = _median(new, "router_cpu_us"), _median(old, "router_cpu_us")
        print(f"{name:<16} {t_new:>11.0f} {t_old:>8.0f} {t_new / t_old:>6.2f} {c_new:>11.1f} {c_old:>7.1f} "
              f"{c_new / c_old:>6.2f} {_median(new, 'p50_ms'):>11.2f} {_median(old, 'p50_ms'):>8.2f}"
              + (f" {_median(new, 'e2e_p50_ms'):>12.2f} {_median(old, 'e2e_p50_ms'):>8.2f}" if e2e else ""))
    return 0


def against(spec: str, names: list[str], messages: int, credit: int, rounds: int, tls: bool = False) -> int:
    """Our routers and the peer's, alternating, under the same C clients; the ratios.
    ``tls``: both over TLS (clients) and mutual TLS (between routers)."""
    from .peer import parse

    kind, exe = parse(spec)
    from .scenarios import SCENARIOS

    for name in names:
        if SCENARIOS[name].group or SCENARIOS[name].idle_links:
            raise CommandError(Exit.USAGE, f"--against: {name} has a consumer group or idle links, ours alone")
    runs: dict[str, list[list[Result]]] = {"once": [], kind: []}
    print("bench --against: a warm-up run (not counted)", file=sys.stderr, flush=True)
    measure(names[:1], min(messages, 50_000), credit, "c")
    for i in range(rounds):
        for side in (("once", kind) if i % 2 == 0 else (kind, "once")):
            print(f"bench --against: round {i + 1}/{rounds}, {side}", file=sys.stderr, flush=True)
            runs[side].append(measure(names, messages, credit, "c", peer=exe if side == kind else None, tls=tls))
    print(f"once ({MODE.line()}) vs {kind} ({exe}), C clients{' over TLS' if tls else ''}, credit {credit}, {messages} "
          f"messages, median (min-max) of {rounds} "
          "alternating rounds; e2e: send to the slowest subscriber's arrival")
    print(f"{'scenario':<14} {'once msg/s':>22} {kind + ' msg/s':>22} {'ratio':>6} {'cpu us once':>11} "
          f"{kind[:9]:>9} {'p50 ms once':>11} {kind[:9]:>9} {'e2e p50 once':>12} {kind[:9]:>9}")
    for j, name in enumerate(names):
        ours = [r[j] for r in runs["once"]]
        theirs = [r[j] for r in runs[kind]]

        def rate(rs: list[Result]) -> str:
            return (f"{_median(rs, 'msgs_per_s'):,.0f} ({min(r.msgs_per_s for r in rs):,.0f}-"
                    f"{max(r.msgs_per_s for r in rs):,.0f})")

        ratio = _median(ours, "msgs_per_s") / _median(theirs, "msgs_per_s")
        print(f"{name:<14} {rate(ours):>22} {rate(theirs):>22} {ratio:>6.2f} {_median(ours, 'router_cpu_us'):>11.1f} "
              f"{_median(theirs, 'router_cpu_us'):>9.1f} {_median(ours, 'p50_ms'):>11.3f} "
              f"{_median(theirs, 'p50_ms'):>9.3f} {_median(ours, 'e2e_p50_ms'):>12.3f} "
              f"{_median(theirs, 'e2e_p50_ms'):>9.3f}")
    return 0
