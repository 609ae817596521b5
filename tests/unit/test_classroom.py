"""A class's rules (codes, the key, votes, tallies, cells, retention, rate limits) and its state
in both run stores: the embedded SQLite file and a real PostgreSQL (tests/services.py)."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest

from bsdemo.classroom import rules
from bsdemo.classroom.rules import Round
from bsdemo.classroom.store import NOT_OPEN, ClassError
from bsdemo.errors import ConfigError

ANSWERS = ("It falls", "It stays", "It rises")


# ----- rules -----
def test_codes_use_an_alphabet_without_look_alikes():
    codes = {rules.new_code() for _ in range(500)}
    assert len(codes) > 490  # random, not a counter
    for code in codes:
        assert len(code) == rules.CODE_LENGTH and set(code) <= set(rules.ALPHABET)
    assert not set("0O1IL") & set(rules.ALPHABET)
    assert rules.new_code(random.Random(3)) == rules.new_code(random.Random(3))


@pytest.mark.parametrize(
    "typed,code", [("abc234", "ABC234"), (" ab-c 234 ", "ABC234"), ("ＡＢＣ２３４", "ABC234")]
)  # full-width: NFKC makes it ASCII
def test_a_typed_code_is_normalised(typed, code):
    assert rules.parse_code(typed) == code


@pytest.mark.parametrize(
    "typed",
    [
        "",
        "ABC23",
        "ABC2345",
        "ABC0O1",
        "АВС234",  # Cyrillic А В С
        "X" * 10_000,
        "ABC23\x00",
        None,
        123456,
    ],
)
def test_a_bad_code_is_refused_with_the_rule(typed):
    with pytest.raises(ConfigError) as caught:
        rules.parse_code(typed)
    message = str(caught.value)
    assert message.startswith("join code: got ") and "without 0, O, 1, I or L" in message
    assert len(message) < 300  # a 10 KB code is quoted short


def test_the_key_is_random_hashed_and_compared_whole():
    key = rules.new_key()
    assert len(key) >= 43 and key != rules.new_key()  # 256 bits, URL-safe
    # never "-" first (`--key -abc` would be an option): 1 key in 64 did before
    assert not any(rules.new_key().startswith("-") for _ in range(2000))
    stored = rules.key_hash(key)
    assert key not in stored and rules.key_matches(key, stored)
    assert not rules.key_matches(key[:-1], stored) and not rules.key_matches("", stored)
    assert not rules.key_matches(None, stored) and not rules.key_matches("x" * 10_000, stored)


def test_a_class_password_is_salted():
    first, second = rules.password_hash("lecture"), rules.password_hash("lecture")
    assert first != second and "lecture" not in first
    assert rules.password_matches("lecture", first) and rules.password_matches("lecture", second)
    assert not rules.password_matches("Lecture", first) and not rules.password_matches(None, first)
    assert rules.password_matches("anything", None)  # no password asked
    assert not rules.password_matches("x", "garbled")


def test_titles_and_passwords_are_checked():
    assert rules.check_title("  Week 3  ") == "Week 3" and rules.check_title(None) == ""
    for bad in ("x" * 81, "two\nlines", 3):
        with pytest.raises(ConfigError, match="^title: got"):
            rules.check_title(bad)
    assert rules.check_password("  ") is None
    with pytest.raises(ConfigError, match="^class password"):
        rules.check_password("p" * 129)


def test_votes_are_refused_with_a_reason():
    open_round = Round(1, False)
    assert rules.vote_refusal(2, ANSWERS, open_round, ended=False) is None
    assert "ended" in rules.vote_refusal(0, ANSWERS, open_round, ended=True)
    assert "locked" in rules.vote_refusal(0, ANSWERS, Round(1, True), ended=False)
    for bad in (3, -1, True, "0", 1.0):
        assert rules.vote_refusal(bad, ANSWERS, open_round, ended=False).startswith("Vote: got")


def test_a_tally_counts_and_shares():
    t = rules.tally(ANSWERS, [0, 0, 2, 0, 7])
    assert t.counts == (3, 0, 1) and t.total == 4 and t.shares == (0.75, 0.0, 0.25)
    assert rules.tally(ANSWERS, []).shares == (0.0, 0.0, 0.0)


def test_cells_are_balanced_deterministic_and_stable():
    cells = [8, 32, 128, 512]
    members = [f"m{i}" for i in range(10)]
    given = rules.assign_cells(members, cells, seed=1)
    assert set(given) == set(members)
    load = Counter(given.values())
    assert set(load) == set(cells) and max(load.values()) - min(load.values()) <= 1
    assert given == rules.assign_cells(list(reversed(members)), cells, seed=1)
    assert given != rules.assign_cells(members, cells, seed=2)
    later = rules.assign_cells([*members, "late1", "late2"], cells, seed=1, taken=given)
    assert all(later[m] == given[m] for m in members)  # nobody moved
    load = Counter(later.values())
    assert max(load.values()) - min(load.values()) <= 1
    with pytest.raises(ValueError):
        rules.assign_cells(members, [], seed=0)


def test_retention():
    day = 86400.0
    assert not rules.expired(0, 1 * day, 1 * day, 14 * day, 14)
    assert rules.expired(0, 1 * day, 1 * day, 15.5 * day, 14)
    assert not rules.expired(0, None, 20 * day, 30 * day, 14)  # never ended, used lately
    assert rules.expired(0, None, 1 * day, 30 * day, 14)
    assert rules.retention_days(None) == 14 and rules.retention_days("2.5") == 2.5
    for bad in ("0", "-1", "x", "9999"):
        with pytest.raises(ConfigError, match="BSDEMO_CLASS_RETENTION_DAYS"):
            rules.retention_days(bad)


def test_a_rate_limit_is_per_key_and_slides():
    now = [0.0]
    limit = rules.RateLimit(3, 60.0, clock=lambda: now[0])
    assert [limit.allow("a") for _ in range(4)] == [True, True, True, False]
    assert limit.allow("b")
    now[0] = 61.0
    assert limit.allow("a")


def test_member_ids_are_per_class_and_hide_the_browser():
    one = rules.member_id("ABC234", "browser-secret-hash")
    assert one == rules.member_id("ABC234", "browser-secret-hash")
    assert one != rules.member_id("XYZ789", "browser-secret-hash")
    assert "browser" not in one


# ----- the store -----
def test_a_class_is_started_joined_and_voted_in(classes):
    code, key = classes.start("Week 3")
    info = classes.info(code)
    assert info.title == "Week 3" and info.open and info.members == 0 and not info.has_password
    assert classes.is_instructor(code, key) and not classes.is_instructor(code, key + "x")
    alice = classes.join(code, "alice")
    assert classes.join(code, "alice") == alice  # joining twice is one member
    bob = classes.join(code, "bob")
    assert classes.info(code).members == 2
    classes.vote(code, alice, "noise", 0, ANSWERS)
    classes.vote(code, bob, "noise", 2, ANSWERS)
    classes.vote(code, alice, "noise", 1, ANSWERS)  # changed before the reveal
    assert classes.my_vote(code, alice, "noise") == (Round(1, False), 1)
    [(round_, counts)] = classes.tallies(code, "noise", ANSWERS)
    assert round_ == Round(1, False) and counts.counts == (0, 1, 1)


def test_the_reveal_locks_and_a_second_round_opens(classes):
    code, key = classes.start()
    alice, bob = classes.join(code, "alice"), classes.join(code, "bob")
    classes.vote(code, alice, "noise", 0, ANSWERS)
    classes.vote(code, bob, "noise", 0, ANSWERS)
    with pytest.raises(ClassError, match="instructor"):
        classes.reveal(code, "not the key", "noise")
    classes.reveal(code, key, "noise")
    with pytest.raises(ClassError, match="locked"):
        classes.vote(code, alice, "noise", 2, ANSWERS)
    assert classes.ask_again(code, key, "noise") == 2
    assert classes.ask_again(code, key, "noise") == 2  # round 2 not shown yet: still round 2
    classes.vote(code, alice, "noise", 2, ANSWERS)
    classes.settle(code, key, "noise", 2)
    first, second = classes.tallies(code, "noise", ANSWERS)
    assert first[0] == Round(1, True, 2) and first[1].counts == (2, 0, 0)
    assert second[0] == Round(2, False, 2) and second[1].counts == (0, 0, 1)
    assert classes.my_vote(code, bob, "noise") == (Round(2, False, 2), None)
    other = classes.tallies(code, "memory", ANSWERS)  # questions are apart
    assert [t.total for _, t in other] == [0]


def test_votes_are_checked(classes):
    code, key = classes.start()
    alice = classes.join(code, "alice")
    with pytest.raises(ClassError, match="^Vote: got 5"):
        classes.vote(code, alice, "noise", 5, ANSWERS)
    with pytest.raises(ClassError, match="not in the class"):
        classes.vote(code, "forged-member-id", "noise", 0, ANSWERS)
    classes.end(code, key)
    with pytest.raises(ClassError, match="ended"):
        classes.vote(code, alice, "noise", 0, ANSWERS)


def test_joining_says_nothing_about_which_codes_exist(classes):
    code, key = classes.start("locked", password="lecture")
    assert classes.info(code).has_password
    messages = set()
    for attempt in (("ABC234", None), (code, None), (code, "wrong")):
        with pytest.raises(ClassError) as caught:
            classes.join(attempt[0], "eve", attempt[1])
        messages.add(str(caught.value))
    assert messages == {NOT_OPEN}
    assert classes.join(code, "eve", "lecture")
    classes.end(code, key)
    with pytest.raises(ClassError, match="No open class"):
        classes.join(code, "mallory", "lecture")


def test_the_export_holds_counts_not_members(classes):
    code, key = classes.start("Week 4")
    for name, choice in (("a", 0), ("b", 0), ("c", 2)):
        classes.vote(code, classes.join(code, name), "regimes", choice, ANSWERS)
    with pytest.raises(ClassError):
        classes.export(code, "guess")
    out = classes.export(code, key)
    assert out["class"]["members"] == 3 and out["class"]["title"] == "Week 4"
    assert out["rounds"] == [
        {
            "question": "regimes",
            "round": 1,
            "opened": out["rounds"][0]["opened"],
            "revealed": None,
            "supported": None,
            "counts": {0: 2, 2: 1},
        }
    ]
    assert key not in str(out) and rules.key_hash(key) not in str(out)  # nothing of the key


def test_expired_classes_are_deleted_with_what_they_held(classes):
    now = [1_000_000.0]
    classes.clock = lambda: now[0]
    old, key = classes.start("old")
    classes.vote(old, classes.join(old, "a"), "noise", 0, ANSWERS)
    classes.end(old, key)
    kept, _ = classes.start("kept")
    now[0] += 15 * 86400
    classes.join(kept, "b")  # used lately
    assert classes.purge(14) == 1
    assert classes.info(old) is None and classes.info(kept) is not None
    assert classes.tallies(old, "noise", ANSWERS)[0][1].total == 0  # the votes went with it


def test_votes_racing_from_many_threads_are_one_each(classes):
    code, key = classes.start()
    members = [classes.join(code, f"m{i}") for i in range(12)]
    errors = []

    def vote(member, i):
        try:
            for choice in (0, 1, i % 3):
                classes.vote(code, member, "noise", choice, ANSWERS)
        except Exception as exc:  # noqa: BLE001 - collected for the assert
            errors.append(exc)

    threads = [threading.Thread(target=vote, args=(m, i)) for i, m in enumerate(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    [(_, counts)] = classes.tallies(code, "noise", ANSWERS)
    assert counts.counts == (4, 4, 4)
