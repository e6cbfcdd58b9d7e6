"""The ``once`` command line as an operator uses it."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import yaml
from support.routers import ROOT, RouterProcess, write_topology


def _once(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "once.tools.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, **kw)


def _launch(tmp_path: Path, *options: str) -> subprocess.Popen[str]:
    """``once launch`` of two routers (free ports), as a process the test reads."""
    topo = tmp_path / "two.yaml"
    topo.write_text(yaml.safe_dump({"routers": {"A": {"listen": "127.0.0.1:0"}, "B": {"listen": "127.0.0.1:0"}},
                                    "links": []}))
    return subprocess.Popen([sys.executable, "-m", "once.tools.cli", "launch", str(topo), *options], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_bad_topology_is_one_line_naming_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"routers": {"A": {"listen": "127.0.0.1:99999"}}}))
    r = _once("router", str(bad), "--id", "A")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"{bad}: routers.A.listen: expected HOST:PORT with a port from 0 to 65535, got '127.0.0.1:99999'"]


def test_unknown_router_id(tmp_path):
    r = _once("router", str(write_topology(tmp_path)), "--id", "Z")
    assert r.returncode == 2 and "no router 'Z'" in r.stderr


def test_launch_prints_ready_per_router_and_stops_on_sigterm(tmp_path):
    proc = _launch(tmp_path)
    lines = [proc.stdout.readline().strip() for _ in range(3)]
    assert lines[0].startswith("router A ready amqp://127.0.0.1:")
    assert lines[1].startswith("router B ready amqp://127.0.0.1:")
    assert lines[2].startswith("2 router(s) ready")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "all routers stopped" in out


def test_launch_stops_its_routers_when_its_terminal_hangs_up(tmp_path):
    """SIGHUP (the terminal closed) killed the supervisor and left its routers running,
    holding their ports (issue 50, item 4)."""
    import socket

    proc = _launch(tmp_path)
    urls = [proc.stdout.readline().split()[-1] for _ in range(2)]
    assert proc.stdout.readline().startswith("2 router(s) ready")
    proc.send_signal(signal.SIGHUP)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "all routers stopped" in out
    for url in urls:  # (stopped: nothing listens there any more)
        host, port = url.removeprefix("amqp://").rsplit(":", 1)
        with socket.socket() as s:
            assert s.connect_ex((host, int(port))) != 0


def test_reload_reaches_the_routers_of_its_topology_and_no_other(tmp_path):
    """``once reload TOPOLOGY``: SIGHUP to the routers ``once launch`` started (README's
    ``kill -HUP $(pgrep -f "once router")`` missed them and hit every other router of the
    machine: issue 50, item 10)."""
    proc = _launch(tmp_path)
    try:
        for _ in range(3):
            proc.stdout.readline()
        topo = str(tmp_path / "two.yaml")
        both = _once("reload", topo)
        assert both.returncode == 0 and [line.split()[1] for line in both.stdout.splitlines()] == ["A", "B"], both
        one = _once("reload", topo, "--id", "B")
        assert one.returncode == 0 and [line.split()[1] for line in one.stdout.splitlines()] == ["B"], one
        other = tmp_path / "other.yaml"
        other.write_text((tmp_path / "two.yaml").read_text())
        _one_line(_once("reload", str(other)), 4, "no router of", "runs on this host")
        _one_line(_once("reload", topo, "--id", "Z"), 4, "no router Z of")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    assert err.count("router A: SIGHUP: reloaded") == 1 and err.count("router B: SIGHUP: reloaded") == 2, err


def test_send_and_recv_commands(router: RouterProcess):
    recv = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "recv", "cli-topic", "--url", router.url, "--count", "3",
                             "--timeout", "20"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert recv.stderr.readline().startswith("subscribed to cli-topic")
    sent = _once("send", "cli-topic", "one", "two", "three", "--url", router.url)
    assert sent.returncode == 0 and "sent 3, accepted 3" in sent.stdout
    out, _ = recv.communicate(timeout=30)
    assert out.split() == ["one", "two", "three"]


def test_once_help_lists_the_commands():
    r = _once("--help")
    for cmd in ("router", "launch", "send", "recv", "bench"):
        assert cmd in r.stdout


def test_launch_rejects_bad_topology_before_starting(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("routers: 5\n")
    r = _once("launch", str(bad))
    assert r.returncode == 2 and r.stderr.strip() == f"{bad}: routers: expected a mapping, got 5"


def test_launch_mesh3_reports_each_router_ready_with_its_neighbours(tmp_path):
    from once.tools.topology_ports import with_free_ports

    topo = with_free_ports(ROOT / "topologies" / "mesh3.yaml", tmp_path / "mesh3.yaml")
    proc = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "launch", str(topo)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [proc.stdout.readline().strip() for _ in range(4)]
    for line, (rid, neighbours) in zip(lines, [("A", "B,C"), ("B", "A,C"), ("C", "A,B")]):
        assert line.startswith(f"router {rid} ready amqp://127.0.0.1:") and line.endswith(f"neighbours {neighbours}")
    assert lines[3].startswith("3 router(s) ready")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "all routers stopped" in out


# ------------------------------------------------------ one line, distinct exit codes (issue 15)

def _one_line(r: subprocess.CompletedProcess[str], code: int, *parts: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and len(lines) == 1, r.stderr
    for part in parts:
        assert part in lines[0], lines[0]


def test_a_port_in_use_is_one_line_with_its_own_exit_code(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = _once("router", str(write_topology(tmp_path)), "--id", "A", "--listen", f"127.0.0.1:{port}")
    _one_line(r, 3, f"once router: cannot listen for amqp on 127.0.0.1:{port}", "in use", "--listen")


def test_launch_on_a_machine_whose_port_is_taken_names_the_flag_and_the_flag_works(tmp_path):
    """Another process holds the default router's port: ``once launch`` says which flag moves
    it, and with that flag the router comes up there (issue 50: the README's commands on
    such a machine)."""
    import socket

    from once.tools.topology_ports import free_port

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        topo = tmp_path / "one.yaml"
        topo.write_text(yaml.safe_dump({"routers": {"A": {"listen": f"127.0.0.1:{port}"}}, "links": []}))
        r = _once("launch", str(topo))
        assert r.returncode == 3, r.stderr
        assert f"cannot listen for amqp on 127.0.0.1:{port}" in r.stderr and "--listen HOST:PORT" in r.stderr
        moved = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "launch", str(topo), "--listen",
                                 f"127.0.0.1:{moved}"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout.readline().startswith(f"router A ready amqp://127.0.0.1:{moved}")
            sent = _once("send", "t", "x", "--url", f"amqp://127.0.0.1:{moved}")
            assert sent.returncode == 0 and "accepted 1" in sent.stdout
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=20)
    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump({"routers": {"A": {"listen": "127.0.0.1:0"}, "B": {"listen": "127.0.0.1:0"}},
                                   "links": []}))
    _one_line(_once("launch", str(two), "--listen", "127.0.0.1:0"), 2, "--listen and --http are for a topology of one")


def test_an_address_this_host_does_not_have(tmp_path):
    r = _once("router", str(write_topology(tmp_path)), "--id", "A", "--listen", "192.0.2.1:0")
    _one_line(r, 3, "cannot listen for amqp on 192.0.2.1:0", "no such address")


def test_bad_router_arguments_are_usage_errors(tmp_path):
    topo = str(write_topology(tmp_path))
    _one_line(_once("router", topo, "--id", "Z", "--listen", "127.0.0.1:0"), 2, "no router 'Z'")
    _one_line(_once("router", topo, "--id", "A", "--listen", "foo"), 2, "--listen foo: expected HOST:PORT")
    binary = tmp_path / "topology.bin"
    binary.write_bytes(bytes(range(256)))
    _one_line(_once("router", str(binary), "--id", "A"), 2, f"{binary}: not a text file")


def test_send_and_recv_to_no_router_say_so(tmp_path):
    from once.tools.topology_ports import free_port

    url = f"amqp://127.0.0.1:{free_port()}"
    _one_line(_once("send", "t", "x", "--url", url, "--timeout", "5"), 4, f"once send: cannot connect to {url}",
              "once launch")
    _one_line(_once("recv", "t", "--url", url), 4, f"once recv: cannot connect to {url}")


def test_send_names_a_rejection_and_waits_no_longer_than_its_timeout(router: RouterProcess):
    from support.proton_clients import ProtonSubscriber

    sub = ProtonSubscriber(router.url, "judged", auto_accept=False)
    proc = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "send", "judged", "bad", "--url", router.url],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert sub.get().body == "bad"
    sub.command("reject")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and "sent 1, accepted 0" in out
    assert err.strip() == "not accepted: 'bad': rejected: amqp:not-allowed: rejected by a subscriber"
    r = _once("send", "judged", "held", "--url", router.url, "--timeout", "1")  # nobody accepts: no outcome
    _one_line(r, 5, "no outcome within 1 s after 1 message(s) sent, 0 answered", "--timeout")
    sub.close()


def test_options_go_anywhere_and_there_is_a_version(router: RouterProcess):
    r = _once("send", "anywhere", "--count", "3", "a", "--url", router.url)
    assert r.returncode == 0 and "sent 3, accepted 3" in r.stdout
    v = _once("--version")
    assert v.returncode == 0 and v.stdout.startswith("once ")


def test_recv_exits_non_zero_when_its_router_goes_away(tmp_path):
    router = RouterProcess(write_topology(tmp_path))
    recv = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "recv", "gone", "--url", router.url], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert recv.stderr.readline().startswith("subscribed to gone")
    router.proc.send_signal(signal.SIGKILL)
    router.stop()
    _, err = recv.communicate(timeout=30)
    assert recv.returncode == 6 and "once recv: amqp://" in err and "went away" in err and "Traceback" not in err


def _children(pid: int) -> dict[str, int]:
    """The router processes ``once launch`` runs: router id -> pid."""
    out = {}
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        cmd = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        if b"--id" in cmd:
            out[cmd[cmd.index(b"--id") + 1].decode()] = int(child)
    return out


def test_launch_starts_a_router_that_died_again_and_the_others_keep_running(tmp_path):
    import os
    import queue
    import threading

    proc = _launch(tmp_path)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(x.strip()) for x in proc.stdout], daemon=True)
    reader.start()
    assert [lines.get(timeout=20) for _ in range(3)][2].startswith("2 router(s) ready")
    before = _children(proc.pid)
    os.kill(before["A"], signal.SIGKILL)
    again = lines.get(timeout=20)  # the supervisor starts it again (after 0.5 s)
    assert again.startswith("router A ready amqp://127.0.0.1:")
    after = _children(proc.pid)
    assert after["B"] == before["B"] and after["A"] != before["A"]  # B never stopped
    proc.send_signal(signal.SIGTERM)
    proc.wait(20)
    reader.join(5)  # (it owns stdout until the end: communicate() would close it under it)
    err = proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == 0
    assert "once launch: router A exited with -9; starting it again in 0.5 s" in err


def test_launch_no_restart_stops_all_when_one_dies(tmp_path):
    import os

    proc = _launch(tmp_path, "--no-restart")
    assert [proc.stdout.readline() for _ in range(3)][2].startswith("2 router(s) ready")
    os.kill(_children(proc.pid)["B"], signal.SIGKILL)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1 and "router B exited with -9; stopping the others (--no-restart)" in err
    assert "all routers stopped" in out


def test_harness_refuses_a_random_run_too_short_for_a_fault():
    r = _once("harness", "--random", "--messages", "500", "--quiet")
    _one_line(r, 2, "once harness: --messages 500", "too short for a fault", "at least 4000 messages")


def test_router_logs_what_an_operator_needs_and_survives_sighup(tmp_path):
    import json as jsonlib

    from support.proton_clients import ProtonPublisher, ProtonSubscriber

    topo = write_topology(tmp_path, settings={"subscriber_grace": "1s"})
    proc = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "router", str(topo), "--id", "A", "--listen",
                             "127.0.0.1:0", "--log-level", "info,guard=error", "--log-format", "json"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    router = RouterProcess.adopt(proc, topo, "A")
    sub = ProtonSubscriber(router.url, "logged", name="watcher", container_id="ops", auto_accept=False)
    pub = ProtonPublisher(router.url, "logged")
    outcome = pub.send("m")
    assert sub.get().body == "m"
    sub.close()  # closes its connection without answering: ...
    assert outcome.get(timeout=20) == 36  # ...after the grace it expires owing one delivery
    proc.send_signal(signal.SIGHUP)  # reloads, never stops
    pub.close()
    assert router.alive()
    proc.send_signal(signal.SIGUSR1)  # the live state, one JSON object
    from support.routers import wait_for

    wait_for(lambda: any('"event": "snapshot"' in line for line in router._log), what="the snapshot")
    records = [jsonlib.loads(line) for line in router.stderr_lines()]
    assert all({"time", "router", "level", "module", "message"} <= set(r) for r in records)
    # Fields of their own, not a sentence to parse (issue 25)
    events = {r.get("event"): r for r in records}
    opened = events["connection.opened"]
    assert opened["container"] in ("ops", opened["container"]) and opened["peer"].startswith("127.0.0.1:")
    access = next(r for r in records if r.get("event") == "access" and r["container"] == "ops")
    assert access["module"] == "access" and access["host"] == "127.0.0.1" and access["mechanism"] == "ANONYMOUS"
    attached = events["subscriber.attached"]
    assert (attached["topic"], attached["container"], attached["link"]) == ("logged", "ops", "watcher")
    gone = events.get("subscriber.expired") or events["subscriber.detached"]
    assert gone["topic"] == "logged" and gone.get("owed", 1) == 1
    # (a publisher's link at info too, as a subscriber's: it was at debug, issue 50, item 14)
    assert events["publisher.attached"]["topic"] == "logged" and events["publisher.attached"]["level"] == "info"
    assert events["publisher.detached"]["topic"] == "logged"
    snap = events["snapshot"]
    assert snap["totals"]["published"] == 1 and snap["records"] == 0 and snap["memory"]["rss_bytes"] > 0
    text = "\n".join(r["message"] for r in records)
    for needle in ("connection from", "opened (container ops", "ops/watcher subscribed to 'logged'",
                   "SIGHUP: reloaded the users"):
        assert needle in text, (needle, text)
    assert "with 1 deliveries it had not accepted" in text or "unsubscribed from 'logged'" in text


def test_a_bad_log_level_is_a_usage_error(tmp_path):
    r = _once("router", str(write_topology(tmp_path)), "--id", "A", "--log-level", "loud")
    _one_line(r, 2, "--log-level loud: 'loud' is not one of debug, info, warning, error")


def test_audit_without_java_says_how_to_get_it(tmp_path):
    import os

    (tmp_path / "journal").mkdir()
    env = dict(os.environ, JAVA_HOME=str(tmp_path / "no-java-here"))
    r = _once("audit", str(tmp_path), env=env)
    _one_line(r, 2, f"once audit: JAVA_HOME={tmp_path / 'no-java-here'} has no bin/java", "openjdk-17")


def test_the_wheel_installs_one_once_namespace_beside_other_tools_and_records(tmp_path):
    """The built wheel puts ``once`` alone at the top of site-packages. Installed into an
    empty venv (dependencies from the registry) that already holds another project's
    top-level ``tools`` and ``records``, the installed ``once`` launches a network,
    carries a message and finds the shipped files; the other modules stay theirs. Built with
    no C compiler, it is pure Python and says why."""
    import json
    import os
    import shutil
    import zipfile

    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the venv's own packages, nothing else
    # Built where no C compiler is found: the install must still work, as pure Python, and
    # say why (and compiling would take a minute and a half; the compiled install's layout
    # is checked where the suite runs compiled, tests/test_modes.py).
    clean["CC"] = str(tmp_path / "no-such-cc")

    src = tmp_path / "src"  # (a copy: building writes into the source tree)
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "runs", "build", "*.egg-info", "node_modules",
                                                               "__pycache__", ".pytest_cache", ".hypothesis"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)  # no system site-packages
    py, once = str(venv / "bin" / "python"), str(venv / "bin" / "once")
    wheels = tmp_path / "wheels"
    built = subprocess.run([py, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(src)],
                           capture_output=True, text=True, timeout=600, env=clean)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = wheels.glob("once-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        top = {name.split("/")[0] for name in zf.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"once"}, top
    with zipfile.ZipFile(wheel) as zf:
        assert not [n for n in zf.namelist() if n.endswith(".so")]
        assert json.loads(zf.read("once/records/compiled.json"))["reason"].startswith("no compiled modules (CompileError: ")
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True, env=clean).stdout.strip())
    (site / "tools").mkdir()
    (site / "tools" / "__init__.py").write_text("WHOSE = 'another project'\n")
    (site / "records.py").write_text("WHOSE = 'another project'\n")
    pip = subprocess.run([py, "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True, timeout=600, env=clean)
    assert pip.returncode == 0, pip.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run([py, "-c", "import once.topologies, proton, tools, records; "
                            "print(once.topologies.__file__, proton.__file__, tools.WHOSE == records.WHOSE)"],
                           cwd=elsewhere, capture_output=True, text=True, timeout=60, env=clean)
    assert where.returncode == 0, where.stderr
    *files, theirs = where.stdout.split()
    assert all(f.startswith(str(venv)) for f in files) and theirs == "True", where  # the installed copies only
    mode = subprocess.run([py, "-c", "from once.records.compiled import MODE; print(MODE.line())"],
                          cwd=elsewhere, capture_output=True, text=True, timeout=60, env=clean)
    assert mode.stdout.startswith("pure Python (no compiled modules (CompileError: "), mode
    scenarios = subprocess.run([py, "-c", "from importlib.resources import files; "
                                "print(sorted(p.name for p in (files('once.topologies') / 'scenarios').iterdir()))"],
                               cwd=elsewhere, capture_output=True, text=True, timeout=60, env=clean)
    assert "group-member-killed.yaml" in scenarios.stdout and "link-flap.yaml" in scenarios.stdout
    console = subprocess.run([py, "-c", "from importlib.resources import files; "
                              "print(len((files('once.router.http') / 'console.html').read_bytes()))"],
                             cwd=elsewhere, capture_output=True, text=True, timeout=60, env=clean)
    assert console.returncode == 0 and int(console.stdout) > 1000, console
    # A shipped scenario by its name, from the installed copy, with a relative --out (issue 25)
    scenario = subprocess.run([once, "harness", "publisher-router-dies", "--messages", "300", "--out", "rel", "--quiet"],
                              cwd=elsewhere, capture_output=True, text=True, timeout=300, env=clean)
    assert scenario.returncode == 0 and scenario.stdout.rstrip().endswith("PASS"), scenario
    assert (elsewhere / "rel" / "report.json").is_file()
    from once.tools.topology_ports import with_free_ports

    topo = with_free_ports(ROOT / "topologies" / "line3.yaml", elsewhere / "line3.yaml")
    launch = subprocess.Popen([once, "launch", str(topo)], cwd=elsewhere, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=clean)
    try:
        lines = [launch.stdout.readline().strip() for _ in range(4)]
        assert lines[3].startswith("3 router(s) ready"), (lines, launch.stderr.read() if launch.poll() is not None else "")
        url_a, url_c = (lines[i].split()[3] for i in (0, 2))
        recv = subprocess.Popen([once, "recv", "fresh", "--url", url_c, "--count", "1", "--timeout", "30"],
                                cwd=elsewhere, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean)
        assert recv.stderr.readline().startswith("subscribed to fresh")
        sent = subprocess.run([once, "send", "fresh", "hello", "--url", url_a, "--timeout", "30"], cwd=elsewhere,
                              capture_output=True, text=True, timeout=60, env=clean)
        assert sent.returncode == 0 and "accepted 1" in sent.stdout, sent
        out, _ = recv.communicate(timeout=30)
        assert out.split() == ["hello"]
    finally:
        launch.send_signal(signal.SIGINT)
        out, _ = launch.communicate(timeout=30)
    assert "all routers stopped" in out


def test_bench_says_what_it_is_doing_as_it_goes():
    r = _once("bench", "single-1to1", "--messages", "3000")
    assert r.returncode == 0, r.stderr
    err = r.stderr.splitlines()
    assert err[0] == "bench single-1to1 (1/1): 3000 messages ..."  # (not a terminal: a line, not a bar)
    assert err[1].startswith("bench single-1to1: ") and "msg/s" in err[1]
    assert r.stdout.splitlines()[1].startswith("single-1to1")


def test_recv_reconnect_comes_back_when_its_router_does(tmp_path):
    topo = write_topology(tmp_path)
    first = RouterProcess(topo)
    port = first.port
    recv = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "recv", "back", "--url", first.url, "--count", "2",
                             "--reconnect"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert recv.stderr.readline().startswith("subscribed to back")
    assert _once("send", "back", "before", "--url", first.url).returncode == 0
    assert recv.stdout.readline().strip() == "before"
    first.proc.send_signal(signal.SIGKILL)
    first.stop()
    assert "trying again in 1 s (--reconnect)" in recv.stderr.readline()
    proc = subprocess.Popen([sys.executable, "-m", "once.tools.cli", "router", str(topo), "--id", "A", "--listen",
                             f"127.0.0.1:{port}"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = RouterProcess.adopt(proc, topo, "A")
    line = recv.stderr.readline()
    while line and "subscribed to back" not in line:  # (one "trying again" line per second until it is up)
        line = recv.stderr.readline()
    assert "subscribed to back" in line, recv.poll()
    assert _once("send", "back", "after", "--url", second.url).returncode == 0
    out, _ = recv.communicate(timeout=30)
    assert recv.returncode == 0 and out.strip() == "after"
    second.stop()


def test_a_log_level_for_a_module_that_does_not_log_is_refused(tmp_path):
    r = _once("router", str(write_topology(tmp_path)), "--id", "A", "--log-level", "info,core=debug")
    _one_line(r, 2, "--log-level info,core=debug: no module 'core'", "edge, mqtt, connections, links, network")
