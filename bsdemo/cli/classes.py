"""`bsdemo class start|end|export`: a class for a lecture from the terminal (no torch).

    bsdemo class start [--title T] [--password P] [--url URL] [--data-dir D]
    bsdemo class end CODE       (the key from $BSDEMO_CLASS_KEY or --key)
    bsdemo class export CODE [--format json|csv|runs-csv|html] [--out FILE]

`start` prints the join code, the students' join link and — once, never again — the instructor
link that holds the class's key (only its hash is kept). The store is the lab's own: PostgreSQL
at $BSDEMO_DATABASE_URL, else SQLite in --data-dir, $BSDEMO_DATA_DIR or ~/.cache/bsdemo — the
server must use the same one for its pages to find the class.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from urllib.parse import urlsplit

from bsdemo.classroom import rules
from bsdemo.errors import ConfigError, clip, one_line

KEY_ENV = "BSDEMO_CLASS_KEY"


def add_parser(sub) -> None:
    cls = sub.add_parser(
        "class",
        help="start, end or export a class (join code, QR, votes)",
        description="A class in a lecture: students join with a code, their predictions reach the projector.",
    )
    actions = cls.add_subparsers(dest="action", metavar="ACTION", parser_class=type(cls))
    start = actions.add_parser("start", help="start a class and print its links")
    start.add_argument(
        "--title", default="", help=f"shown to the class (at most {rules.MAX_TITLE} characters)"
    )
    start.add_argument(
        "--password", help=f"students type it to join (default ${rules.PASSWORD_ENV}; none when unset)"
    )
    start.add_argument(
        "--url",
        help="the lab's address as students reach it (default "
        "$BSDEMO_PUBLIC_URL, else http://localhost:8501)",
    )
    start.add_argument(
        "--data-dir",
        help="the SQLite store's folder (default $BSDEMO_DATA_DIR, "
        "else ~/.cache/bsdemo; $BSDEMO_DATABASE_URL wins)",
    )
    for name, text in (
        ("end", "end a class: no more joins or votes"),
        ("export", "print a class's results (counts per answer and vote)"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("code", help="the class's join code")
        action.add_argument(
            "--key",
            help=f"the instructor key (default ${KEY_ENV}; the part of the instructor link after the dot)",
        )
        action.add_argument("--data-dir", help="as for start")
        if name == "export":
            action.add_argument(
                "--format",
                choices=["json", "csv", "runs-csv", "html"],
                default="json",
                help="json: votes and runs; csv: the votes; runs-csv: the "
                "sweeps' runs; html: the room's figures",
            )
            action.add_argument("--out", help="a file to write (default: standard output)")


def _url(raw: str | None) -> str:
    url = (raw or os.environ.get("BSDEMO_PUBLIC_URL") or "http://localhost:8501").strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or len(url) > 200:
        raise ConfigError("--url", clip(url), "an http:// or https:// address, e.g. https://lab.example.org")
    return url.rstrip("/") + "/"


def run(args: argparse.Namespace) -> int:
    """The class command; 2 with one line for a bad flag, a class that cannot be found or a
    store that cannot be used."""
    try:
        if args.action is None:
            raise ConfigError("ACTION", None, "start, end or export")
        if args.action == "start":
            title = rules.check_title(args.title)
            password = rules.check_password(args.password or os.environ.get(rules.PASSWORD_ENV))
            url = _url(args.url)
        else:
            code = rules.parse_code(args.code)
            key = args.key or os.environ.get(KEY_ENV) or ""
        classes = _open(args.data_dir)
    except ConfigError as exc:
        flag = {"title": "--title", "class password": "--password", "join code": "CODE"}.get(
            exc.field, exc.field
        )
        return _fail(args.action, f"{flag}: got {clip(repr(exc.value))}; allowed: {exc.allowed}")
    from bsdemo.classroom.store import ClassError
    from bsdemo.store import StoreUnavailable

    try:
        if classes.store is None or not classes.store.available:
            raise StoreUnavailable(getattr(classes.store, "notice", None) or "no run store could be opened")
        if args.action == "start":
            code, key = classes.start(title, password)
            print(f"Class {code} started" + (f" ({title})" if title else "") + ".")
            print(f"Students join at: {url}?join={code}  (or type {code} on the lab's Home page)")
            if password:
                print("Students type the class password when they join.")
            print(
                f"Instructor link (private; shown this once — open it on the projector's "
                f"browser): {url}?teach={code}.{key}"
            )
            return 0
        if args.action == "end":
            classes.end(code, key)
            print(
                f"Class {code} ended: no more joins or votes; its results stay readable by its "
                "instructor link."
            )
            return 0
        results = classes.export(code, key)
    except (ClassError, StoreUnavailable) as exc:
        return _fail(args.action, str(exc))
    finally:
        if classes.store is not None:
            classes.store.close()
    if args.format in ("csv", "html"):
        from bsdemo.lessons import BY_SLUG

        def answers(q):
            return BY_SLUG[q].answers if q in BY_SLUG else ()

    if args.format == "csv":
        from bsdemo.classroom.export import results_csv

        text = results_csv(results, answers)
    elif args.format == "runs-csv":
        from bsdemo.classroom.export import runs_csv

        text = runs_csv(results)
    elif args.format == "html":
        from bsdemo.charts.room import class_report_html

        text = class_report_html(results, answers, {s: BY_SLUG[s].title for s in BY_SLUG})
    else:
        text = json.dumps(results, indent=1)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _open(data_dir: str | None):
    """The classes' store: --data-dir's SQLite file unless $BSDEMO_DATABASE_URL is set, else the
    server's own rule (bsdemo.classroom.store.open_classes)."""
    import sqlite3

    from bsdemo.classroom.store import ClassStore, open_classes
    from bsdemo.store import DATABASE_URL_ENV, database_url, open_store

    try:
        if data_dir is not None and database_url(os.environ.get(DATABASE_URL_ENV)) is None:
            return ClassStore(open_store(data_dir))
        return open_classes()
    except (OSError, sqlite3.Error) as exc:
        raise ConfigError(
            "--data-dir", data_dir or "", f"a folder that can hold a database ({clip(str(exc), 80)})"
        ) from exc


def _fail(action: str | None, message: str) -> int:
    print(one_line(f"bsdemo class{' ' + action if action else ''}: error: {message}"), file=sys.stderr)
    return 2
