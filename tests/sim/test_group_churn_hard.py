"""Consumer group churn under hard faults (issue 48, class 4): ``once sim --hard --groups
--releases --leaves --joins``, members releasing, leaving and joining while routers are
killed, paused and cut off. Each seed that failed replays exactly as a named test, in one
subprocess under the sweeps' hash seed (``PYTHONHASHSEED=0``)."""

from __future__ import annotations

import pytest
from support.replay import replay

# ``--groups --leaves`` seed 308, found with that change: the member closed at the router
# the publisher then resumed at; that root never heard what its own router kept of the
# member (it told every router but itself), and the old router, forgetting, said
# ``unknown``: the message went to a second member.
ROOT_TELLS_ITSELF = [308]
# Two roots asked about one message at once: the publisher's new root, finding the old
# root's fence when its answers were in, deferred to it; the old root, its publisher
# gone, deferred to the new one's: nobody chose, and the group never got 8 messages. A
# root whose publisher is attached asks again past the fence.
BOTH_DEFERRED = [872312900167146]
# A root the publisher resumed at took a message over that it held as a destination for a
# member that had left there since; it sent it on to where a stale attach of that member
# lived (its old router, restarted from its journal), which answered ``moved`` for ever:
# 115 messages never answered. A key that closed here is owed nothing anywhere.
CLOSED_NOT_OWED = [505583188490513]
# A fresh seed (115630914409:115630916409 at 4594164): the old root, its publisher gone,
# passed a message on once its question was answered; the root the publisher resumed at,
# hearing from the old root's router that the first member closed, passed it on again from
# the copy's choice, to a third member. A root that took a message over asks before it
# chooses again, as one whose publisher went does.
TOOK_OVER_ASKS = [115630914409]

