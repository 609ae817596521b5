"""Hostile input, counted: how many hostile values each surface was given, and how many were
answered cleanly. Prints a table for bench/RESULTS.md.

- CLI: every value-taking flag (and positional) of every subcommand with each hostile value
  (tests/unit/test_cli.py's walk); clean = exit code 2, one line of at most 200 characters
  naming the flag, no traceback, nothing on stdout, torch never imported.
- Link parser: random query strings (names and values from a hostile alphabet) through
  bsdemo.config.config_from_query; clean = no exception, a runnable config, a short message.
- Training Lab page: the known attacks plus random queries through Streamlit's AppTest; clean =
  no exception box, every error/warning plain text (all Markdown marks escaped) and short.

    python bench/hostile_input.py [--pages 200] [--queries 20000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bsdemo.config import QUOTE_CHARS, RunConfig, config_from_query
from bsdemo.plaintext import unescape

ALPHABET = "aZ09 _-.,;:!?()[]{}<>/\\'\"`*#$%&@^~|+=\n\t²١😀\u200b"
FIELDS = [*RunConfig.__dataclass_fields__, "run"]


def random_text(rng: random.Random, longest: int) -> str:
    n = rng.choice([0, 1, 2, 5, 20, 64, 65, 300, longest])
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def random_query(rng: random.Random) -> dict[str, str]:
    query = {}
    for _ in range(rng.randint(1, 6)):
        name = rng.choice(FIELDS) if rng.random() < 0.6 else random_text(rng, 2000)
        query[name] = random_text(rng, 5000)
    return query


def cli() -> tuple[int, int]:
    from tests.unit.test_cli import HOSTILE, PATHS, WALK

    out = subprocess.run(
        [sys.executable, "-c", WALK, json.dumps([HOSTILE, PATHS])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    results = json.loads(out.stdout)
    clean = sum(
        r["code"] == 2
        and r["stdout"] == ""
        and not r["torch"]
        and "Traceback" not in r["stderr"]
        and r["stderr"].count("\n") == 1
        and len(r["stderr"]) <= 201
        for r in results
    )
    return len(results), clean


def parser(n: int, rng: random.Random) -> tuple[int, int]:
    clean = 0
    for _ in range(n):
        try:
            cfg, message = config_from_query(random_query(rng))
            cfg.validated()
            clean += message is None or len(message) <= 2 * QUOTE_CHARS + 400
        except Exception:  # noqa: BLE001 - counting failures is the point
            pass
    return n, clean


def pages(n: int, rng: random.Random) -> tuple[int, int]:
    from tests.app.test_hostile_links import ATTACKS
    from tests.plain_check import is_plain

    queries = ATTACKS + [random_query(rng) for _ in range(n)]
    clean = 0
    for query in queries:
        at = _open(query)
        if at is None or at.exception:
            continue
        bodies = [m.value for m in [*at.error, *at.warning]]
        clean += all(is_plain(b) and len(unescape(b)) <= 2 * QUOTE_CHARS + 400 for b in bodies)
    return len(queries), clean


def _open(query):
    from streamlit.testing.v1 import AppTest

    from tests.app.helpers import APP

    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    try:
        at.run()
        at.switch_page("pages/training_lab.py").run()
    except Exception:  # noqa: BLE001 - a crash of the test harness counts as not clean
        return None
    return at


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--pages", type=int, default=200)
    args.add_argument("--queries", type=int, default=20_000)
    args.add_argument("--seed", type=int, default=0)
    opts = args.parse_args()
    rng = random.Random(opts.seed)
    rows = [
        ("CLI flags (every flag x hostile values)", *cli()),
        ("link parser (random queries)", *parser(opts.queries, rng)),
        ("Training Lab page, AppTest (attacks + random)", *pages(opts.pages, rng)),
    ]
    print(f"{'surface':<48} {'tried':>7} {'clean':>7}")
    for name, tried, clean in rows:
        print(f"{name:<48} {tried:>7} {clean:>7}")


if __name__ == "__main__":
    main()
