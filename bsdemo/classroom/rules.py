"""A class's rules: join codes, the instructor key, the class password, who may vote when, the
room's tallies, and which cell of a lesson's grid each member runs.

Pure Python (no torch, no Streamlit, no database): the store (bsdemo.classroom.store) keeps what
these rules decide, the pages draw it.
"""

from __future__ import annotations

import hashlib
import hmac
import random
import secrets
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from bsdemo.errors import ConfigError, clip

# join codes: no characters a projector or a phone's keyboard makes look alike (0/O, 1/I/L)
ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6
CODE_RULE = (
    f"{CODE_LENGTH} characters from A-Z and 2-9, without 0, O, 1, I or L (spaces and dashes are ignored)"
)
KEY_BYTES = 32  # the instructor key: 256 bits of randomness
MAX_TITLE = 80
MAX_PASSWORD = 128
MAX_TYPED = 64  # longer than any code or key typed by hand: refused before any other work
RETENTION_DAYS = 14  # an ended class is readable this long, then deleted
RETENTION_ENV = "BSDEMO_CLASS_RETENTION_DAYS"
PASSWORD_ENV = "BSDEMO_CLASS_PASSWORD"
SCRYPT = {"n": 2**14, "r": 8, "p": 1}  # the class password's hashing (a word people choose)


class ClassError(ValueError):
    """What a class cannot do just now, in plain words for the page (never the traceback)."""


def new_code(rng: random.Random | None = None) -> str:
    """A fresh join code (31^6, about 887 million: the store retries the rare one taken)."""
    pick = rng.choice if rng is not None else secrets.choice
    return "".join(pick(ALPHABET) for _ in range(CODE_LENGTH))


def parse_code(raw: object) -> str:
    """A typed or linked join code, normalised (NFKC, upper case, spaces and dashes dropped);
    ConfigError naming the value and the rule otherwise. Unicode look-alikes (a Cyrillic А, a
    full-width digit that NFKC does not make ASCII) are refused, never guessed at."""
    if not isinstance(raw, str):
        raise ConfigError("join code", raw, CODE_RULE)
    if len(raw) > MAX_TYPED:
        raise ConfigError("join code", clip(raw), CODE_RULE)
    code = unicodedata.normalize("NFKC", raw).upper()
    code = "".join(c for c in code if c not in " -\t\u00a0")
    if len(code) != CODE_LENGTH or any(c not in ALPHABET for c in code):
        raise ConfigError("join code", raw.strip(), CODE_RULE)
    return code


def new_key() -> str:
    """A fresh instructor key (URL-safe text of KEY_BYTES random bytes), never starting with
    "-": typed after `--key` on a command line, it would be read as an option."""
    while True:
        key = secrets.token_urlsafe(KEY_BYTES)
        if not key.startswith("-"):
            return key


def key_hash(key: str) -> str:
    """What the store keeps of an instructor key: its SHA-256 (the key is random, so a plain
    hash is as hard to reverse as the key is to guess)."""
    return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()


def key_matches(key: object, stored_hash: str) -> bool:
    """Whether `key` is the one whose hash is stored, compared in constant time."""
    if not isinstance(key, str) or not key or len(key) > 2 * MAX_TYPED:
        return False
    return hmac.compare_digest(key_hash(key), stored_hash)


def password_hash(password: str, salt: bytes | None = None) -> str:
    """What the store keeps of a class password: scrypt with a random salt ("scrypt$salt$hash")."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, dklen=32, **SCRYPT)
    return f"scrypt${salt.hex()}${digest.hex()}"


def password_matches(password: object, stored: str | None) -> bool:
    """Whether `password` opens a class whose stored password hash is `stored` (None: no
    password asked, anything opens it); constant time."""
    if stored is None:
        return True
    if not isinstance(password, str) or len(password) > MAX_PASSWORD:
        return False
    try:
        _, salt, _ = stored.split("$")
        return hmac.compare_digest(password_hash(password, bytes.fromhex(salt)), stored)
    except ValueError:
        return False


def check_title(raw: object) -> str:
    """A class's title: plain text, at most MAX_TITLE characters, no control characters."""
    if raw is None:
        return ""
    if (
        not isinstance(raw, str)
        or len(raw) > MAX_TITLE
        or any(unicodedata.category(c).startswith("C") for c in raw)
    ):
        raise ConfigError(
            "title", clip(str(raw)), f"plain text of at most {MAX_TITLE} characters on one line"
        )
    return raw.strip()