# The rest of the churn seeds issue 48 names (one message processed by two members, a
# subscriber reordered, group messages lost), found on fresh seeds before the changes
# above and the class 1 and 2 ones: each passes, and stays named.
NAMED_IN_THE_ISSUE = [505583188489442, 505583188490224, 872312900167874]
# A member that left with an acceptance unconfirmed: waiting (bounded) for its settlement
# on a paused router's connection, it closed there, and the acceptance and the close were
# lost together; its grace ended there and a second member processed the message (33,
# 129087621723500, 505583188489521; 505583188490427 reordered 17; fresh 960458492399 and
# 960458492495 duplicated). Waiting without a bound stalled groups (below). Once its wait
# runs out, the member attaches again on a new connection, its map naming what it
# accepted, and closes once that attach is answered.
LEFT_UNCONFIRMED = [33, 129087621723500, 505583188489521, 505583188490427, 960458492399, 960458492495]
# Fresh ``--groups --releases --leaves --joins`` seeds the unbounded wait stalled (messages
# never answered) or lost one with (831721616245): a bounded wait must keep them clean.
UNBOUNDED_STALLED = [213206751478, 213206752196, 831721616245]
# Found building release to another member: a root took a late ``released`` (for a copy it
# had sent back since) as new and passed on what the member had now (403); a root's own
# record, its publisher back, followed a member that had released it (543: and unmarked);
# a root that asked gave a member of its own that released meanwhile the message back (550).
RELEASES_HARD = [403, 543, 550]
# Fresh churn seeds (610878215725:610878217225) after it: a router that took a group message
# over forwarded it to a member of its own that had moved on, while its question chose
# another (610878216742, 610878216103, 610878217048: never answered); a root chose the
# member that had released it, heard only by the root before (610878216604: routers tell
# what a member released now); a leaving member took a message on the attach that says
# what it accepted (the simulator's member gives no credit then).
FRESH_RELEASES_HARD = [610878216103, 610878216604, 610878216742, 610878217048]
# A fresh seed of the next sweep (969800361455:969800362955): a root passed on what a member
# released while a copy of it to that member at another router, which could not hear the
# member had moved, had no answer; the member came back there and was handed it. A release
# is not passed on while such a copy is unanswered (back to the member instead).
FRESH_RELEASES_HARD += [969800362002]
# 346 of 0:1000 and fresh 610878216207, 610878216743, 969800362724: every member had
# released the message or left, and the root, choosing after asking, took the one at the
# root (which had released it there: no state of its own, the root's record of it
# ``HERE``) for one waiting for it: nobody was sent it, and the publisher was told
# ``accepted``. It goes back to that member (``Inquiry._choose``).
ALL_RELEASED_ONE_AT_THE_ROOT = [346, 610878216207, 610878216743, 969800362724]
# Fresh 969800362670: an old root, paused, sent a member that had moved to it what that
# member had released elsewhere (it never heard the release: the member's router waited
# to answer until the message's other subscribers there had accepted), while the new root,
# told of the release, chose a member that had joined: both processed it. A release is
# answered as soon as every key of its copy is final (``Destination.released``).
QUEUED_AFTER_RELEASING = [969800362670]
# Fresh churn seeds of 483033179109:483033182109 (4 failed of 3,000, three fixed): an old
# root gave a member that moved to it a message the member had released elsewhere (it never
# heard the release), after (483033179889: ``Copies._retarget`` gives a member nothing
# while another root chooses) or before (483033182059: queued, not sent; the asker's
# question withdraws it, ``Inquiry._withdraw``) the root the publisher resumed at asked,
# and that root chose another member: both processed it. (With the first, fresh
# ``--groups`` seeds 634034028942 and 788175831603 lost messages: ``DEFERRED_REOPENED``.)
OLD_ROOT_FENCED = [483033179889, 483033182059]
# Fresh hard churn 483033179646: a root asking whom to give a released message sent it to
# the releaser where it moved, then chose another member: both processed it. The releaser,
# with our copy unanswered, keeps the choice (not sending it the copy while asking left
# records behind in ``--groups`` churn seeds 660318468068 and 660318470454).
IN_FLIGHT_KEEPS_THE_CHOICE_HARD = [483033179646]
# Fresh hard churn 421388617455 (and a real-process soak, seed 488006, 218 messages to an
# MQTT member under new packet ids): a member that had the message was sent it again by
# the root that chose after asking, its own member enqueued with no tombstone asked. A
# member at the root that answered it is sent nothing more.
HAD_IT_GETS_NOTHING_MORE = [421388617455]
# Fresh hard churn 483033181179: a member accepted a message at its root, which died, and
# resumed at the root the publisher resumed at, saying so; that root was unsure (another
# member suspended there) for 30 s, by when it had forgotten what the member said, and
# gave the message to another. An unsure router tells what it knows all the same.
UNSURE_TELLS_WHAT_IT_KNOWS = [483033181179]
# Fresh ``--groups`` churn 660318468439 (no hard faults): the root the publisher resumed at
# sent a member that moved away from it while it asked a copy, which waited behind a gap
# at the member's new router; the choice did not know of it and took a member that had
# joined: both processed it. A member with a copy of ours unanswered keeps the choice; a
# router learns a member chosen since (a release passed on to it) from the copy that
# brings it (fresh hard churn 610878216742 stalled without that: the member, not chosen
# as far as its new root knew, stayed owed for ever once it left).
IN_FLIGHT_KEEPS_THE_CHOICE = [660318468439, 660318468068, 660318470454]
LEAVES_ONLY, RELEASES_ONLY = [275465942646235], [397144604947047]
# Fresh hard churn (421388612122:421388632122 at 5e4e6f2) and ``--groups`` (634034028942,
# 788175831603) seeds: an old root gave a member up to the question of the root its
# publisher resumed at (it came to the old root, or the old root's copy was answered
# ``taken``, or the question withdrew it); that root died or lost the publisher first,
# and the publisher came back to the old root, whose record, complete without the member,
# told it ``accepted``: nobody had it. What a root gives up to another's question it asks
# about again, the newest root, when its publisher comes back (``Inquiry.reopen``).
DEFERRED_REOPENED_HARD = [421388614787, 421388629344]
DEFERRED_REOPENED = [634034028942, 788175831603]
# Fresh hard churn 421388614793: a member given a message back at the root (every other
# member had released it or left) moved on; the root's copy to it there was not waited
# for (its key ``replaced``, not ``here``): told accepted, lost.
SENT_BACK_MOVES_ON = [421388614793]
# Fresh hard churn 421388616848: a member accepted at a root that died, and resumed,
# saying so, at a router that had already answered the new root: that root chose another
# member. A router tells the asker what a member that resumes there had.
RESUMED_AFTER_ANSWERING = [421388616848]
# Fresh hard churn 421388628116: the member a message was passed on to held the old root's
# copy (the root restarted since); the question took the member that had released it,
# named chosen by another copy: both processed it. A member that holds it comes first.
HOLDER_FIRST = [421388628116]
# Fresh hard churn 446487839842 (of 10,000 from 446487831348): the root restarted (its
# record gone) and answered a destination's answer with ``Settle``; the destination dropped
# a delivery still queued for a plain subscriber, which then had it from the publisher's
# new root after newer messages. A router that holds nothing says ``Forgot``, and the
# destination lets the copy go only once its deliveries of it are answered.
FORGOT_NOT_SETTLED = [446487839842]
# Fresh ``--groups`` 942426583539 (of 20,000 from 942426569324): the publisher came back
# to the old root before a member it had chosen resumed there; that root, fenced by the
# dead root's question, gave the member up, and nothing reopened the record (its
# publisher had resumed already): told accepted, no member had it. A root whose publisher
# is back asks again as soon as it gives a member up.
GAVE_UP_AFTER_RETURN = [942426583539]
# Fresh hard churn 199772166450 (of 20,000 from 199772154106 at 5272830): the same, with the
# member moving to the root between its publisher's resume and its resend, while the
# record still named the old, detached link: a returned record reopens whatever link it names.
RETURNED_BEFORE_RESEND = [199772166450]
# Fresh hard churn 199772154106:199772174106 (20,000 at 5272830) failed 8: two hit the
# wall-time cap beside other work and pass alone; six failed the same at ce6dc95, before
# this file's last fixes (4 processed by two members, 2 lost). 166450 is above; the rest:
# Fresh hard churn 199772157079 (lost 18): the root's copy to a member's router was re-sent
# without the member while it was owed elsewhere (it had resumed at another router, then
# left there); a stale view sent it back to the router it had left, at a later position,
# and that router's answer to the copy re-sent without it, "every key accepted", was taken
# for the member too: the publisher heard `accepted`, no member had it. An answer naming no
# key is not for a key sent there again in a later copy.
ACCEPTED_NOT_FOR_A_LATER_COPY = [199772157079]
# Three of them (processed by two members): a root that asked after a release, its publisher
# gone, kept the releaser's share going while it asked (followed to where it moved), and its
# choice after the answers ignored that share: the copy there accepted before the answers
# came (154420), or queued at the root the member came to (162102), and another member was
# chosen; or the choice passed the message on from a member that had left, still owing it
# that member, whose old copy's ``released`` then passed it on again (168448). The choice
# keeps a member whose own share stands (``Answers.holds_at``), and one passed on from is no
# longer owed it.
SHARE_KEPT_WHILE_ASKING = [199772154420, 199772162102, 199772168448]
UNANSWERED_ELSEWHERE = [199772161761]
# The other two fresh seeds of that sweep (421388625768, 421388630868) pass since.
FRESH_HARD_PASS = [421388625768, 421388630868]
# ``--groups --releases --leaves --joins --elastic`` seed 453 (lost 6): a root chose a member
# while cut off from its router; its publisher resumed at that router, which asked (fencing
# the root's record) and was killed before it chose; the publisher came back to the first
# root, and the member left. Its router's ``closed``, under the dead asker's fence, was taken
# as final with nobody to pass the message on to (the fence: another root chooses), and the
# publisher heard ``accepted``. A member gone under another root's fence is given up to it,
# noted, as a release is (``Inquiry.give_up``): the record reopens and the root asks again.
# (The elastic faults only uncover it: a stopped router the publisher skipped sent it back.)
GONE_UNDER_A_DEAD_ASKERS_FENCE = [453]
# ``--elastic`` churn seeds 1328, 1874, 3567 (state left behind: tombstones): a destination
# kept, for ever, tombstones waiting for the settle of a root that had left the network (the
# router that joined, then stopped cleanly). A root that left settles nothing more: its
# tombstones take their usual grace (``Destination.root_left``).
LEFT_ROOT_SETTLES_NOTHING = [1328, 1874, 3567]
# ``--elastic`` churn seeds 1057 (reordered 31), 1151, 2482, 3431, 3955 (lost): a router that
# joined beside a restarted one took its own view for complete (fresh: it knows of no earlier
# life), and the restarted one took completeness from it; both took publishes without the
# subscribers beyond. A fresh router that hears a view that is not complete waits for one
# that is (the cold-start rule), and completeness comes only from a router that has synced.
FRESH_BESIDE_RESTARTED = [1057, 1151, 2482, 3431, 3955]
# Fresh ``--elastic`` churn seed 430033339710 (18 never answered, 13 records left at the
# root): a leaving member, its acceptance unconfirmed, attached again on a new connection
# (to another router: the joined router X was stopping) and closed there; the simulator's
# member dropped its old connection without its router ever noticing, so X kept it attached,
# left cleanly with that attach in its state, and every root owed the member at X for ever
# (the closed attach elsewhere was newer, and gone). The member aborts the connection, as
# our client does, and its router notices, as a real one does (``Subscriber._reattach``).
ABANDONED_CONNECTION_NOTICED = [430033339710]
# Fresh ``--elastic`` churn seed 969268099062 (group duplicated 3): a leaving member told the
# joined router X its map (accepted, unsettled) and closed there; X alone kept what it had
# (``left_had``) and told it while the root A, its publisher resumed there, could not hear;
# X left before telling it again, and A, asking again, heard nobody had it and gave the
# messages to two other members. A router leaving hands that over (``Inquiry.hand_over``).
HANDED_OVER_ON_LEAVING = [969268099062]
# Fresh hard churn seed 340118393468 (lost 1): the publisher resumed at B, which asked and
# died; it came back to the first root C, and a member at C released the message there. A
# remote release under another root's fence is given up to that root (``Inquiry.give_up``),
# which has a root the publisher came back to ask again; a release by a member of the root's
# own was only dropped, and the record completed with no member having had it
# (``Groups.released_under_a_fence``).
RELEASED_HERE_UNDER_A_FENCE = [340118393468]
# Fresh hard churn seed 390457546856 (lost 20): the publisher's connection to its first root
# D dropped unnoticed there, and it resumed at C, which took the messages over and chose a
# member at C. D, its publisher still attached by its stale view, asked past C's fence; C,
# answering, withdrew its queued delivery to the member and its record, complete, told the
# publisher `accepted`. D's copy was refused `taken` by C's later question, and no member had
# them. A root whose publisher is attached asks again past such a question
# (``Inquiry._reclaim``) before anything completes its record.
WITHDRAWN_AT_AN_ATTACHED_ROOT = [390457546856]

