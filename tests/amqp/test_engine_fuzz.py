"""Random performative sequences in any state: the engine answers with events and
well-formed frames, never an exception, and a failure always closes the connection."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from once.router.amqp.connection import Connection, Mode
from once.router.amqp.events import ConnectionFailed
from once.router.amqp.frames import AMQP_HEADER, build_frame
from once.router.amqp.performatives import (
    Accepted,
    Attach,
    Begin,
    Close,
    Detach,
    Disposition,
    End,
    Flow,
    Open,
    Released,
    Role,
    Source,
    Target,
    Transfer,
)
from pair import frames_of

small = st.integers(0, 4)
flag = st.booleans()
performatives = st.one_of(
    st.builds(Open, container_id=st.just("fuzz"), max_frame_size=st.integers(512, 70000)),
    st.builds(Begin, remote_channel=st.none() | small, next_outgoing_id=small, incoming_window=st.integers(0, 8),
              outgoing_window=st.integers(0, 8)),
    st.builds(Attach, name=st.sampled_from(["a", "b"]), handle=small, role=st.sampled_from(list(Role)),
              source=st.just(Source(address="t")), target=st.just(Target(address="t")),
              initial_delivery_count=st.none() | small, unsettled=st.none() | st.just({b"x": Accepted()})),
    st.builds(Flow, next_incoming_id=st.none() | small, incoming_window=small, next_outgoing_id=small, outgoing_window=small,
              handle=st.none() | small, delivery_count=st.none() | small, link_credit=st.none() | small, drain=flag, echo=flag),
    st.builds(Transfer, handle=small, delivery_id=st.none() | small, delivery_tag=st.none() | st.binary(max_size=4),
              settled=st.none() | flag, more=flag, aborted=flag, resume=flag),
    st.builds(Disposition, role=st.sampled_from(list(Role)), first=small, last=st.none() | small, settled=flag,
              state=st.none() | st.sampled_from([Accepted(), Released()])),
    st.builds(Detach, handle=small, closed=flag),
    st.builds(End),
    st.builds(Close),
)
frames = st.lists(st.tuples(st.sampled_from([0, 0, 0, 1]), performatives, st.binary(max_size=8)), max_size=25)
# Most sequences start from an open connection with a session, so the deeper states are reached.
PRELUDE = [(0, Open(container_id="fuzz"), b""), (0, Begin(next_outgoing_id=0, incoming_window=8, outgoing_window=8), b""),
           (0, Attach(name="p", handle=0, role=Role.SENDER, target=Target(address="t"), initial_delivery_count=0), b"")]


@settings(max_examples=400, deadline=None)
@given(frames, st.booleans(), st.booleans())
def test_any_sequence_is_handled(seq, answer_attaches, prelude):
    if prelude:
        seq = PRELUDE + seq
    server = Connection(Mode.SERVER, "server", incoming_window=4)
    data = bytearray(AMQP_HEADER)
    for channel, perf, payload in seq:
        data += build_frame(channel, perf, payload if isinstance(perf, Transfer) else b"")
    events = []
    # Feed in two chunks to cross frame boundaries as a socket would.
    cut = len(data) // 2
    for chunk in (bytes(data[:cut]), bytes(data[cut:])):
        new = server.receive_data(chunk)
        events += new
        if answer_attaches:
            for e in new:
                link = getattr(e, "link", None)
                if getattr(e, "reply_needed", False) and link is not None and not server.closed:
                    server.attach(link.session, link.name, link.role, link=link)
                    if not link.is_sender:
                        server.flow(link, 2)
    out = server.data_to_send()
    assert out.startswith(AMQP_HEADER)
    written = frames_of([out])  # everything we wrote decodes
    failed = [e for e in events if isinstance(e, ConnectionFailed)]
    if failed:
        assert server.closed and isinstance(written[-1], Close) and written[-1].error is not None
        assert not [e for e in events[events.index(failed[0]) + 1:]]  # nothing after the failure
