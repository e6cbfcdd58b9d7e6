"""Harness MQTT clients (``client: mqtt``): paho-mqtt, MQTT 5.0, QoS 2, a persistent session
(session expiry 300 s), moving to the next router in its list when its router goes. One
thread each: paho's network loop and the publishing pace run on it, so no callback races
the bookkeeping.

* publisher: ``pub-NAME.jsonl`` like the other publishers ("sent" before the PUBLISH,
  "accepted" at its PUBCOMP, which follows the PUBREC that every subscriber accepted).
* subscriber: ``sub-NAME.jsonl``: ``{"id", "count", "first", "t", "pid"}`` per message the
  application got, recorded as its PUBLISH arrives, before the PUBREC that takes it over
  (paho itself hands a QoS 2 message over only at its PUBREL, from memory); ``count`` is
  1 when it came with DUP; ``{"rel": pid}`` at that packet id's PUBREL (a PUBLISH under a
  packet id taken over and not yet released is the same message again, not recorded).

Each also writes its delivery journal for ``once audit``. A message's gid is the router's
to compute, so the clients ask for it (CONNECT user property ``once-gid``): the router names
it in a user property of its PUBACK/PUBCOMP's PUBREC and of every PUBLISH it sends. The
publisher writes "sent" (at its send time) and "accepted" rows when the answer comes; the
subscriber writes "received" rows only: paho sends the PUBREC (its acceptance) by itself,
and the moment is not the application's to see.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from once.router.journal import Event, Journal, Source

EXPIRY = 300  # seconds the session outlives a connection


def _line(f: Any, **kw: Any) -> None:
    f.write(json.dumps(kw) + "\n")
    f.flush()


def _gid_client() -> Any:
    import paho.mqtt.client as mqtt

    class GidClient(mqtt.Client):  # type: ignore[misc]
        """paho's client, keeping the gid a PUBREC names: paho hands its callback the
        PUBCOMP's properties, and a PUBCOMP from the router after ours (the PUBREL resent
        there) names nothing. (paho's packet decoder is its own, private API: without it,
        no gid is kept and the journal lacks those rows.)"""

        gids: dict[int, bytes] = {}

        def _messages_reconnect_reset_out(self) -> None:
            """paho 2.2 turns a QoS 2 message whose PUBREL it sent (no PUBCOMP yet) into a
            PUBLISH without DUP at a second reconnect before a CONNACK (the first reset made
            it RESEND_PUBREL, the second takes that for unsent): it sends the message again
            as new, which MQTT 5.0 4.3.3 forbids once the PUBREL went, and the router it
            resumes at rightly takes it for a new message (soak seed 487061: 27 messages
            processed twice after a refused reconnect to a dead router). Kept as
            RESEND_PUBREL: the PUBREL goes again, as the specification says."""
            with self._out_message_mutex:
                pubrel = [m for m in self._out_messages.values() if m.state == mqtt.mqtt_ms_resend_pubrel]
                super()._messages_reconnect_reset_out()
                for m in pubrel:
                    m.state = mqtt.mqtt_ms_resend_pubrel

        def _handle_pubrec(self) -> Any:
            try:
                r = mqtt._packet.decode_pubrec(self._in_packet["command"], self._in_packet["packet"], self._protocol)
                gid = _gid(r.properties)
                if gid:
                    self.gids[r.mid] = gid
            except Exception:  # (another paho: no gid from here)
                pass
            return super()._handle_pubrec()

        # A QoS 2 PUBREC hands the message over (MQTT 5.0, 4.3.3): the router then sends
        # PUBREL, never the PUBLISH again. paho sends it on arrival and gives the message
        # to the application only at the PUBREL, from memory: a process killed between
        # the two lost it (36 and 87 messages in two soak runs, the router rightly counting
        # them delivered). A durable subscriber records the message before its PUBREC goes,
        # so ``arrived`` (when set) is called first, and the PUBREC sent after it. It also
        # keeps the packet ids it took over until their PUBREL (``pending``, kept across
        # the process's lives): a PUBLISH under one of them again (DUP, from the router the
        # session resumed at, which did not hear the PUBREC) is acknowledged, not taken a
        # second time, as 4.3.3 requires of a receiver.
        arrived: Any = None
        released: Any = None  # called with a packet id at its PUBREL
        pending: set[int] = set()
        _holding: list[int] | None = None

        def _send_pubrec(self, mid: int) -> Any:
            if self._holding is not None:
                self._holding.append(mid)
                return mqtt.MQTTErrorCode.MQTT_ERR_SUCCESS
            return super()._send_pubrec(mid)

        def _handle_publish(self) -> Any:
            if self.arrived is None:
                return super()._handle_publish()
            self._holding = held = []
            try:
                rc = super()._handle_publish()
            finally:
                self._holding = None
            for mid in held:
                message = self._in_messages.get(mid)
                if message is not None and mid not in self.pending:
                    self.pending.add(mid)
                    self.arrived(message)
                super()._send_pubrec(mid)
            return rc

        def _handle_pubrel(self) -> Any:
            # The release is recorded before paho sends the PUBCOMP: once that goes, the
            # router may give the packet id to a new message, and a life of this process
            # killed in between, its record still naming the id as pending, took that new
            # message for a repeat and never had it (soak seed 489002: lost 1; 4.3.3: after
            # its PUBCOMP a receiver takes a PUBLISH under the id as new). Killed after the
            # record and before the PUBCOMP, the router sends the PUBREL again: nothing lost.
            packet = self._in_packet["packet"]
            mid = int.from_bytes(packet[:2], "big") if len(packet) >= 2 else None
            if mid is not None and mid in self.pending:
                self.pending.discard(mid)
                if self.released is not None:
                    self.released(mid)
            return super()._handle_pubrel()

    return GidClient


def _GidClient(*args: Any, **kw: Any) -> Any:
    client = _gid_client()(*args, **kw)
    client.gids = {}
    return client


class _Failover:
    def __init__(self, spec: dict[str, Any]) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        self.mqtt = mqtt
        self.routers = [(u.removeprefix("mqtt://").rsplit(":", 1)[0], int(u.rsplit(":", 1)[1])) for u in spec["routers"]]
        self.at = 0
        self.client = _GidClient(mqtt.CallbackAPIVersion.VERSION2, client_id=f"harness-{spec['name']}",
                                 protocol=mqtt.MQTTv5)
        self.client.max_inflight_messages_set(min(int(spec.get("window", 100)), 100))
        self.client.max_queued_messages_set(0)
        self.props = Properties(PacketTypes.CONNECT)
        self.props.SessionExpiryInterval = EXPIRY
        self.props.UserProperty = ("once-gid", "1")  # (the router names each message's gid)

    def connect(self, first: bool) -> None:
        """Connect to the router it is at, or the next that answers."""
        for attempt in range(len(self.routers) * 100):
            host, port = self.routers[self.at]
            try:
                self.client.connect(host, port, keepalive=5, clean_start=first, properties=self.props)
                return
            except OSError:
                self.at = (self.at + 1) % len(self.routers)
                if attempt % len(self.routers) == len(self.routers) - 1:
                    time.sleep(0.1)  # (every router refused: a pace for trying again, not a synchronisation)
        raise SystemExit("no router answers")

    def turn(self) -> None:
        """One turn of paho's network loop; a lost connection moves on to the next router."""
        if self.client.loop(0.01) != self.mqtt.MQTT_ERR_SUCCESS:
            self.at = (self.at + 1) % len(self.routers)
            self.connect(first=False)