REPLAY = """
import json, sys
from once.sim.schedules import build, run
out = {}
for seed, hard, churn in json.loads(sys.argv[1]):
    modes = dict(groups=True, hard=hard, leaves="leaves" in churn, releases="releases" in churn,
                 joins="joins" in churn, elastic="elastic" in churn)
    out[f"{seed}/{hard}"] = run(build(seed, **modes))[1].violations
print(json.dumps(out))
"""
ALL = "releases leaves joins"


@pytest.fixture(scope="module")
def verdicts() -> dict[str, list[str]]:
    cases = [(s, True, ALL) for s in BOTH_DEFERRED + CLOSED_NOT_OWED + TOOK_OVER_ASKS + NAMED_IN_THE_ISSUE]
    cases += [(s, False, "leaves") for s in ROOT_TELLS_ITSELF]
    cases += [(s, True, "leaves") for s in LEAVES_ONLY] + [(s, True, "releases") for s in RELEASES_ONLY]
    cases += [(s, True, ALL) for s in LEFT_UNCONFIRMED + RELEASES_HARD + FRESH_RELEASES_HARD] + [(s, False, ALL) for s in UNBOUNDED_STALLED]
    cases += [(s, True, ALL) for s in ALL_RELEASED_ONE_AT_THE_ROOT + QUEUED_AFTER_RELEASING + OLD_ROOT_FENCED]
    cases += [(s, False, ALL) for s in IN_FLIGHT_KEEPS_THE_CHOICE]
    cases += [(s, True, ALL) for s in UNSURE_TELLS_WHAT_IT_KNOWS + IN_FLIGHT_KEEPS_THE_CHOICE_HARD
              + HAD_IT_GETS_NOTHING_MORE]
    cases += [(s, True, ALL) for s in DEFERRED_REOPENED_HARD + SENT_BACK_MOVES_ON + RESUMED_AFTER_ANSWERING + HOLDER_FIRST
              + FRESH_HARD_PASS]
    cases += [(s, False, "") for s in DEFERRED_REOPENED + GAVE_UP_AFTER_RETURN]
    cases += [(s, True, ALL) for s in FORGOT_NOT_SETTLED + RETURNED_BEFORE_RESEND + UNANSWERED_ELSEWHERE
              + SHARE_KEPT_WHILE_ASKING + ACCEPTED_NOT_FOR_A_LATER_COPY + RELEASED_HERE_UNDER_A_FENCE
              + WITHDRAWN_AT_AN_ATTACHED_ROOT]
    cases += [(s, False, ALL + " elastic") for s in GONE_UNDER_A_DEAD_ASKERS_FENCE + LEFT_ROOT_SETTLES_NOTHING
              + FRESH_BESIDE_RESTARTED + ABANDONED_CONNECTION_NOTICED + HANDED_OVER_ON_LEAVING]
    return replay(REPLAY, cases)


