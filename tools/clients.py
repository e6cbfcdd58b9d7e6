"""``once send`` / ``once recv``: small Proton clients for trying a router out."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import sys
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from once.records.gid import compute_gid
from once.router.journal import Event
from proton import ConnectionException, Data, Delivery, LinkException, Message, SSLDomain, Timeout
from proton.reactor import ReceiverOption
from proton.utils import BlockingConnection, LinkDetached

from .exits import CommandError, Exit


@dataclass(frozen=True)
class ClientTls:
    """``--ca``, ``--cert`` and ``--key``: whom to trust, and the certificate to present."""

    ca: str | None = None  # PEM: the CA the router's certificate is checked against (None: the system's)
    cert: str | None = None  # PEM: our certificate (the router may ask for one, and SASL EXTERNAL uses it)
    key: str | None = None  # its private key, unencrypted

    def domain(self) -> SSLDomain:
        """Proton's client TLS settings: the router's certificate verified, and its name
        checked against the URL's host."""
        for flag, path in (("--ca", self.ca), ("--cert", self.cert), ("--key", self.key)):
            if path is not None and not os.path.isfile(path):
                raise CommandError(Exit.USAGE, f"{flag} {path}: no such file")
        if (self.cert is None) != (self.key is None):
            raise CommandError(Exit.USAGE, "--cert and --key go together (a certificate and its private key)")
        d = SSLDomain(SSLDomain.MODE_CLIENT)
        if self.ca is not None:
            d.set_trusted_ca_db(self.ca)
        if self.cert is not None:
            d.set_credentials(self.cert, self.key, None)
        d.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
        return d


def shown(url: str) -> str:
    """``url`` as a message may show it: a password in it (``amqp://USER:PASSWORD@HOST``)
    as ``***``."""
    parts = urlsplit(url if "://" in url else f"amqp://{url}")
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


def check_url(url: str) -> tuple[str, int]:
    """``amqp://HOST:PORT``, ``amqps://HOST:PORT`` (TLS) or ``HOST:PORT``: its host and port, or a
    one-line ``CommandError`` (exit 2 for a URL that is not one, 4 for a host that does not resolve)."""
    parts = urlsplit(url if "://" in url else f"amqp://{url}")
    if parts.scheme not in ("amqp", "amqps"):
        raise CommandError(Exit.USAGE, f"--url {shown(url)}: expected amqp://HOST:PORT or amqps://HOST:PORT, not a "
                                       f"{parts.scheme}:// URL")
    try:
        port = parts.port or (5671 if parts.scheme == "amqps" else 5672)
    except ValueError:
        raise CommandError(Exit.USAGE, f"--url {shown(url)}: the port is not a number from 0 to 65535") from None
    if not parts.hostname:
        raise CommandError(Exit.USAGE, f"--url {shown(url)}: no host (expected amqp://HOST:PORT)")
    try:
        socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise CommandError(Exit.UNREACHABLE, f"cannot connect to {shown(url)}: no such host {parts.hostname!r} "
                                             f"({e.strerror})") from None
    return parts.hostname, port


def connect(url: str, timeout: float | None, container: str | None = None,
             tls: ClientTls | None = None) -> BlockingConnection:
    """A connection, or a one-line ``CommandError`` saying why there is none."""
    check_url(url)
    kw: dict[str, Any] = {"container_id": container} if container else {}
    if url.startswith("amqps://"):
        kw["ssl_domain"] = (tls or ClientTls()).domain()
    elif tls is not None and tls != ClientTls():
        raise CommandError(Exit.USAGE, f"--ca, --cert and --key are for amqps:// URLs, not {shown(url)}")
    try:
        return BlockingConnection(url, timeout=timeout, **kw)
    except ConnectionException as e:
        why = str(e).split("Condition(", 1)[-1].split("'")[3] if "Condition(" in str(e) else str(e)
        if "certificate verify failed" in why.lower():
            # (a router answered: its certificate is the problem, not its absence)
            raise CommandError(Exit.USAGE, f"cannot connect to {shown(url)}: the router's certificate does not verify "
                                           f"({why}): --ca must name the CA that signed it, and the certificate must "
                                           "name the URL's host as a DNS name (Proton never matches IP addresses: "
                                           "amqps://localhost:PORT with DNS:localhost)") from None
        if why.startswith("Authentication failed"):
            # (a router answered, and refused the credentials: not one that is absent)
            raise CommandError(Exit.REFUSED, f"{shown(url)} refused the credentials: {why} (a user of its users "
                                             "file: amqp://USER:PASSWORD@HOST:PORT, or --user)") from None
        raise CommandError(Exit.UNREACHABLE, f"cannot connect to {shown(url)}: {why} (is a router running there? "
                                             "`once launch` starts one)") from None
    except Timeout:
        raise CommandError(Exit.TIMEOUT, f"{shown(url)} did not answer within {timeout:g} s") from None


