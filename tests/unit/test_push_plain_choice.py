"""Which pushes go to ``push_plain.lua`` (:func:`rfetch.store.push_args.plain_call`): plain
jobs of one queue to run now, at most ``PLAIN_MAX``, with no size to check; every other push
goes to ``push.lua``, whose arguments are unchanged. No Redis."""

from __future__ import annotations

from rfetch.jobs.payload import Routing
from rfetch.store.keys import Keys
from rfetch.store.push_args import PLAIN_MAX, plain_call
from rfetch.store.replies import Outgoing

KEYS = Keys("ns")


def plain(queue: str = "q", text: str = "{}") -> Outgoing:
    return Outgoing(queue, text)


def test_plain_jobs_of_one_queue_go_to_push_plain_with_their_payloads_in_push_order() -> None:
    call = plain_call(KEYS, [plain(text="a"), plain(text="b")])
    assert call == (["ns:queue:q", "ns:queues"], ["q", "a", "b"])


def test_a_size_to_check_for_another_queue_does_not_matter() -> None:
    assert plain_call(KEYS, [plain()], {"other": 5}) is not None


def test_every_other_push_goes_to_push_lua() -> None:
    routed = Outgoing("q", "{}", routing=Routing.parse(b'{"jid":"j","queue":"q","unique_key":"k"}'))
    assert routed.routing is not None
    assert plain_call(KEYS, []) is None
    assert plain_call(KEYS, [plain(), Outgoing("q", "{}", at=1.0)]) is None  # scheduled
    assert plain_call(KEYS, [plain("a"), plain("b")]) is None  # two queues
    assert plain_call(KEYS, [plain(), routed]) is None  # through the gate
    assert plain_call(KEYS, [plain()], {"q": 10}) is None  # max_queue_size
    assert plain_call(KEYS, [plain()] * (PLAIN_MAX + 1)) is None  # push.lua splits its LPUSH
    assert plain_call(KEYS, [plain()] * PLAIN_MAX) is not None
