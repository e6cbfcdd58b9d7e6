"""A paho-mqtt 2.x client that moves to the next router when its router goes: a
persistent session (clean start only the first time, a session expiry), its own network
thread, and every message it got and every acknowledgement it heard, in order."""

from __future__ import annotations

import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties


class FailoverPaho:
    def __init__(self, routers: list[tuple[str, int]], client_id: str, expiry: int = 300, v5: bool = True,
                 clean: bool = True, manual_ack: bool = False) -> None:
        self.routers = routers
        self.at = 0  # index of the router it is (or was last) connected to
        self.expiry = expiry
        self.v5 = v5
        self.received: list[bytes] = []  # payloads, as the application got them
        self.messages: list[mqtt.MQTTMessage] = []
        self.acked: set[int] = set()  # mids whose flow completed (PUBACK / PUBCOMP)
        self.present: list[bool] = []  # CONNACK's session present, per connect
        self.subacks: list[list[int]] = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id,
                                  protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311, clean_session=None if v5 else clean,
                                  manual_ack=manual_ack)
        self.client.max_inflight_messages_set(20)
        self.client.max_queued_messages_set(0)
        self.client.on_message = self._message
        self.client.on_publish = self._published
        self.client.on_connect = self._connected
        self.client.on_subscribe = lambda c, u, mid, codes, props: self.subacks.append(
            [int(getattr(x, "value", x)) for x in codes])
        self.stop = False
        self._connect(first=clean)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _message(self, c: object, u: object, m: mqtt.MQTTMessage) -> None:
        with self.lock:
            self.received.append(m.payload)
            self.messages.append(m)

    def _published(self, c: object, u: object, mid: int, rc: object, props: object) -> None:
        with self.lock:
            self.acked.add(mid)

    def _connected(self, c: object, u: object, flags: mqtt.ConnectFlags, rc: object, props: object) -> None:
        self.present.append(bool(flags.session_present))

    def _connect(self, first: bool = False) -> None:
        host, port = self.routers[self.at]
        if self.v5:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = self.expiry
            self.client.connect(host, port, keepalive=5, clean_start=first, properties=props)
        else:
            self.client.connect(host, port, keepalive=5)

    def _run(self) -> None:
        while not self.stop:
            rc = self.client.loop(0.05)
            if rc == mqtt.MQTT_ERR_SUCCESS or self.stop:
                continue
            # Its router went: the next one that answers (its session lives in the network).
            for _ in range(len(self.routers) * 20):
                self.at = (self.at + 1) % len(self.routers)
                try:
                    self._connect()
                    break
                except OSError:
                    time.sleep(0.05)  # (a retry pace, not a synchronisation)

    def wait(self, condition, timeout: float = 60.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if condition(self):
                    return
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}")

    def close(self) -> None:
        self.stop = True
        self.thread.join(5)
        try:
            self.client.disconnect()
        except Exception:
            pass
