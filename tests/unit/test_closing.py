"""A closing text's shape: a one-sentence takeaway, the rest folded (bsdemo.recipes.closing)."""

from __future__ import annotations

from bsdemo import recipes
from bsdemo.recipes import closing


def test_the_takeaway_is_the_first_paragraph_and_the_rest_is_folded():
    text = closing.join("Batch 256 ran 4.0× the samples/s of batch 32.", "", "Why: overhead.", "More detail.")
    assert closing.split(text) == (
        "Batch 256 ran 4.0× the samples/s of batch 32.",
        "Why: overhead.\n\nMore detail.",
    )
    assert closing.split("Only a lead.") == ("Only a lead.", "")


def test_a_long_or_two_sentence_takeaway_is_a_problem():
    assert closing.lead_problem("Memory grew 1.2 KiB per sample on top of 3.4 MiB.") is None
    # decimals, "1.5e-07" and bold markup are not sentence ends
    assert closing.lead_problem("**Equivalent:** a difference of 1.5e-07 (float32).") is None
    long = " ".join(["word"] * (closing.LEAD_WORDS + 1)) + "."
    assert "26 words" in closing.lead_problem(long)
    assert "more than one sentence" in closing.lead_problem("It rose. Then it fell.")
    assert "more than one sentence" in closing.lead_problem("It rose **2×.** Then it fell.")


def test_every_closing_text_writer_is_checked():
    """The suite's autouse fixture wraps each of these; a new verdict joins by its name."""
    assert len(recipes.VERDICTS) >= 16
    assert all(callable(getattr(recipes, name)) for name in recipes.VERDICTS)
    assert recipes.throughput_verdict.__name__ == "checked"  # wrapped in this test
