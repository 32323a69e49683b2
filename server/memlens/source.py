"""Program source, read the way Python reads it: the one reader of source files (the tracer
and the importers record what it returns) and the one digest of a source text (the language
server compares an editor's buffer with a recorded file by it).

Python decodes a source file as UTF-8 unless its first two lines declare another encoding
(PEP 263, PEP 3120); the text kept has universal newlines. A recorded file's ``sha256`` is the
digest of its bytes on disk, so a text is digested in the encoding it declares, the bytes it
is saved as. Stdlib only; ``tokenize`` (costly to import) only for texts that declare one,
and OpenSSL only for large files (memlens.sha256).
"""

from __future__ import annotations

from memlens import sha256
from memlens.layout import open_regular

#: How far a coding declaration may be (PEP 263: the first two lines; a long line before the
#: declaration is not searched to its end).
_HEAD = 200


def read_source(path: str) -> tuple[str, str] | None:
    """(sha256 of the file's bytes, its text) of the source file ``path``; None when it
    cannot be read or is not a regular file (a FIFO or device is refused without blocking).
    Text that does not decode in its declared encoding is read as UTF-8, with U+FFFD for
    undecodable bytes."""
    try:
        with open(open_regular(path), "rb") as fh:
            data = fh.read()
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return None
    return sha256.hexdigest(data), decode_source(data)


def decode_source(data: bytes) -> str:
    """The text of source ``data`` as Python decodes it, with universal newlines."""
    head = data[:_HEAD].split(b"\n", 2)[:2]
    if any(b"coding" in line for line in head):
        text = script_text(data)
        if text is not None:
            return text
    return _universal_newlines(data.decode("utf-8", errors="replace"))


def script_text(data: bytes) -> str | None:
    """The text python reads from script ``data`` to run it: decoded as its coding line or
    BOM says (strictly: None where python would refuse the bytes), universal newlines."""
    import io
    import tokenize

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return _universal_newlines(data.decode(encoding))
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return None


def text_digest(text: str) -> str:
    """The sha256 of ``text`` saved in the encoding it declares (UTF-8 unless it declares
    one): equal to a recorded file's ``sha256`` when ``text`` is that file's content."""
    return sha256.hexdigest(_encode(text))


def _encode(text: str) -> bytes:
    head = text[:_HEAD].split("\n", 2)[:2]
    if any("coding" in line for line in head):
        import io
        import tokenize

        first = "\n".join(head).encode("utf-8", "surrogatepass")
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(first).readline)
            return text.encode(encoding)
        except (SyntaxError, UnicodeError, LookupError):
            pass
    # surrogatepass: a buffer may hold lone surrogates (JSON allows them); never an error.
    return text.encode("utf-8", "surrogatepass")


def _universal_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")
