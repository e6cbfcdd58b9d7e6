"""The ``once`` command line: thin wrappers over library code."""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from once.router.config import TopologyError
from once.router.listeners import ListenError
from once.router.logs import LogSpecError
from once.topologies import resolve

from .exits import CommandError, Exit

if TYPE_CHECKING:
    from .clients import ClientTls

DEFAULT_TOPOLOGY = "topologies/single.yaml"


def _default_topology() -> str:
    here = Path(DEFAULT_TOPOLOGY)
    if here.exists():
        return str(here)
    return resolve("single")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="once", description="AMQP 1.0 router network with exactly-once publish-subscribe",
                                epilog="exit codes: " + ", ".join(f"{e.value} {e.name.lower()}" for e in Exit))
    p.add_argument("--version", action="version", version=f"once {_version()}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("router", help="run one router of a topology in the foreground")
    r.add_argument("topology", help="a topology file, or the name of a shipped one (single, line3, mesh3, ring5, ring7c)")
    r.add_argument("--id", required=True, help="the router id in the topology")
    r.add_argument("--listen", help="override the listen address (HOST:PORT, port 0 picks a free one)")
    r.add_argument("--mqtt", metavar="HOST:PORT", help="take MQTT 3.1.1 and 5.0 clients there (overrides the "
                   "topology's routers.ID.mqtt; port 0 picks a free one)")
    r.add_argument("--http", metavar="HOST:PORT", help="serve /metrics, /healthz, /readyz, the management API and "
                   "the console there (overrides the topology's routers.ID.http; port 0 picks a free one)")
    r.add_argument("--join", metavar="HOST:PORT", action="append", help="join a running network through this "
                   "router's inter_router address (repeatable; the topology's routers.ID.join too): a router in "
                   "nobody's file links to it with the network's credentials (auth.router_secret or tls) and "
                   "learns the network from it")
    r.add_argument("--journal", metavar="DIR", help="write the delivery journal under DIR (off by default)")
    r.add_argument("--state", metavar="DIR", help="keep this router's subscriptions under DIR, so a restart (of this "
                   "router or of every router) keeps the suspended ones waited for (off by default: memory only)")
    r.add_argument("--allow-empty-users", action="store_true", help="let SIGHUP take a users file that has no "
                   "users any more (by default the running users stay, with a warning: password logins would end)")
    r.add_argument("--log-level", default="info", metavar="SPEC",
                   help="debug, info, warning or error, for all or per module: info,edge=debug,network=warning")
    r.add_argument("--log-format", default="text", choices=("text", "json"), help="json: one object per line")

    la = sub.add_parser("launch", help="start every router of a topology on this machine (one process each)")
    la.add_argument("topology", nargs="?", default=None,
                    help=f"a topology file, or the name of a shipped one (single, line3, mesh3, ring5, ring7c); default: {DEFAULT_TOPOLOGY}")
    la.add_argument("--journal", metavar="DIR", help="every router writes its delivery journal under DIR")
    la.add_argument("--state", metavar="DIR", help="every router keeps its subscriptions under DIR/ID (see once router "
                    "--state)")
    la.add_argument("--log-level", default="info", metavar="SPEC", help="for every router (see once router --help)")
    la.add_argument("--log-format", default="text", choices=("text", "json"))
    la.add_argument("--no-restart", action="store_true",
                    help="a router that dies stops them all (default: it is started again, with back-off)")
    la.add_argument("--listen", metavar="HOST:PORT", help="a topology of one router (the default one): its AMQP "
                    "address instead of the file's (another process has 5672? --listen 127.0.0.1:5673, and give "
                    "send and recv --url amqp://127.0.0.1:5673)")
    la.add_argument("--http", metavar="HOST:PORT", help="a topology of one router: its http endpoint instead of "
                    "the file's")

    rl = sub.add_parser("reload", help="the routers of a topology on this host take up their users file, policy, "
                        "consumer groups, certificates and links again (SIGHUP)")
    rl.add_argument("topology", nargs="?", default=None,
                    help=f"a topology file, or the name of a shipped one; default: {DEFAULT_TOPOLOGY}")
    rl.add_argument("--id", action="append", default=[], help="only this router (repeatable)")

    s = sub.add_parser("send", help="publish messages to a topic", usage="once send TOPIC [BODY ...] [options]")
    s.add_argument("topic")
    s.add_argument("messages", nargs="*", metavar="BODY", help="message bodies (default: read lines from stdin)")
    s.add_argument("--url", default="amqp://127.0.0.1:5672", help="the router to talk to (default: the one `once launch` starts)")
    s.add_argument("--count", type=int, default=None, help="send COUNT messages: the bodies given, repeated, or numbered ones")
    s.add_argument("--timeout", type=float, default=30.0,
                   help="seconds to wait for the router, and for each message's outcome (default 30)")
    s.add_argument("--verbose", action="store_true", help="every 2 s while outcomes are still to come, say whom "
                   "they wait for (asks the router's http endpoint: --http)")
    s.add_argument("--http", default=None, help="with --verbose: the router's http endpoint (default: "
                   "http://HOST:8672 when --url is the default)")
    _tls_options(s)
    _credentials(s)
    _journal_option(s)

    rc = sub.add_parser("recv", help="subscribe to a topic and print what arrives")
    rc.add_argument("topic")
    rc.add_argument("--url", default="amqp://127.0.0.1:5672", help="the router to talk to (default: the one `once launch` starts)")
    rc.add_argument("--count", type=int, default=0, help="stop after COUNT messages (0: run until Ctrl-C)")
    rc.add_argument("--name", default=None, help="link name (the subscriber key is container-id + name); with "
                    "--group, the member's name within the group")
    rc.add_argument("--timeout", type=float, default=None, help="stop after this many idle seconds")
    rc.add_argument("--group", default=None,
                    help="join the topic's consumer group NAME: each message goes to one member")
    rc.add_argument("--reconnect", action="store_true",
                    help="when the router goes away (or is not up yet), try again every second instead of exiting")
    rc.add_argument("--exclusive", action="store_true",
                    help="with --group: one active member gets everything, the others stand by")
    _tls_options(rc)
    _credentials(rc)
    _journal_option(rc)

    st = sub.add_parser("stat", help="a running router's state, from its http endpoint (like qdstat)")
    for flag, what in (("g", "general (the default)"), ("c", "connections"), ("l", "links"), ("a", "topics"),
                       ("n", "the network as the router sees it"), ("s", "subscribers and consumer groups"),
                       ("m", "memory and the in-flight window"),
                       ("p", "what each user and source host holds against the policy, and what it refused")):
        st.add_argument(f"-{flag}", dest="views", action="append_const", const=flag, help=what)
    st.add_argument("--router", default="http://127.0.0.1:8672",
                    help="the router's http endpoint (default: router A of the shipped topologies; "
                         "http://USER:PASSWORD@HOST:PORT where the topology has auth.http), or its AMQP port "
                         "(amqp://USER:PASSWORD@HOST:PORT or amqps://...: its $management node, no HTTP port needed)")
    _tls_options(st)
    _credentials(st)
    st.add_argument("--json", action="store_true", help="the API's JSON instead of tables (for scripts)")
    st.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the router (default 10)")

    mg = sub.add_parser("manage", help="change a running router, as an admin of its users file (like qdmanage): "
                        "close-connection ID, detach-link ID LINK, drop-subscriber CONTAINER LINK, reload, drain",
                        usage="once manage {close-connection ID,detach-link ID LINK,drop-subscriber CONTAINER LINK,"
                              "reload,drain} [--router URL]")
    mg.add_argument("action", choices=("close-connection", "detach-link", "drop-subscriber", "reload", "drain"))
    mg.add_argument("args", nargs="*")
    mg.add_argument("--router", default="http://127.0.0.1:8672",
                    help="the router's http endpoint with an admin's credentials: http://USER:PASSWORD@HOST:PORT; or "
                         "its AMQP port (amqp://USER:PASSWORD@HOST:PORT or amqps://...: its $management node)")
    _tls_options(mg)
    _credentials(mg)
    mg.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the router (default 10)")

    h = sub.add_parser("harness", help="run a failover scenario and check that nothing was lost or duplicated")
    h.add_argument("scenario", nargs="?", help="a scenario file, or the name of a shipped one (publisher-router-dies, "
                   "subscriber-crash, ...: see topologies/scenarios/)")
    h.add_argument("--out", help="directory for the run's records (default: runs/NAME-TIME)")
    h.add_argument("--random", action="store_true", help="a random fault schedule instead of a file")
    h.add_argument("--seed", type=int, default=1, help="seed of --random (repeat a run with the same seed)")
    h.add_argument("--runs", type=int, default=1, help="with --random: this many schedules, seeds SEED, SEED+1, ...")
    h.add_argument("--messages", type=int, default=None, help="messages per publisher (overrides the scenario)")
    h.add_argument("--topology", default="ring5.yaml", help="with --random: a topology in topologies/, or a path (default ring5.yaml)")
    h.add_argument("--groups", action="store_true",
                   help="with --random: two more subscribers, members of one consumer group")
    h.add_argument("--freeze", action="store_true",
                   help="with --random: routers also stopped (SIGSTOP) for 0.5-6 s and continued (SIGCONT)")
    h.add_argument("--link-faults", action="store_true",
                   help="with --random: inter-router links also slowed (5-80 ms, 1-5 s) or gone quiet (bytes "
                   "held, connections open, 0.5-4 s), through the harness's proxy")
    h.add_argument("--clients", default="once",
                   help="with --random: the kinds each client is drawn from, of once, proton (a standard AMQP "
                   "client: python-qpid-proton) and mqtt (paho, MQTT 5.0, QoS 2, a persistent session), comma "
                   "separated (default once)")
    h.add_argument("--quiet", action="store_true", help="no progress lines, only the report")
    h.add_argument("--audit", action="store_true", help="then audit each run's journals on Spark (once audit)")
    h.add_argument("--master", default=None, help="with --audit: Spark master URL (default local[*])")

    tp = sub.add_parser("topology", help="the running network written back as a topology file (routers that "
                        "joined at runtime included)", usage="once topology dump [--router URL] [-o FILE]")
    tp.add_argument("action", choices=("dump",))
    tp.add_argument("--router", default="http://127.0.0.1:8672",
                    help="a router's http endpoint (http://USER:PASSWORD@HOST:PORT where auth.http is on), or its "
                         "AMQP port (amqp://USER:PASSWORD@HOST:PORT or amqps://...: its $management node)")
    tp.add_argument("-o", "--output", default=None, metavar="FILE", help="write it there (default: standard output)")
    tp.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the router (default 10)")
    _tls_options(tp)
    _credentials(tp)

    u = sub.add_parser("user", help="add or remove a user in a users file (salted hashes; the password is prompted "
                       "for, or read from stdin)", usage="once user {add,remove} NAME --file PATH [--group G ...]")
    u.add_argument("action", choices=("add", "remove"))
    u.add_argument("name")
    u.add_argument("--file", required=True, help="the users file (auth.users_file of the topology)")
    u.add_argument("--group", action="append", default=[], help="with add: a user group of the policies (repeatable; without it, a user "
                   "added again keeps its groups)")

    a = sub.add_parser("audit", help="check a run's delivery journals on Apache Spark (PySpark)")
    a.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                   help="run directories (with journal/): local paths or any path Spark reads; several share one "
                   "Spark session")
    a.add_argument("--master", default=None, help="Spark master URL, e.g. spark://host:7077 (default local[*])")

    o = sub.add_parser("outbox", help="the transactional outbox: make its tables, write rows, run the relay",
                       usage="once outbox {init,send,run} [TOPIC BODY ...] --db URL [options]")
    o.add_argument("action", choices=("init", "send", "run"), help="init: create the tables; send: commit rows (one "
                   "transaction) for TOPIC, one per BODY (default: lines from stdin); run: the relay, until "
                   "SIGTERM or Ctrl-C")
    o.add_argument("args", nargs="*", metavar="TOPIC BODY", help="with send: the topic, then the bodies")
    o.add_argument("--db", required=True, help="sqlite:///PATH (embedded) or postgresql://USER@HOST:PORT/DB")
    o.add_argument("--shards", type=int, default=2, help="with init: shards (default 2: one spare)")
    o.add_argument("--partitions", type=int, default=1, help="with init: tables per shard (default 1)")
    o.add_argument("--shard", type=int, default=0, help="with send: the shard (default 0)")
    o.add_argument("--key", default=None, help="with send: the key (one key's messages: one partition, in order)")
    o.add_argument("--header", action="append", default=[], metavar="NAME=VALUE",
                   help="with send: an application property (repeatable)")
    o.add_argument("--router", action="append", default=[], metavar="URL",
                   help="with run: a router to publish through (repeatable: failover in that order)")
    o.add_argument("--lease", type=float, default=5.0, metavar="SECONDS",
                   help="with run: how long a relay's claim on a table holds unrenewed (default 5: a dead relay's "
                   "tables are taken over within that)")
    o.add_argument("--http", default=None, metavar="HOST:PORT",
                   help="with run: serve /metrics (Prometheus) and /healthz there (port 0 picks a free one)")
    o.add_argument("--stuck", type=float, default=30.0, metavar="SECONDS",
                   help="with run: a row with no outcome this long after it was sent has its table's links "
                   "start again (default 30)")
    o.add_argument("--journal", default=None, metavar="PATH",
                   help="with run: write each row's outcome to this delivery journal (CSV, for once audit)")
    o.add_argument("--name", default=None, help="with run: this relay's name in its log and journal "
                   "(default: a random id)")
    o.add_argument("--stranded-after", type=float, default=60.0, metavar="SECONDS",
                   help="with run: rows older than this are counted and logged as stranded (default 60)")

    sub.add_parser("sim", add_help=False, help="the in-process network: fault schedules on seeds, deterministic "
                   "('once sim --help'; 'once sim explore --help': the bounded exhaustive mode)")

    b = sub.add_parser("bench", help="measure throughput, latency, router CPU and memory")
    b.add_argument("scenarios", nargs="*", help="scenarios to run (default: the four data-path ones; also single-1to3, "
                   "single-ping, single-idle2000, single-group4, line3-group); 'memory': memory per in-flight delivery; "
                   "'core': the forwarding core alone, in-process (no sockets: the steadiest figure); 'mqtt' (or "
                   "'mqtt-1to1'): MQTT QoS 1 and 2 through once beside Mosquitto (C clients, libmosquitto) and beside "
                   "AMQP through once (Proton-C clients), alternating --rounds; 'outbox': rows an application "
                   "commits to rows a subscriber accepted, through the relay, on PostgreSQL and SQLite; 'attach': what a storm of "
                   "connections attaching links costs a router, with and without a policy's limits; 'network': --routers routers "
                   "(default 30) as processes boot and carry a failover harness run (boot time, memory per router)")
    b.add_argument("--clients", choices=("python", "c"), default="python",
                   help="load clients: ours in Python, or Proton-C ones built at first use (the router, not the "
                        "clients, is then what limits)")
    b.add_argument("--compare", metavar="REF", help="run this tree's routers and those of git REF back to back")
    b.add_argument("--against", metavar="qdrouterd=PATH",
                   help="run another router (Qpid Dispatch's qdrouterd, built by you; its Python package on "
                   "PYTHONPATH) under the same C clients, alternating with ours, and print the ratios")
    b.add_argument("--rounds", type=int, default=3, help="with --compare or --against: alternating rounds per side "
                   "(default 3)")
    b.add_argument("--json", dest="json_path", help="also write the results as JSON here")
    b.add_argument("--messages", type=int, default=200_000, help="messages per scenario")
    b.add_argument("--credit", type=int, default=1000, help="credit each bench subscriber grants (default 1000)")
    b.add_argument("--no-router", action="store_true", help="clients straight to each other: the clients' ceiling")
    b.add_argument("--journal", action="store_true", help="routers write their delivery journal (its cost)")
    b.add_argument("--tls", action="store_true", help="with --clients c: clients connect over TLS (amqps) and the "
                   "routers link over mutual TLS, with certificates made for the run (openssl); with --against, the peer too")
    b.add_argument("--routers", type=int, default=30, help="with 'network': how many routers (default 30)")
    b.add_argument("--edges", type=int, default=0, help="with 'network': how many of them are edge routers (default 0)")
    b.add_argument("--http", action="store_true", help="routers serve their http endpoint and the bench scrapes "
                   "each one's /metrics every second (the cost of being watched)")
    return p