def refused(e: Exception, url: str, what: str) -> CommandError | None:
    """The router closed the link with an error (a pattern to publish to, a topic it does
    not take, a policy's refusal): a one-line usage error naming its reason, not a router
    that went away."""
    link = getattr(e, "link", None) if isinstance(e, LinkDetached) else None
    cond = link.remote_condition if link is not None else None
    if cond is None:
        return None
    why = cond.description or cond.name
    code = Exit.REFUSED if cond.name in ("amqp:unauthorized-access", "amqp:resource-limit-exceeded") else Exit.USAGE
    return CommandError(code, f"{shown(url)} refused {what}: {why} ({cond.name})")


class ClientJournal:
    """``--journal DIR``: this command's delivery journal for ``once audit`` (as the
    harness's clients write theirs), ``DIR/ROLE-NAME.csv``, and what it is, for the audit's
    rules, ``DIR/client-NAME.json`` (a standard client: at least once, repeats marked)."""

    def __init__(self, directory: str, role: str, topic: str, group: str | None = None) -> None:
        from once.router.journal import Journal, Source

        self.name = f"{'send' if role == 'publisher' else 'recv'}-{os.getpid()}"
        path = Path(directory)
        source = Source.PUBLISHER if role == "publisher" else Source.SUBSCRIBER
        self.journal = Journal(path / f"{source.value}-{self.name}.csv", source, self.name, sync_every_row=True)
        self.topic = topic
        (path / f"client-{self.name}.json").write_text(json.dumps({self.name: {
            "role": role, "topic": topic, "guarantee": "at-least-once", "router": "", "group": group or ""}}))

    def add(self, event: Any, gid: bytes, peer: str = "", mid: str = "") -> None:
        self.journal.add(event, gid, self.topic, peer, mid)

    def close(self) -> None:
        self.journal.close()


VERBOSE_EVERY = 2.0  # seconds between --verbose's notes on outcomes still to come


def waiting_for(http: str | None, topic: str) -> str:
    """Whom a topic's outcomes wait for, from the router's management API (``--http``)."""
    if http is None:
        return "give --http URL (the router's http endpoint) to see whom they wait for"
    try:
        with urllib.request.urlopen(http.rstrip("/") + "/api/subscribers", timeout=5) as r:
            subs = json.loads(r.read())
    except (OSError, ValueError) as e:
        return f"the router's http endpoint {http} did not say ({e})"
    waits = [f"{s['container']}/{s['name']} at router {subs['router']}, suspended: its grace ends in "
             f"{s['deadline_s']:g} s unless it resumes" for s in subs["local"]
             if s["topic"] == topic and s["state"] == "suspended"]
    waits += [f"{s['container']}/{s['name']} at router {s['router']}, suspended (router {s['router']} keeps its "
              f"grace: `once stat -s` there says what is left)" for s in subs["remote"]
              if s["topic"] == topic and s["suspended"]]
    slow = [f"{s['container']}/{s['name']} at router {subs['router']} ({s['unsettled']} unanswered)"
            for s in subs["local"] if s["topic"] == topic and s["state"] != "suspended" and s["unsettled"]]
    if waits or slow:
        return "waiting for " + "; ".join(waits + slow)
    return "no suspended subscriber of it there: they wait for subscribers that have not answered yet"


_OUTCOMES = {Delivery.REJECTED: "rejected", Delivery.RELEASED: "released", Delivery.MODIFIED: "modified"}
WINDOW = 1000  # messages `once send` has out at once