@pytest.mark.parametrize("seed", NAMED_IN_THE_ISSUE + LEAVES_ONLY + RELEASES_ONLY)
def test_churn_seed_named_in_the_issue_is_clean(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", ROOT_TELLS_ITSELF)
def test_leaves_seed_a_root_hears_what_a_member_that_ended_there_had(verdicts, seed):
    assert verdicts[f"{seed}/False"] == []


@pytest.mark.parametrize("seed", BOTH_DEFERRED)
def test_churn_seed_a_root_whose_publisher_is_attached_asks_again_past_a_fence_it_found_deciding(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", CLOSED_NOT_OWED)
def test_churn_seed_a_root_taking_a_message_over_owes_nothing_to_a_member_that_closed_there(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", TOOK_OVER_ASKS)
def test_fresh_churn_seed_a_root_that_took_a_message_over_asks_before_it_passes_it_on(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", LEFT_UNCONFIRMED)
def test_churn_seed_a_member_leaving_unconfirmed_attaches_again_before_it_closes(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", UNBOUNDED_STALLED)
def test_fresh_churn_seed_a_leaving_member_waits_for_its_acceptances_only_so_long(verdicts, seed):
    assert verdicts[f"{seed}/False"] == []


@pytest.mark.parametrize("seed", RELEASES_HARD + FRESH_RELEASES_HARD)
def test_churn_seed_a_released_message_goes_to_one_other_member(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", ALL_RELEASED_ONE_AT_THE_ROOT)
def test_churn_seed_what_every_member_released_goes_back_to_the_one_at_the_root(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", QUEUED_AFTER_RELEASING)
def test_fresh_churn_seed_a_release_is_answered_as_soon_as_its_copy_is_final(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", OLD_ROOT_FENCED)
def test_fresh_churn_seed_an_old_root_gives_its_member_nothing_once_another_root_chooses(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", IN_FLIGHT_KEEPS_THE_CHOICE)
def test_fresh_churn_seed_a_member_with_a_copy_of_ours_unanswered_keeps_the_choice(verdicts, seed):
    assert verdicts[f"{seed}/False"] == []


@pytest.mark.parametrize("seed", UNSURE_TELLS_WHAT_IT_KNOWS)
def test_fresh_churn_seed_an_unsure_router_tells_the_member_that_had_it(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", IN_FLIGHT_KEEPS_THE_CHOICE_HARD)
def test_fresh_hard_churn_seed_a_releaser_our_copy_followed_keeps_the_choice(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", HAD_IT_GETS_NOTHING_MORE)
def test_fresh_hard_churn_seed_a_member_that_had_it_is_sent_nothing_more(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", DEFERRED_REOPENED_HARD)
def test_fresh_hard_churn_seed_a_root_asks_again_about_members_it_gave_up_when_its_publisher_comes_back(
        verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", DEFERRED_REOPENED)
def test_fresh_groups_seed_a_root_asks_again_about_members_it_gave_up_when_its_publisher_comes_back(
        verdicts, seed):
    assert verdicts[f"{seed}/False"] == []


@pytest.mark.parametrize("seed", SENT_BACK_MOVES_ON)
def test_fresh_hard_churn_seed_a_member_given_it_back_at_the_root_is_waited_for_where_it_moves(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", RESUMED_AFTER_ANSWERING)
def test_fresh_hard_churn_seed_a_router_tells_the_asker_what_a_member_resuming_there_had(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", HOLDER_FIRST)
def test_fresh_hard_churn_seed_a_member_holding_the_message_is_chosen_before_a_copys_choice(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", FRESH_HARD_PASS)
def test_fresh_hard_churn_seed_of_the_sweep_named_in_the_protocol_is_clean(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", FORGOT_NOT_SETTLED)
def test_fresh_hard_churn_seed_a_restarted_root_does_not_settle_a_delivery_still_queued(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", GAVE_UP_AFTER_RETURN)
def test_fresh_groups_seed_a_root_its_publisher_came_back_to_asks_again_when_it_gives_a_member_up(
        verdicts, seed):
    assert verdicts[f"{seed}/False"] == []


@pytest.mark.parametrize("seed", SHARE_KEPT_WHILE_ASKING)
def test_fresh_hard_churn_seed_a_question_keeps_the_share_the_root_kept_going_while_it_asked(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", RETURNED_BEFORE_RESEND)
def test_fresh_hard_churn_seed_a_returned_record_reopens_before_its_resend(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", UNANSWERED_ELSEWHERE)
def test_fresh_hard_churn_seed_a_release_waits_for_every_copy_to_the_member_to_be_answered(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", ACCEPTED_NOT_FOR_A_LATER_COPY)
def test_fresh_hard_churn_seed_an_answer_naming_no_key_is_not_for_a_key_sent_there_later(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", GONE_UNDER_A_DEAD_ASKERS_FENCE)
def test_elastic_churn_seed_a_member_gone_under_a_dead_askers_fence_reopens_the_record(verdicts, seed):
    assert verdicts[f"{seed}/False"] == []


@pytest.mark.parametrize("seed", LEFT_ROOT_SETTLES_NOTHING)
def test_elastic_churn_seed_a_root_that_left_leaves_no_tombstone_waiting_for_it(verdicts, seed):
    assert verdicts[f"{seed}/False"] == []


@pytest.mark.parametrize("seed", FRESH_BESIDE_RESTARTED)
def test_elastic_churn_seed_a_fresh_router_beside_a_restarted_one_waits_for_a_complete_view(verdicts, seed):
    assert verdicts[f"{seed}/False"] == []


@pytest.mark.parametrize("seed", ABANDONED_CONNECTION_NOTICED)
def test_elastic_churn_seed_a_router_notices_a_leaving_members_abandoned_connection(verdicts, seed):
    assert verdicts[f"{seed}/False"] == []


@pytest.mark.parametrize("seed", HANDED_OVER_ON_LEAVING)
def test_elastic_churn_seed_a_router_leaving_hands_over_what_members_that_closed_there_had(verdicts, seed):
    assert verdicts[f"{seed}/False"] == []


@pytest.mark.parametrize("seed", RELEASED_HERE_UNDER_A_FENCE)
def test_fresh_hard_churn_seed_a_release_at_the_root_under_another_roots_fence_is_given_up_to_it(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []


@pytest.mark.parametrize("seed", WITHDRAWN_AT_AN_ATTACHED_ROOT)
def test_fresh_hard_churn_seed_a_root_whose_publisher_is_attached_asks_again_when_a_question_withdraws_its_member(verdicts, seed):
    assert verdicts[f"{seed}/True"] == []