def _gid(props: Any) -> bytes:
    """The gid the router named in a packet's user properties (b"": none)."""
    for k, v in getattr(props, "UserProperty", None) or ():
        if k == "once-gid":
            return bytes.fromhex(v)
    return b""


def run_mqtt_publisher(spec: dict[str, Any]) -> None:
    out, name, topic = Path(spec["out"]), spec["name"], spec["topic"]
    records = open(out / f"pub-{name}.jsonl", "a")
    journal = Journal(out / "journal" / f"publisher-{name}.csv", Source.PUBLISHER, name, sync_every_row=True)
    # "sent" rows have their own file: each is written when the gid comes (the PUBREC), at
    # its send time, earlier than "accepted" rows already written; a journal's times only
    # go forward, so in one file they would be moved to after those (and the audit's
    # latency would be the acknowledgement's distance, not the delivery's)
    sent_journal = Journal(out / "journal" / f"publisher-{name}.sent.csv", Source.PUBLISHER, name,
                           sync_every_row=True)
    total, rate = spec["messages"], spec["rate"]
    f = _Failover(spec)
    waiting: dict[int, int] = {}  # paho's mid -> seq
    sent_at: dict[int, float] = {}  # seq -> when it was sent

    def published(c: Any, u: Any, mid: int, rc: Any, props: Any) -> None:
        seq = waiting.pop(mid, None)
        if seq is not None:
            accepted = getattr(rc, "value", rc) < 0x80
            _line(records, e="accepted" if accepted else "rejected", id=f"{name}:{seq}", t=time.time())
            gid = f.client.gids.pop(mid, b"") or _gid(props)
            if gid:
                mid_ = f"{name}:{seq}"
                sent_journal.add_at(int(sent_at.pop(seq) * 1e6), Event.SENT, gid, topic, mid=mid_)
                sent_journal.flush()
                journal.add(Event.ACCEPTED if accepted else Event.REJECTED, gid, topic, mid=mid_)

    f.client.on_publish = published
    f.connect(first=True)
    start = time.monotonic()
    seq = 0
    while seq < total or waiting:
        f.turn()
        due = total if not rate else min(total, int((time.monotonic() - start) * rate) + 1)
        # New messages only once connected: paho writes a publish made between a reconnect's
        # CONNECT and its CONNACK at once, ahead of the resends the CONNACK triggers, so the
        # network would take it before older messages (an order the client made).
        while seq < due and len(waiting) < 100 and f.client.is_connected():
            mid = f"{name}:{seq}"
            sent_at[seq] = time.time()
            _line(records, e="sent", id=mid, t=sent_at[seq])
            waiting[f.client.publish(topic, f"body of {mid}".encode(), qos=2).mid] = seq
            seq += 1
    print("done", flush=True)
    f.client.disconnect()