def send(url: str, topic: str, bodies: list[str], count: int | None, timeout: float, verbose: bool = False,
         http: str | None = None, tls: ClientTls | None = None, journal: str | None = None) -> int:
    items: Iterable[str]
    if count is not None and bodies:
        items = itertools.islice(itertools.cycle(bodies), count)  # the bodies, over and over, COUNT in all
    elif count is not None:
        items = (f"message {i}" for i in range(count))
    elif bodies:
        items = bodies
    else:
        items = (line.rstrip("\n") for line in sys.stdin)
    conn = connect(url, timeout, tls=tls)
    failures = 0
    sent = 0
    answered = 0
    pending: dict[Any, str] = {}  # delivery -> body, sent and not answered yet
    record = ClientJournal(journal, "publisher", topic) if journal else None
    gids: dict[Any, tuple[bytes, str]] = {}  # delivery -> (its gid, its message id), with --journal

    def reap() -> bool:
        nonlocal failures, answered
        for d in [d for d in pending if d.remote_state]:
            body = pending.pop(d)
            answered += 1
            if record is not None and d in gids:
                gid, mid = gids.pop(d)
                record.add(Event.ACCEPTED if d.remote_state == Delivery.ACCEPTED else Event.REJECTED, gid, mid=mid)
            if d.remote_state != Delivery.ACCEPTED:
                failures += 1
                cond = d.remote.condition
                why = f": {cond.name}: {cond.description}" if cond is not None else ""
                print(f"not accepted: {body!r}: {_OUTCOMES.get(d.remote_state, d.remote_state)}{why}", file=sys.stderr)
            d.settle()
        return True

    try:
        link = conn.create_sender(topic).link
        # (the router's incarnation of this attach: with our tags, the gids it gives them)
        props = link.remote_properties or {}
        incarnation = int(next((v for k, v in props.items() if str(k) == "once:incarnation"), 0))
        for body in items:
            # Many in flight (the router's credit, at most WINDOW): each outcome comes once
            # every subscriber accepted, and waiting for each in turn made 5,000 take 10 s.
            conn.wait(lambda: reap() and link.credit > 0 and len(pending) < WINDOW, timeout=timeout,
                      msg="credit from the router")
            if record is None:
                pending[link.send(Message(body=body))] = body
            else:
                tag, mid = str(sent).encode(), f"{record.name}:{sent}"
                gid = compute_gid(conn.container.container_id, link.name, incarnation, tag)
                record.add(Event.SENT, gid, mid=mid)
                d = link.send(Message(id=mid, body=body), tag=tag)
                pending[d], gids[d] = body, (gid, mid)
            sent += 1
        waited = 0.0
        while True:  # (in steps, so that --verbose can say what the outcomes wait for)
            step = min(VERBOSE_EVERY, timeout - waited) if verbose else timeout
            try:
                conn.wait(lambda: reap() and not pending, timeout=step, msg="the last outcomes")
                break
            except Timeout:
                waited += step
                if waited >= timeout:
                    raise
                print(f"once send: {len(pending)} outcome(s) still to come after {waited:g} s: "
                      f"{waiting_for(http, topic)}", file=sys.stderr, flush=True)
    except Timeout:
        raise CommandError(Exit.TIMEOUT, f"{shown(url)}: no outcome within {timeout:g} s after {sent} message(s) sent, "
                           f"{answered} answered (a subscriber that does not accept holds them: --timeout waits "
                           "longer)") from None
    except (ConnectionException, LinkException) as e:
        raise refused(e, url, f"publishing to {topic!r}") or CommandError(
            Exit.LOST, f"{shown(url)}: the router went away after {sent} message(s): {e}") from None
    finally:
        if record is not None:
            record.close()
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - it is gone already: nothing left to close
            pass
    print(f"sent {sent}, accepted {sent - failures}")
    return Exit.FAILED if failures else Exit.OK


class SharedSubscription(ReceiverOption):
    """A JMS 2.0 shared subscription (QPIDJMS-220), as any AMQP client can ask for one:
    source capabilities ``shared`` (and ``global`` unless it is scoped to the
    connection's container-id); ``once:exclusive`` for an exclusive group."""

    def __init__(self, global_: bool = True, exclusive: bool = False) -> None:
        self.caps = ["shared", "global"] if global_ else ["shared"]
        if exclusive:
            self.caps.append("once:exclusive")

    def apply(self, receiver: Any) -> None:
        caps = receiver.source.capabilities
        caps.put_array(False, Data.SYMBOL)
        caps.enter()
        for c in self.caps:
            caps.put_symbol(c)
        caps.exit()


