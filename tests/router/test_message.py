from __future__ import annotations

import pytest
from once.router.adaptors.amqp.message import delivery_count, mark_redelivered, sections
from proton import Message


def test_mark_redelivered_keeps_everything_else_and_proton_reads_it():
    m = Message(body={"k": "v"}, durable=True, priority=7, ttl=5000, subject="s", properties={"a": 1})
    raw = bytes(m.encode())  # (Proton encodes to a bytearray; payloads are bytes)
    out = mark_redelivered(raw, 2)
    back = Message()
    back.decode(out)
    assert back.delivery_count == 2 and back.first_acquirer is False
    assert back.durable and back.priority == 7 and back.ttl == m.ttl
    assert back.body == {"k": "v"} and back.subject == "s" and back.properties == {"a": 1}
    assert delivery_count(mark_redelivered(out, 1)) == 3


def test_mark_redelivered_adds_a_header_when_there_is_none():
    raw = b"\x00\x53\x77\xa1\x02hi"  # amqp-value "hi" only
    out = mark_redelivered(raw, 1)
    assert out.endswith(raw) and delivery_count(out) == 1
    assert [code for code, _, _ in sections(out)] == [0x70, 0x77]


def test_sections_are_located_without_decoding_the_body():
    raw = bytes(Message(body=b"x" * 1000, subject="s").encode())
    codes = [code for code, _, _ in sections(raw)]
    assert codes[-1] in (0x75, 0x77) and 0x73 in codes


def _general(body: bytes, message_id: str, group_id: str | None) -> bytes:
    from once.router.amqp.codec import dumps
    from once.router.amqp.types import Described, ulong

    fields: list = [message_id] + ([None] * 9 + [group_id] if group_id is not None else [])
    return dumps(Described(ulong(0x73), fields)) + dumps(Described(ulong(0x75), body))


@pytest.mark.parametrize("body", [b"", b"x", b"y" * 255, b"z" * 256, b"w" * 70000])
@pytest.mark.parametrize("message_id", ["m", "outgoing_message_0_0:17", "\u00e9" * 127, "i" * 255, "j" * 300])
@pytest.mark.parametrize("group_id", [None, "k1", "g" * 240, "h" * 256])
def test_the_client_librarys_fast_message_is_the_general_encoders_bytes(body: bytes, message_id: str,
                                                                       group_id: str | None):
    from once.client.message import decode_message, encode

    payload = encode(body, message_id, group_id=group_id)
    assert payload == _general(body, message_id, group_id)
    got = decode_message(payload)
    assert (got.body, got.message_id) == (body, message_id)
