"""A clean stop's rule (``router/leaving.py``), pure: what a stopping router does next, for the
router process (SIGTERM, a drain) and the simulator's ``stop`` alike."""

from __future__ import annotations

from once.router.leaving import Holding, Leaving, Step


def held(clients: int = 0, records: int = 0, suspended: int = 0, standing_in: bool = False,
         linked: bool = True) -> Holding:
    return Holding(clients, records, suspended, standing_in, linked)


def test_it_waits_for_its_clients_to_go_then_leaves_with_nothing_held():
    leaving = Leaving(5.0)
    assert leaving.step(0.0, held(clients=2)) is Step.WAIT
    assert leaving.step(0.1, held()) is Step.LEAVE


def test_what_it_holds_and_its_suspended_subscribers_have_the_wait_from_the_last_client_on():
    leaving = Leaving(5.0)
    assert leaving.step(0.0, held(clients=1)) is Step.WAIT
    assert leaving.step(1.0, held(records=3, suspended=1)) is Step.WAIT  # (the wait starts now)
    assert leaving.step(5.9, held(records=3, suspended=1)) is Step.WAIT
    assert leaving.step(6.0, held(records=3)) is Step.LEAVE  # (the records are the network's, as after a crash)


def test_a_subscriber_still_suspended_after_the_wait_stops_it_without_a_word():
    leaving = Leaving(5.0)
    assert leaving.step(0.0, held(suspended=1)) is Step.WAIT
    assert leaving.step(5.0, held(suspended=1)) is Step.STOP  # (only it could expire that subscriber)


def test_a_durable_groups_stand_in_is_not_waited_for():
    assert Leaving(5.0).step(0.0, held(suspended=1, standing_in=True)) is Step.STOP


def test_a_client_that_comes_meanwhile_starts_the_wait_again():
    leaving = Leaving(5.0)
    assert leaving.step(0.0, held(records=1)) is Step.WAIT
    assert leaving.step(4.0, held(clients=1, records=1)) is Step.WAIT
    assert leaving.step(8.0, held(records=1)) is Step.WAIT  # (5 s from 8.0, not from 0.0)
    assert leaving.step(13.0, held(records=1)) is Step.LEAVE


def test_with_no_link_up_there_is_nobody_to_tell():
    assert Leaving(5.0).step(0.0, held(linked=False)) is Step.STOP
