"""A lecture plan: the Training Lab runs an instructor wants ready, in order, as the lab's own
links. `bsdemo warm --plan FILE` trains them into the run store before the lecture, so the lab
serves each one at once (labelled as a stored result) when its link is opened and Run pressed.

    [[run]]
    title = "SGD is slow"                                  # what the instructor calls it
    link = "/training_lab?batch_size=1&epochs=1&present=1"  # a lab link, copied from the page

Pure Python: checked before torch is imported, every problem named with its run and field.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from bsdemo.config import VIEW_PARAMS, RunConfig
from bsdemo.errors import ConfigError, clip

MAX_RUNS = 50  # a lecture's worth; more is a typo or a different tool
LAB_PATHS = ("", "/", "/training_lab", "training_lab")


def load_plan(path: Path) -> list[tuple[str, RunConfig]]:
    """(title, validated config) of every run of the plan file at path, in its order."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"plan {path.name}", clip(str(exc)), "a readable TOML file") from None
    runs = data.get("run")
    if not isinstance(runs, list) or not runs or len(runs) > MAX_RUNS:
        raise ConfigError(f"plan {path.name}", f"{len(runs) if isinstance(runs, list) else 0} "
                          "[[run]] tables", f"1 to {MAX_RUNS} [[run]] tables")
    plan = []
    for number, run in enumerate(runs, 1):
        where = f"run {number}"
        if not isinstance(run, dict) or set(run) - {"title", "link"}:
            raise ConfigError(where, sorted(run) if isinstance(run, dict) else run,
                              "a table with title and link")
        title, link = run.get("title", f"run {number}"), run.get("link")
        if not isinstance(title, str) or not title.strip():
            raise ConfigError(f"{where} title", title, "a non-empty text")
        if not isinstance(link, str):
            raise ConfigError(f"{where} link", link, "a Training Lab link, as text")
        plan.append((title.strip(), lab_config(link, f"{where} ({clip(title, 40)}) link")))
    return plan


def lab_config(link: str, where: str) -> RunConfig:
    """A Training Lab link (a whole URL, a path with its query, or just the query) -> its
    validated config; its view switches and run id are not settings."""
    bare = "?" not in link and "=" in link  # just the query: the lab's own
    parts = urlsplit("?" + link if bare else link)
    if not bare and parts.path.rstrip("/").rsplit("/", 1)[-1] != "training_lab":
        raise ConfigError(where, clip(link), "a link to the Training Lab (/training_lab?…): "
                          "the other pages' experiments are measured live")
    params = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()
              if k not in (*VIEW_PARAMS, "run")}
    try:
        return RunConfig.from_params(params).validated()[0]
    except ConfigError as exc:
        raise ConfigError(where, clip(link), f"valid lab settings ({exc})") from None