def recv(url: str, topic: str, count: int, name: str | None, timeout: float | None,
         group: str | None = None, exclusive: bool = False, reconnect: bool = False,
         tls: ClientTls | None = None, journal: str | None = None) -> int:
    """Print what arrives. ``reconnect``: when the router goes away (or is not there), try
    again every second instead of exiting (6 / 4); what it had not accepted comes again,
    marked, since this is a standard client."""
    container = f"once-recv-{os.getpid()}"  # the same subscriber key on every reconnect
    # SIGTERM (systemd, docker, kill) stops it as Ctrl-C does: the link is closed, so no
    # publisher waits out a grace for a subscriber that is not coming back.
    signal.signal(signal.SIGTERM, _interrupt)
    record = ClientJournal(journal, "subscriber", topic, group) if journal else None
    try:
        return _recv_loop(url, topic, count, name, timeout, group, exclusive, reconnect, tls, container, record)
    finally:
        if record is not None:
            record.close()


def _recv_loop(url: str, topic: str, count: int, name: str | None, timeout: float | None, group: str | None,
               exclusive: bool, reconnect: bool, tls: ClientTls | None, container: str,
               record: ClientJournal | None) -> int:
    got = 0
    while True:
        try:
            got += _recv_once(url, topic, count - got if count else 0, name, timeout, group, exclusive, container,
                              tls, record)
            return Exit.OK
        except CommandError as e:
            if not reconnect or e.code not in (Exit.LOST, Exit.UNREACHABLE):
                raise
            got += getattr(e, "got", 0)
            print(f"once recv: {e.line}; trying again in 1 s (--reconnect)", file=sys.stderr, flush=True)
            time.sleep(1.0)  # (a retry pace, not synchronisation)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _recv_once(url: str, topic: str, count: int, name: str | None, timeout: float | None, group: str | None,
               exclusive: bool, container: str, tls: ClientTls | None = None,
               record: ClientJournal | None = None) -> int:
    conn = connect(url, 30.0, container, tls)
    options = SharedSubscription(exclusive=exclusive) if group else None
    # In a group the link's name before its '|' is the group's (a JMS shared subscription's
    # name): ``--name`` names the member within it, never the group.
    link_name = f"{group}|{name or os.getpid()}" if group else (name or f"recv-{topic}")
    try:
        receiver = conn.create_receiver(topic, name=link_name, options=options)
    except LinkDetached as e:
        err = refused(e, url, f"a subscription to {topic!r}") or CommandError(
            Exit.LOST, f"{shown(url)}: the router went away: {e}")
        conn.close()
        raise err from None
    # The attach has completed: from now on every message published to the topic arrives.
    joined = f" in group {group}" if group else ""
    if group and exclusive:
        active = (receiver.link.remote_properties or {}).get("once:active")
        joined += " (active)" if active else " (standby: messages come once the active member goes)"
    got = 0
    try:
        # (said inside the ``try``: a SIGTERM right after the line is read, as a supervisor
        # may send it, ends the command as one a moment later does, with 0, not 130)
        print(f"subscribed to {topic} on {shown(url)}{joined}", file=sys.stderr, flush=True)
        while count == 0 or got < count:
            try:
                msg = receiver.receive(timeout=timeout)
            except Timeout:  # idle for --timeout: done (short of --count: not a success)
                if count:
                    raise CommandError(Exit.TIMEOUT, f"{got} of {count} message(s), then none for {timeout:g} s "
                                                     "(--timeout)") from None
                break
            print(_text(msg.body), flush=True)
            if record is not None:  # (the router's delivery tag is the message's gid)
                gid = _delivery_tag(receiver.fetcher.unsettled[-1]) if receiver.fetcher.unsettled else b""
                mid = str(msg.id) if msg.id is not None else ""
                record.add(Event.RECEIVED, gid, "redelivery" if msg.delivery_count else "", mid)
                receiver.accept()
                record.add(Event.ACCEPTED, gid, mid=mid)
            else:
                receiver.accept()
            got += 1
    except KeyboardInterrupt:
        pass
    except (ConnectionException, LinkException) as e:
        err = CommandError(Exit.LOST, f"{shown(url)}: the router went away after {got} message(s): {e}")
        err.got = got  # type: ignore[attr-defined]
        raise err from None
    finally:
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - it is gone already
            pass
    return got


def _delivery_tag(delivery: Any) -> bytes:
    """A delivery's tag as bytes (Proton's ``Delivery.tag`` decodes it as UTF-8, which a gid
    is not)."""
    import cproton

    return bytes(cproton.bytes2pybytes(cproton.lib.pn_delivery_tag(delivery._impl)))


def _text(body: object) -> object:
    """A body as a line: a data section's bytes as UTF-8 when they are (MQTT and outbox
    messages come as data sections), else as Python shows them."""
    if isinstance(body, (bytes, memoryview)):
        raw = bytes(body)
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return repr(raw)
    return body
