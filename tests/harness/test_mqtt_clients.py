"""The harness's MQTT clients (paho 2.x) as a QoS 2 publisher must behave by MQTT 5.0."""

from __future__ import annotations

import paho.mqtt.client as mqtt
from once.tools.harness.mqtt_clients import _GidClient


def test_a_released_message_stays_released_across_two_reconnect_attempts():
    """Soak seed 487061: paho 2.2 resets its messages at every ``reconnect()``; at the
    second (the first router tried was dead), a QoS 2 message whose PUBREL had gone became a
    PUBLISH without DUP, sent again as new (4.3.3 forbids it), and its subscribers processed
    it twice. The harness's client keeps it a PUBREL to resend; one still waiting for its
    PUBREC goes again marked DUP."""
    client = _GidClient(mqtt.CallbackAPIVersion.VERSION2, client_id="t", protocol=mqtt.MQTTv5)
    client._clean_start = False  # (a persistent session reconnecting)
    released, unanswered = mqtt.MQTTMessage(mid=1), mqtt.MQTTMessage(mid=2)
    released.qos = unanswered.qos = 2
    released.state, unanswered.state = mqtt.mqtt_ms_wait_for_pubcomp, mqtt.mqtt_ms_wait_for_pubrec
    client._out_messages.update({1: released, 2: unanswered})
    for _ in range(2):  # (a refused attempt, then one that connects)
        client._messages_reconnect_reset_out()
    assert released.state == mqtt.mqtt_ms_resend_pubrel and not released.dup
    assert unanswered.state == mqtt.mqtt_ms_publish and unanswered.dup


def test_a_release_is_recorded_before_the_pubcomp_goes():
    """Soak seed 489002: the harness's QoS 2 subscriber recorded a PUBREL's release after
    paho had sent the PUBCOMP; killed in between, its next life still held the packet id as
    pending, and took the router's next message under that id (a new one, 4.3.3) for a
    repeat: never recorded, lost. Recorded first, the PUBCOMP goes after."""
    client = _GidClient(mqtt.CallbackAPIVersion.VERSION2, client_id="t", protocol=mqtt.MQTTv5)
    said: list[str] = []
    client.pending = {5}
    client.released = lambda pid: said.append(f"released {pid}")
    client._send_pubcomp = lambda mid: said.append(f"pubcomp {mid}") or mqtt.MQTTErrorCode.MQTT_ERR_SUCCESS
    client._in_packet = {"command": 0x62, "packet": (5).to_bytes(2, "big"), "remaining_length": 2}
    client._handle_pubrel()
    assert said == ["released 5", "pubcomp 5"] and client.pending == set()
