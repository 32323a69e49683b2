"""The one place the server turns text from a run into Markdown.

Everything a run file carries (function names, file paths, run ids, the mode string) is
untrusted: a workspace may hold a run file crafted to inject links, remote images or HTML into
a hover, and clients differ in what they render or fetch. Every such string goes through
:func:`text` (inline prose) or :func:`code` (an inline code span) before it is placed in
Markdown; the fixed parts of the server's Markdown are written by hand.

Both first replace control characters (C0, C1, DEL, line and paragraph separators: escape
sequences, and line breaks that would start a new block such as a link reference definition
or raw HTML) and the invisible marks that reorder or hide text (bidi overrides and isolates:
:data:`memlens.layout.INVISIBLE`, which the terminal escapes too) with U+FFFD. :func:`text` then backslash-escapes every ASCII punctuation
character, which CommonMark always allows and which leaves no link, image, autolink, HTML,
entity, emphasis or table syntax; it also keeps GFM's bare-URL autolinks (``www.x.org``,
``https://...``) from forming, as ``.``, ``:`` and ``/`` are escaped. :func:`code` puts the
text in a code span whose backtick fence is longer than any run of backticks inside it (no
markup is recognised inside a code span). Neither is meant for a table cell (GFM splits cells
on ``|`` even inside code spans): the server's tables hold figures only.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from memlens.layout import INVISIBLE

#: Control characters, line/paragraph separators some renderers treat as line breaks, and the
#: invisible marks that reorder text.
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029" + "".join(re.escape(chr(c)) for c in INVISIBLE) + "]"
)
_PUNCTUATION = re.compile(r"""([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])""")
_BACKTICKS = re.compile(r"`+")
#: Untrusted strings are cut to this many characters (a name, a path) before rendering.
MAX_CHARS = 300


def plain(value: str) -> str:
    """``value`` with control characters and invisible marks replaced, cut to
    :data:`MAX_CHARS` (also for plain text the editor shows: diagnostics)."""
    if len(value) > MAX_CHARS:
        value = value[: MAX_CHARS - 1] + "…"
    return _CONTROL.sub("\ufffd", value)


def text(value: str) -> str:
    """``value`` as inline Markdown that renders as exactly its characters."""
    return _PUNCTUATION.sub(r"\\\1", plain(value))


def code(value: str) -> str:
    """``value`` as an inline code span."""
    value = plain(value)
    longest = max((len(m) for m in _BACKTICKS.findall(value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") or not value.strip() else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def link(label: str, path: str, line: int, title: str) -> str:
    """``label`` (Markdown made by :func:`code` or :func:`text`) as a link to ``line`` of the
    file ``path`` (absolute; otherwise the label alone), with ``title`` (plain text) as its
    tooltip. The path is percent-encoded into a ``file:`` URI, so no Markdown survives in it."""
    if not path.startswith("/") or "\x00" in path:
        return label
    uri = PurePosixPath(path).as_uri() + (f"#L{line}" if line > 0 else "")
    tip = re.sub(r'(["\\])', r"\\\1", plain(title))
    return f'[{label}]({uri} "{tip}")'