def _tls_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ca", default=None, metavar="FILE",
                   help="amqps://: the CA (PEM) the router's certificate is checked against (default: the system's)")
    p.add_argument("--cert", default=None, metavar="FILE", help="amqps://: a client certificate (PEM) to present")
    p.add_argument("--key", default=None, metavar="FILE", help="amqps://: the --cert's private key (PEM)")


def _journal_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--journal", metavar="DIR", help="write this client's delivery journal under DIR, for `once audit` "
                   "(beside the routers' of `once launch --journal DIR`)")


def _credentials(p: argparse.ArgumentParser) -> None:
    p.add_argument("--user", default=None, help="authenticate as USER (SASL PLAIN over amqps://, or where the "
                   "router allows it in the clear); the password from ONCE_PASSWORD, else asked for on a terminal")
    p.add_argument("--password", default=None, help="USER's password (shown to every process of the machine: "
                   "prefer ONCE_PASSWORD)")


def _with_credentials(args: argparse.Namespace) -> str:
    """``--url`` with ``--user`` and its password in it (``amqp://USER:PASSWORD@HOST:PORT``,
    as Proton takes them; messages show the password as ``***``)."""
    if args.user is None:
        if args.password is not None:
            raise CommandError(Exit.USAGE, "--password needs --user")
        return str(args.url)
    import getpass
    from urllib.parse import quote

    password = args.password if args.password is not None else os.environ.get("ONCE_PASSWORD")
    if password is None:
        if not sys.stdin.isatty():
            raise CommandError(Exit.USAGE, f"--user {args.user}: no password (set ONCE_PASSWORD, or run it on a "
                               "terminal to be asked)")
        password = getpass.getpass(f"password for {args.user}: ")
    scheme, sep, rest = str(args.url).partition("://")
    if not sep:
        scheme, rest = "amqp", scheme
    host = rest.rpartition("@")[2]  # (a user in the URL too: --user wins)
    return f"{scheme}://{quote(args.user, safe='')}:{quote(password, safe='')}@{host}"


