"""A closing text's shape: its first paragraph is the lesson's takeaway, one sentence of at most
LEAD_WORDS words carrying the number that answers the page's question; the paragraphs after it
are the longer explanation a page folds under "More"."""

from __future__ import annotations

import re

LEAD_WORDS = 25
_MARKUP = re.compile(r"[*_`]")
# a sentence ends at . ! or ? before a space and a capital (not "1.5", "e.g. the", "×.")
_SENTENCE_END = re.compile(r"[.!?]\*{0,2}\s+\*{0,2}[A-Z]")


def split(text: str) -> tuple[str, str]:
    """(takeaway, the rest) of a closing text: the first paragraph, and what follows it."""
    lead, _, more = text.strip().partition("\n\n")
    return lead.strip(), more.strip()


def lead_problem(text: str) -> str | None:
    """Why a closing text's takeaway is not one short sentence, or None when it is."""
    lead, _ = split(text)
    words = len(_MARKUP.sub("", lead).split())
    if words > LEAD_WORDS:
        return f"its takeaway has {words} words (at most {LEAD_WORDS}): {lead[:120]!r}"
    if _SENTENCE_END.search(lead):
        return f"its takeaway is more than one sentence: {lead[:120]!r}"
    return None


def join(lead: str, *more: str) -> str:
    """A closing text from its takeaway and the explanation's paragraphs (empty ones left out)."""
    return "\n\n".join(p.strip() for p in (lead, *more) if p and p.strip())
