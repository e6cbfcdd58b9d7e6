"""Who a message is owed to at its root (``records/owed.py``): a key stops being waited
for only on evidence, and answers are idempotent."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from once.records.outcomes import Outcome, OutcomeKind
from once.records.owed import KeyState, Owed, Said

A, B = ("c", "a"), ("c", "b")
NO = Outcome(OutcomeKind.REJECTED, "amqp:not-allowed", "no")


def test_the_message_completes_when_every_key_answered_and_keeps_the_first_rejection():
    o = Owed({A: "D", B: "E"})
    assert not o.answer(A, "D", Said.REJECTED, NO) and o.rejection == NO
    assert o.answer(B, "E", Said.ACCEPTED) and o.complete
    assert not o.answer(B, "E", Said.ACCEPTED) and o.pending == 0  # idempotent


def test_moved_and_unknown_are_no_evidence_and_a_router_it_left_cannot_close_it():
    """Seeds 9883, 9064, 1648 of issue 24: routers gave a key up on a stale view."""
    o = Owed({A: "D"})
    assert not o.answer(A, "D", Said.MOVED) and not o.answer(A, "D", Said.UNKNOWN)
    assert o.moved(A, "E")  # the table shows A at E: a copy goes there
    assert not o.answer(A, "D", Said.CLOSED) and o.states[A] is KeyState.PENDING  # D's word no longer counts
    assert not o.moved(A, "E")  # already sent there
    assert o.answer(A, "E", Said.CLOSED) and o.states[A] is KeyState.CLOSED


def test_an_acceptance_counts_from_wherever_it_comes():
    """The key accepted at D just before it moved: that answer is evidence, late or not."""
    o = Owed({A: "D"})
    o.moved(A, "E")
    assert o.answer(A, "D", Said.ACCEPTED) and o.states[A] is KeyState.ACCEPTED


def test_the_roots_grace_rule_and_a_group_members_replacement():
    o = Owed({A: "D"})
    o.replace(A, B, "E")
    assert o.states[A] is KeyState.REPLACED and o.pending_at() == {"E": {B}}
    assert not o.answer(A, "D", Said.ACCEPTED)  # a replaced member's late word changes nothing
    assert o.expire(B) and o.states[B] is KeyState.EXPIRED and o.complete


def test_pending_by_router():
    o = Owed({A: "D", B: "E"})
    o.answer(A, "D", Said.ACCEPTED)
    assert o.pending_at() == {"E": {B}} and o.pending_at(["D"]) == {}


SAID = st.sampled_from(list(Said))


@given(st.lists(st.tuples(st.sampled_from([A, B]), st.sampled_from(["D", "E", "F"]), SAID,
                          st.booleans()), max_size=30))
def test_never_complete_while_a_key_has_no_evidence(events):
    """Whatever routers say in whatever order: the message completes only if every key is
    accepted, rejected, or closed/expired/taken by the router holding it then (``taken``:
    another root chooses a group member for it now; this one waits for it no more)."""
    o = Owed({A: "D", B: "D"})
    evidence: dict[tuple[str, str], bool] = {}
    for key, router, said, move in events:
        if move:
            o.moved(key, router)
            continue
        holder = o.where[key]
        o.answer(key, router, said, NO if said is Said.REJECTED else None)
        if said in (Said.ACCEPTED, Said.REJECTED) or (said in (Said.CLOSED, Said.EXPIRED, Said.TAKEN)
                                                         and router == holder):
            evidence[key] = True
    assert o.complete == (evidence.get(A, False) and evidence.get(B, False))


def test_a_key_that_came_to_the_root_is_final_there_and_owed_again_when_it_leaves():
    """``here``: the root waits for it as a local subscriber; ``add`` when that one moves
    away: pending again, at its new router (simulator seed 13505 on protocol 3 lost two
    messages when ``add`` kept the old ``here``)."""
    o = Owed({A: "D"})
    assert o.here(A) and o.complete
    o.add(A, "E")
    assert not o.complete and o.where[A] == "E" and o.pending_at() == {"E": {A}}
    assert o.answer(A, "E", Said.ACCEPTED)


def test_add_leaves_a_key_with_evidence_alone():
    o = Owed({A: "D", B: "D"})
    o.answer(A, "D", Said.ACCEPTED)
    o.add(A, "E")
    assert o.states[A].value == "accepted" and o.pending == 1


def test_a_shared_plan_is_copied_before_a_key_moves_never_changed():
    plan = {A: "C", B: "C"}
    first, second = Owed(plan, shared=True), Owed(plan, shared=True)
    assert first.moved(A, "E")
    first.add(("c", "new"), "D")
    assert plan == {A: "C", B: "C"} and second.where == plan
    assert first.where == {A: "E", B: "C", ("c", "new"): "D"} and first.pending_at() == {"E": {A}, "C": {B}, "D": {("c", "new")}}
