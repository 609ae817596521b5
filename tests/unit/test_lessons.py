"""The lesson registry is the one source of lesson titles: navigation, Home and page headers."""

from __future__ import annotations

from pathlib import Path

from bsdemo.lessons import BY_SLUG, LESSONS

ROOT = Path(__file__).resolve().parents[2]


def test_every_page_is_one_lesson_and_every_built_lesson_has_its_page_and_header():
    pages = {p.name for p in (ROOT / "pages").glob("*.py")} - {"home.py"}
    assert pages == {Path(lesson.page).name for lesson in LESSONS if lesson.page}
    assert [lesson.number for lesson in LESSONS] == list(range(1, len(LESSONS) + 1))
    assert len({lesson.title for lesson in LESSONS}) == len(LESSONS)
    for lesson in BY_SLUG.values():
        assert (ROOT / lesson.page).is_file() and lesson.intro
        assert lesson.predict or lesson.slug == "quiz"  # the quiz is all predictions
        text = (ROOT / lesson.page).read_text()
        # every page honours presentation mode and keeps its settings in its link
        assert "PageLink(" in text and text.rstrip().endswith("link.finish()")
        assert f'lesson_header("{lesson.slug}")' in text  # the header comes from here
        assert "st.title(" not in text  # … and from nowhere else


def test_every_lesson_card_has_a_sketch_that_reads_as_a_sketch():
    """Home's pictures: valid SVG, the shape of the main chart with no numbers in it (nothing
    that could pass for a result), labelled a sketch, with alt text saying what it shows."""
    import xml.etree.ElementTree as ET

    from bsdemo.charts.sketches import sketch

    alts = set()
    for lesson in LESSONS:
        svg, alt = sketch(lesson.slug)
        root = ET.fromstring(svg)
        texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
        assert texts == ["sketch"], lesson.slug
        assert len(list(root)) >= 3  # axes, at least one mark, the label
        assert alt.startswith("Sketch of the main chart: ") and len(alt) > 40
        alts.add(alt)
    assert len(alts) == len(LESSONS)  # each lesson its own picture


def test_every_word_a_page_asks_for_is_in_its_content_file_and_every_word_there_is_used():
    """pages/<slug>.py (and the bsdemo/ui modules it hands a lesson to) call lesson.text(name)
    and lesson.texts[group]; each name is in bsdemo/content/<slug>.toml, and each entry there is
    asked for, so a teacher's edit always shows and a typo fails here, not in class."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    helpers = {
        "fit_batch": ["bsdemo/ui/parallel.py"],
        "noise": ["bsdemo/ui/critical.py"],
        "finder": ["bsdemo/recipes/measurements.py"],
    }
    for lesson in LESSONS:
        code = "".join((root / f).read_text() for f in [lesson.page, *helpers.get(lesson.slug, [])])
        asked = set(re.findall(r"lesson\.text\(\s*\"(\w+)\"", code))
        asked |= set(re.findall(r"lesson\.texts\[\s*\"(\w+)\"\]", code))
        asked |= {
            name
            for a, b in re.findall(r"lesson\.text\(\"(\w+)\" if \w+ else \"(\w+)\"\)", code)
            for name in (a, b)
        }
        asked |= {
            g for g in re.findall(r"for group in \(([^)]*)\)", code) for g in re.findall(r"\"(\w+)\"", g)
        }
        # the header shows a lesson's "why", where it has one, under its first result
        asked |= {"why"} & set(lesson.texts)
        missing = asked - set(lesson.texts)
        assert not missing, f"{lesson.slug}: asked for but not in its content file: {missing}"
        unused = set(lesson.texts) - asked
        assert not unused, f"{lesson.slug}: in its content file but never shown: {unused}"
        for name, words in lesson.texts.items():  # every entry is words (or a group of them)
            values = words.values() if isinstance(words, dict) else [words]
            assert all(isinstance(w, str) and w.strip() for w in values), (lesson.slug, name)
