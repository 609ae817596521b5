"""What "shown as plain text" means for a Markdown body made by bsdemo.plaintext.plain: outside
inline code spans every ASCII punctuation mark is escaped, and inside them nothing is parsed."""

from __future__ import annotations

import re
import string

_TICKS = re.compile(r"`+")


def is_plain(markdown: str) -> bool:
    i = 0
    while i < len(markdown):
        ch = markdown[i]
        if ch == "\\":
            if i + 1 >= len(markdown) or markdown[i + 1] not in string.punctuation:
                return False
            i += 2
        elif ch == "`":
            fence = _TICKS.match(markdown, i).group()
            end = markdown.find(fence, i + len(fence))
            if end < 0 or markdown[end + len(fence) : end + len(fence) + 1] == "`":
                return False
            i = end + len(fence)
        elif ch in string.punctuation or ch in "\n\r":
            return False
        else:
            i += 1
    return True
