"""JSON text of what a run file stores, written through the C encoder the ``json`` module
itself uses, without importing ``json``: its decoder compiles regular expressions on import
(``re``: about a quarter of ``memlens run``'s fixed cost per profiled program, ~30 M
instructions), and writing a run needs none of it. The text is byte for byte what
``json.dumps`` gives with the same options (``tests/unit/test_runfile_jsontext.py``); the
readers, which run elsewhere, use ``json`` itself."""

from __future__ import annotations

import _json

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from typing import Any


def _not_json(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# (markers, default, string encoder, indent, key separator, item separator, sort_keys,
# skipkeys, allow_nan): json.encoder.JSONEncoder.iterencode's arguments, circular check off.
_COMPACT = _json.make_encoder(
    None, _not_json, _json.encode_basestring, None, ":", ",", False, False, True
)
_PLAIN = _json.make_encoder(
    None, _not_json, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True
)


def compact(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``."""
    return "".join(_COMPACT(value, 0))


def plain(value: Any) -> str:
    """``json.dumps(value)``."""
    return "".join(_PLAIN(value, 0))
