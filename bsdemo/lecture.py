"""A lecture plan: the runs an instructor wants ready, in order, as the pages' own links (the
Training Lab's, or a comparison lesson's: regimes, lr_scaling). `bsdemo warm --plan FILE` trains
them into the run store before the lecture, so the page serves each one at once (labelled as a
stored result) when its link is opened and Run (or Compare) pressed. `bsdemo warm --lesson SLUG`
does the same for every scenario a lesson offers (bsdemo.presets.SCENARIOS).

    [[run]]
    title = "SGD is slow"                                  # what the instructor calls it
    link = "/training_lab?batch_size=1&epochs=1&present=1"  # a link, copied from the page

Pure Python: checked before torch is imported, every problem named with its run and field.
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from bsdemo import lessonlinks
from bsdemo.config import LAB_VIEW_PARAMS, VIEW_PARAMS, RunConfig
from bsdemo.errors import ConfigError, clip
from bsdemo.presets import SCENARIOS

MAX_RUNS = 50  # a lecture's worth; more is a typo or a different tool
LAB_PATHS = ("", "/", "/training_lab", "training_lab")


MAX_PLAN_BYTES = 1 << 20  # a plan lists at most MAX_RUNS links: far less than this
MAX_PLAN_DEPTH = 32  # brackets and braces nested in a plan, at most (TOML's parser recurses)


def _read_plan(path: Path) -> dict:
    """A plan file's TOML: a regular file of at most MAX_PLAN_BYTES (never a device, a FIFO or
    /dev/zero), nested at most MAX_PLAN_DEPTH deep; anything else is a ConfigError."""
    where = "--plan"  # the flag that named the file
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the open
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ConfigError(where, str(path), "a regular file (not a device, pipe or folder)")
            with os.fdopen(fd, "rb", closefd=False) as f:
                raw = f.read(MAX_PLAN_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ConfigError(where, clip(str(exc)), "a readable TOML file") from None
    if len(raw) > MAX_PLAN_BYTES:
        raise ConfigError(
            where, f"more than {MAX_PLAN_BYTES:,} bytes", f"a plan file of at most {MAX_PLAN_BYTES:,} bytes"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(where, "bytes that are not UTF-8", "a UTF-8 TOML file") from None
    depth = deepest = 0
    for ch in text:  # a bound, not a parse: brackets inside strings count too (harmlessly)
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
    if deepest > MAX_PLAN_DEPTH:
        raise ConfigError(
            where, f"{deepest} levels of nesting", f"a TOML file nested at most {MAX_PLAN_DEPTH} deep"
        )
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ConfigError(where, clip(str(exc)), "a readable TOML file") from None


def load_plan(path: Path) -> list[tuple[str, RunConfig]]:
    """(title, validated config) of every run of the plan file at path, in its order."""
    data = _read_plan(path)
    runs = data.get("run")
    if not isinstance(runs, list) or not runs or len(runs) > MAX_RUNS:
        raise ConfigError(
            f"plan {path.name}",
            f"{len(runs) if isinstance(runs, list) else 0} [[run]] tables",
            f"1 to {MAX_RUNS} [[run]] tables",
        )
    plan = []
    for number, run in enumerate(runs, 1):
        where = f"run {number}"
        if not isinstance(run, dict) or set(run) - {"title", "link"}:
            raise ConfigError(
                where, sorted(run) if isinstance(run, dict) else run, "a table with title and link"
            )
        title, link = run.get("title", f"run {number}"), run.get("link")
        if not isinstance(title, str) or not title.strip():
            raise ConfigError(f"{where} title", title, "a non-empty text")
        if not isinstance(link, str):
            raise ConfigError(f"{where} link", link, "a page's link, as text")
        plan += page_runs(title.strip(), link, f"{where} ({clip(title, 40)}) link")
    return plan


def page_runs(title: str, link: str, where: str) -> list[tuple[str, RunConfig]]:
    """(title, config) of the training runs a page's link asks for: one for a Training Lab
    link, one per run of a comparison lesson's ("title: run label")."""
    parts = urlsplit(link)
    slug = parts.path.rstrip("/").rsplit("/", 1)[-1]
    if slug not in lessonlinks.LESSONS:
        return [(title, lab_config(link, where))]
    params = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    return [(f"{title}: {label}", cfg) for label, cfg in lessonlinks.lesson_runs(slug, params, where)]


def lesson_plan(slug: str) -> list[tuple[str, RunConfig]]:
    """(title, config) of every training run of a lesson's scenarios, each once, in order."""
    stored = ("training_lab", *lessonlinks.LESSONS)
    if slug not in stored:
        raise ConfigError(
            "--lesson",
            clip(slug),
            "one of " + ", ".join(stored) + " (the other "
            "lessons measure this device live, so there is nothing to store)",
        )
    runs, seen = [], set()
    for name, query in SCENARIOS[slug].items():
        for title, cfg in page_runs(name, f"/{slug}?{query}", f"scenario {name!r}"):
            if cfg not in seen:
                seen.add(cfg)
                runs.append((title, cfg))
    return runs


def lab_config(link: str, where: str) -> RunConfig:
    """A Training Lab link (a whole URL, a path with its query, or just the query) -> its
    validated config; its view switches and run id are not settings."""
    bare = "?" not in link and "=" in link  # just the query: the lab's own
    parts = urlsplit("?" + link if bare else link)
    if not bare and parts.path.rstrip("/").rsplit("/", 1)[-1] != "training_lab":
        raise ConfigError(
            where,
            clip(link),
            "a link to the Training Lab (/training_lab?…) or "
            "to " + " or ".join(lessonlinks.LESSONS) + ": the other pages' "
            "experiments are measured live",
        )
    params = {
        k: v[-1]
        for k, v in parse_qs(parts.query, keep_blank_values=True).items()
        if k not in (*VIEW_PARAMS, *LAB_VIEW_PARAMS, "run")
    }
    try:
        return RunConfig.from_params(params).validated()[0]
    except ConfigError as exc:
        raise ConfigError(where, clip(link), f"valid lab settings ({exc})") from None
