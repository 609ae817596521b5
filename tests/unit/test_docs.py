"""The docs in the repo: the CLI reference is the parser's own, every link inside docs/ and the
README leads somewhere, the README stays a one-screen map, and no path leaves the repository."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))


def test_the_cli_reference_is_generated_from_the_parser_and_is_current():
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts/docs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    text = (ROOT / "docs/cli.md").read_text()
    for command in ("train", "sweep", "find", "fit-batch", "warm", "datasets"):
        assert f"\n## {command}\n" in text
    assert "| `--batch-size` |" in text and "### `step`" in text and "`samples_per_sec`" in text


def test_every_relative_link_in_the_docs_and_readme_leads_to_a_file():
    broken = []
    for page in [ROOT / "README.md", *DOCS]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_the_readme_is_a_one_screen_map_into_the_docs():
    readme = (ROOT / "README.md").read_text()
    # one screen: what it is, how to run it, the code map and where to read next
    assert len(readme.splitlines()) <= 80, "the README is a map: the details live in docs/"
    code_map = readme.split("## Code map", 1)[1].split("\n## ", 1)[0]
    for place in ("bsdemo/engine/", "bsdemo/jobkinds/", "bsdemo/tunables.py", "bsdemo/ui/"):
        assert place in code_map, place
    for doc in ("architecture", "lessons", "instructor", "cli", "deploy", "contributing", "own-model"):
        assert f"docs/{doc}.md" in readme, doc
    assert "make run" in readme and "make test" in readme


def test_the_docs_stand_alone():
    """Every relative path the README and the docs name ("../x", in a link or in the text) stays
    inside this repository: a clone alone holds everything they point at."""
    outside = []
    for page in [ROOT / "README.md", *DOCS]:
        for target in re.findall(r"(?<![\w/])((?:\.\./)+[\w.-][\w./-]*)", page.read_text()):
            if not (page.parent / target).resolve().is_relative_to(ROOT):
                outside.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not outside, outside