def _pending(path: Path) -> set[int]:
    """The packet ids a subscriber's lives before took over and saw no PUBREL for."""
    pending: set[int] = set()
    if path.exists():
        for line in path.read_text().splitlines():
            if line.endswith("}"):
                d = json.loads(line)
                if "rel" in d:
                    pending.discard(d["rel"])
                elif "pid" in d:
                    pending.add(d["pid"])
    return pending


def run_mqtt_subscriber(spec: dict[str, Any]) -> None:
    out, name, topic = Path(spec["out"]), spec["name"], spec["topic"]
    records = open(out / f"sub-{name}.jsonl", "a")
    journal = Journal(out / "journal" / f"subscriber-{name}.csv", Source.SUBSCRIBER, name, sync_every_row=True)
    f = _Failover(spec)

    def message(m: Any) -> None:
        mid = m.payload.decode().removeprefix("body of ")
        t = time.time()  # one reading for the record and the journal (as the Proton subscriber)
        _line(records, id=mid, count=int(m.dup), first=True, t=t, pid=m.mid)
        gid = _gid(m.properties)
        if gid:
            journal.add_at(int(t * 1e6), Event.RECEIVED, gid, topic, "redelivery" if m.dup else "", mid=mid)

    group = spec.get("group")  # (a member of a shared subscription)
    name_ = f"$share/{group}/{topic}" if group else topic

    def connected(c: Any, u: Any, flags: Any, rc: Any, props: Any) -> None:
        if not flags.session_present:
            f.client.subscribe(name_, qos=2)

    f.client.arrived = message  # (recorded as it arrives, before its PUBREC: see GidClient)
    f.client.released = lambda pid: _line(records, rel=pid)
    f.client.pending = _pending(out / f"sub-{name}.jsonl")  # (a process's life before: its own)
    f.client.on_connect = connected
    f.client.on_subscribe = lambda c, u, mid, codes, props: print("attached", flush=True)
    # A clean start only for the process's first life: one the harness restarted (its
    # process killed) resumes its persistent session, as a durable subscriber does (with a
    # clean start the router rightly discards what waited for it: 117 lost in a soak)
    f.connect(first=int(spec.get("life", 1)) == 1)
    while True:
        f.turn()