def check_password(raw: object) -> str | None:
    """A class password as given (None or blank: none)."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if not isinstance(raw, str) or len(raw) > MAX_PASSWORD:
        raise ConfigError("class password", "…", f"text of at most {MAX_PASSWORD} characters")
    return raw


def retention_days(raw: str | None) -> float:
    """BSDEMO_CLASS_RETENTION_DAYS checked (default RETENTION_DAYS)."""
    if raw is None or not raw.strip():
        return RETENTION_DAYS
    try:
        days = float(raw)
    except ValueError:
        days = -1.0
    if not 0 < days <= 3650:
        raise ConfigError(RETENTION_ENV, clip(raw), "a number of days above 0, at most 3650")
    return days


def expired(created: float, ended: float | None, last_active: float, now: float, days: float) -> bool:
    """Whether a class is past keeping: `days` after it ended, or — never ended — `days` after
    anybody last used it (a class left open is not kept for ever)."""
    since = ended if ended is not None else max(created, last_active)
    return now - since > days * 86400


def member_id(class_code: str, browser: str) -> str:
    """A browser's anonymous id in one class: a hash of the class and the browser's own random
    id (the same browser is one member however often it joins; a copied cookie is the same
    member; nothing links a member across classes)."""
    return hashlib.sha256(f"{class_code}:{browser}".encode()).hexdigest()[:24]


# ----- votes -----
@dataclass(frozen=True)
class Round:
    """One round of the room's answers to one lesson's question."""

    number: int  # 1 the first vote; 2 after the instructor reset it (peer instruction)
    revealed: bool  # the instructor showed the room's answers: votes are locked
    supported: int | None = None  # the answer the runs support, once they have said


def vote_refusal(choice: int, answers: Sequence[str], current: Round, ended: bool) -> str | None:
    """Why a member's vote cannot be taken now (plain text), or None when it can."""
    if ended:
        return "The class has ended: votes are closed."
    if not isinstance(choice, int) or isinstance(choice, bool) or not 0 <= choice < len(answers):
        return (
            f"Vote: got {clip(repr(choice))}; allowed: one of the question's "
            f"{len(answers)} answers (0 to {len(answers) - 1})."
        )
    if current.revealed:
        return (
            "The room's answers have been shown: this round's votes are locked until the "
            "instructor asks the question again."
        )
    return None


@dataclass(frozen=True)
class Tally:
    """The room's answers in one round: counts and shares, no identities."""

    answers: tuple[str, ...]
    counts: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.counts)

    @property
    def shares(self) -> tuple[float, ...]:
        return tuple(c / self.total if self.total else 0.0 for c in self.counts)


def tally(answers: Sequence[str], choices: Sequence[int]) -> Tally:
    """The counts of each answer among the members' choices (one choice a member; a choice
    outside the answers is not counted)."""
    counted = Counter(c for c in choices if 0 <= c < len(answers))
    return Tally(tuple(answers), tuple(counted.get(i, 0) for i in range(len(answers))))


# ----- a class-sourced sweep -----
def assign_cells(
    members: Sequence[str], cells: Sequence[Hashable], seed: int, taken: dict[str, Hashable] | None = None
) -> dict[str, Hashable]:
    """Which cell of a grid each member runs: balanced (no cell has two more members than
    another), deterministic for a seed, and stable — members already given a cell (`taken`)
    keep it; the others, in an order drawn from the seed, each get the cell with the fewest
    members so far (ties: the grid's order shuffled by the seed)."""
    if not cells:
        raise ValueError("a grid needs at least one cell")
    taken = {m: c for m, c in (taken or {}).items() if c in cells}
    rng = random.Random(seed)
    order = list(range(len(cells)))
    rng.shuffle(order)
    load = Counter(taken.values())
    out = dict(taken)
    waiting = sorted(m for m in members if m not in out)
    rng.shuffle(waiting)
    for member in waiting:
        best = min(order, key=lambda i: load[cells[i]])  # the first of the least loaded
        out[member] = cells[best]
        load[cells[best]] += 1
    return out


# ----- limits on what one machine can do -----
class RateLimit:
    """At most `count` events per key within `window_s` seconds (a sliding window, kept in this
    process: each replica counts its own connections). `allow(key)` records the event when it
    is allowed."""

    def __init__(self, count: int, window_s: float, clock=None):
        self.count, self.window_s = count, window_s
        self.clock = clock or time.monotonic
        self._seen: dict[str, list[float]] = {}
        self._lock = threading.Lock()  # the pages' script threads share one

    def allow(self, key: str) -> bool:
        """Whether one more event fits, recording it when it does."""
        with self._lock:
            if self._full(key):
                return False
            self._seen[key].append(self.clock())
            return True

    def blocked(self, key: str) -> bool:
        """Whether the key has used up its window (nothing recorded)."""
        with self._lock:
            return self._full(key)

    def record(self, key: str) -> None:
        """Count one event (a failed attempt, say), whether or not it fits."""
        with self._lock:
            self._full(key)
            self._seen[key].append(self.clock())

    def _full(self, key: str) -> bool:
        now = self.clock()
        if len(self._seen) > 10_000:  # forget the quiet keys: memory stays bounded
            self._seen = {k: v for k, v in self._seen.items() if v and now - v[-1] < self.window_s}
        times = self._seen[key] = [t for t in self._seen.get(key, []) if now - t < self.window_s]
        return len(times) >= self.count


# wrong codes from one address (a guesser); the members one address may add to classes (a
# classroom behind one NAT counts as one address: 300 students' laptops); votes (and changes of
# vote) per member, and per address (a script with fresh cookies still has one address)
WRONG_CODES_PER_MINUTE = 10
JOINS_PER_ADDRESS_PER_10_MIN = 300
VOTES_PER_MEMBER_PER_MINUTE = 20
VOTES_PER_ADDRESS_PER_MINUTE = 600