def _router_url(args: argparse.Namespace) -> str:
    """``--router`` with ``--user`` and its password in it (``stat`` and ``manage``)."""
    if args.user is None and args.password is None:
        return str(args.router)
    if not str(args.router).startswith(("amqp://", "amqps://")):
        raise CommandError(Exit.USAGE, "--user is for --router amqp://... (an http endpoint takes "
                                       "http://USER:PASSWORD@HOST:PORT)")
    return _with_credentials(argparse.Namespace(url=args.router, user=args.user, password=args.password))


def _client_tls(args: argparse.Namespace) -> ClientTls:
    from .clients import ClientTls

    return ClientTls(args.ca, args.cert, args.key)


def _version() -> str:
    try:
        return version("once")
    except PackageNotFoundError:  # (run from a checkout that was never installed)
        return "unknown"


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Options anywhere after the command (``once send news --count 3 a``): the command's own
    parser reads the rest intermixed; argparse cannot do that through subparsers."""
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    at = next((i for i, a in enumerate(argv) if a in subs.choices), None)
    if at is None or at > 0:
        return parser.parse_args(argv)  # --help, --version, or a usage error
    command = subs.choices[argv[at]]
    rest = argv[at + 1:]
    if argv[at] == "send" and all(a.startswith("-") for a in rest) and not {"-h", "--help"} & set(rest):
        # (intermixed parsing calls the optional bodies required too)
        command.error("the following argument is required: TOPIC (the bodies are optional: lines from stdin "
                      "by default)")
    args = command.parse_intermixed_args(argv[at + 1:])
    args.command = argv[at]
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["sim"]:  # (its own parsers read the rest: schedules', or explore's)
        from .sim_cli import sim

        return sim(argv[1:])
    parser = build_parser()
    args = parse(parser, argv)
    try:
        if args.command == "router":
            from once.router.main import main as router_main

            return router_main(resolve(args.topology), args.id, args.listen, args.journal, args.log_level, args.log_format,
                               args.state, args.http, args.mqtt, args.allow_empty_users, tuple(args.join or ()))
        if args.command == "launch":
            from once.router.logs import parse_levels

            from .launch import launch

            parse_levels(args.log_level)  # (a bad one is refused here, not by every router)
            override = [*(["--listen", args.listen] if args.listen else []), *(["--http", args.http] if args.http else [])]
            return launch(resolve(args.topology) if args.topology else _default_topology(), journal=args.journal,
                          state=args.state, restart=not args.no_restart,
                          logs=["--log-level", args.log_level, "--log-format", args.log_format], override=override)
        if args.command == "reload":
            from .reload import reload

            return reload(resolve(args.topology) if args.topology else _default_topology(), args.id)
        if args.command == "topology":
            from .topology_dump import dump

            return dump(_router_url(args), args.output, args.timeout, _client_tls(args))
        if args.command == "user":
            from .user import user

            return user(args.action, args.name, args.file, args.group)
        if args.command == "send":
            from .clients import send

            if args.count is not None and args.count < 0:
                raise CommandError(Exit.USAGE, f"--count {args.count}: expected a number of messages")
            http = args.http or ("http://127.0.0.1:8672" if args.url == "amqp://127.0.0.1:5672" else None)
            return send(_with_credentials(args), args.topic, args.messages, args.count, args.timeout, args.verbose,
                        http, _client_tls(args), args.journal)
        if args.command == "recv":
            from .clients import recv

            if args.exclusive and not args.group:
                raise CommandError(Exit.USAGE, "--exclusive needs --group NAME (one active member of a group)")
            if args.count < 0:
                raise CommandError(Exit.USAGE, f"--count {args.count}: expected a number of messages, or 0 for no end")
            return recv(_with_credentials(args), args.topic, args.count, args.name, args.timeout, args.group,
                        args.exclusive, args.reconnect, _client_tls(args), args.journal)
        if args.command == "manage":
            from .manage import manage

            return manage(_router_url(args), args.action, args.args, args.timeout, _client_tls(args))
        if args.command == "stat":
            from .stat_view import stat

            return stat(_router_url(args), args.views or [], args.json, args.timeout, _client_tls(args))
        if args.command == "harness":
            from .harness.main import harness

            return harness(args)
        if args.command == "audit":
            try:
                import pyspark  # noqa: F401  (the audit's modules import it as they load)
            except ImportError:
                raise CommandError(Exit.USAGE, "needs PySpark: python3 -m pip install 'once[audit]' (or -e "
                                   "'.[audit]' in a clone)") from None
            from .audit.main import main as audit_main

            return audit_main(args.run_dirs, args.master)
        if args.command == "outbox":
            from .outbox_cli import outbox

            return outbox(args)
        if args.command == "bench":
            if args.scenarios == ["memory"]:
                from .bench.memory import main as memory

                return memory()
            if args.scenarios in (["mqtt"], ["mqtt-1to1"]):
                from .bench.mqtt import main as mqtt_bench

                return mqtt_bench(min(args.messages, 200_000), args.rounds)
            if args.scenarios == ["outbox"]:
                from .bench.outbox import main as outbox_bench

                return outbox_bench(min(args.messages, 100_000), args.rounds, compare=args.compare)
            if args.scenarios == ["attach"]:
                from .bench.attach import main as attach_bench

                return attach_bench(args.rounds, args.compare)
            if args.scenarios == ["network"]:
                from .bench.network import main as network_bench

                return network_bench(args.routers, min(args.messages, 20_000), json_path=args.json_path, edges=args.edges)
            if args.scenarios == ["core"]:
                from .bench.core import main as core_loops

                return core_loops(min(args.messages, 200_000), args.compare, args.rounds)
            if args.against:
                from .bench.compare import against

                return against(args.against, args.scenarios or ["single-1to1", "single-1to3", "line3-1to1"],
                               args.messages, args.credit, args.rounds, args.tls)
            if args.compare:
                from .bench.compare import compare

                return compare(args.compare, args.scenarios or ["single-1to1", "line3-1to1"], args.messages, args.credit,
                               args.clients, args.rounds)
            from .bench.main import bench

            return bench(args.scenarios, args.json_path, args.messages, args.credit, args.no_router, args.journal,
                         args.clients, args.http, args.tls)
    except TopologyError as e:
        print(str(e), file=sys.stderr)
        return Exit.USAGE
    except LogSpecError as e:
        print(f"once {args.command}: {e}", file=sys.stderr)
        return Exit.USAGE
    except ListenError as e:
        print(f"once {args.command}: {e}", file=sys.stderr)
        return Exit.ADDRESS
    except CommandError as e:
        print(f"once {args.command}: {e.line}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
    except BrokenPipeError:
        # Its reader stopped reading (``once stat --json | head``): what it wanted it has.
        # (stdout points at nothing from here on: Python's flush at exit would fail again.)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return Exit.OK
    except Exception as e:  # noqa: BLE001 - one line, never a traceback (ONCE_DEBUG=1 shows it)
        if os.environ.get("ONCE_DEBUG"):
            raise
        print(f"once {args.command}: unexpected {type(e).__name__}: {e} (ONCE_DEBUG=1 shows where; please "
              "report it)", file=sys.stderr)
        return Exit.SOFTWARE
    return Exit.USAGE


if __name__ == "__main__":
    sys.exit(main())
