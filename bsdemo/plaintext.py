"""Text that quotes what a user typed, made safe to show where Streamlit renders Markdown.

`st.error`, `st.warning`, `st.info` and friends render their body as Markdown: a URL parameter
`[click me](https://…)` would become a link inside the app's own error box, and `![p](https://…)`
would load an outside image. `plain()` makes Markdown show the text character for character:

- every ASCII punctuation mark is backslash-escaped (CommonMark allows an escape before any of
  them): no links, images, emphasis, HTML, LaTeX or headings can form;
- a word that could still turn into something after parsing goes into an inline code span,
  where nothing is ever parsed: GFM finds bare URLs (`https://…`, `www.…`) and e-mail addresses
  in the *parsed* text, so escapes do not stop it, and the same goes for text-level
  replacements such as `:emoji:` shortcodes. Such a word is one with `@`, `www.` or a colon
  that does not end it (`https://`, `:red[`, `:smile:`; "lr:" stays text);
- newlines become spaces, so a message stays one paragraph.

Pure Python: tested without a browser, and in Chromium for the DOM (tests/e2e).
"""

from __future__ import annotations

import re
import string

_ESCAPE = {ord(c): "\\" + c for c in string.punctuation}
_SPACES = re.compile(r"([ \t]+)")  # GFM's URL and e-mail runs stop at these
_RISKY = re.compile(r":(?=.)|@|www\.", re.IGNORECASE)  # a colon ending a word ("lr:") is harmless
_TICKS = re.compile(r"`+")


def plain(text: str) -> str:
    """text, as Markdown that shows it character for character."""
    words = _SPACES.split(str(text).replace("\r", " ").replace("\n", " "))
    return "".join(
        word
        if word.isspace() or not word
        else _code(word)
        if _RISKY.search(word)
        else word.translate(_ESCAPE)
        for word in words
    )


def _code(word: str) -> str:
    fence = "`" * (max((len(m) for m in _TICKS.findall(word)), default=0) + 1)
    pad = " " if word.startswith("`") or word.endswith("`") else ""
    return f"{fence}{pad}{word}{pad}{fence}"


def unescape(markdown: str) -> str:
    """The text `plain()` made Markdown of (for tests): drops the backslash before each
    punctuation mark and the fences of code spans."""
    out: list[str] = []
    i = 0
    while i < len(markdown):
        ch = markdown[i]
        if ch == "\\":
            out.append(markdown[i + 1 : i + 2])
            i += 2
        elif ch == "`":
            fence = _TICKS.match(markdown, i).group()
            end = markdown.index(fence, i + len(fence))
            body = markdown[i + len(fence) : end]
            if body.startswith(" ") and body.endswith(" ") and body.strip(" "):
                body = body[1:-1]
            out.append(body)
            i = end + len(fence)
        else:
            out.append(ch)
            i += 1
    return "".join(out)
