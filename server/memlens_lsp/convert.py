"""The only place that builds lsprotocol objects (from the editor-terms records of views).

Columns are counted in the position encoding negotiated with the client (UTF-16 unless the
client offered UTF-8 or UTF-32), through pygls's position codec.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring_ascii as _json_string
from typing import Any

from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pygls.uris import from_fs_path
from pygls.workspace.position_codec import PositionCodec

from memlens_lsp.views import DiagnosticItem, HintItem, LensItem

SOURCE = "memlens"

INLAY_HINT_OPTIONS = lsp.InlayHintOptions(resolve_provider=True)
CODE_LENS_OPTIONS = lsp.CodeLensOptions(resolve_provider=False)


def units(codec: PositionCodec, text: str) -> int:
    """Length of ``text`` in the codec's encoding (C-speed encodes, not a per-char loop)."""
    return counter(codec)(text)


def counter(codec: PositionCodec) -> Callable[[str], int]:
    """:func:`units` for one codec (the encoding looked at once, for many lines)."""
    encoding = codec.encoding
    if encoding == lsp.PositionEncodingKind.Utf8:
        return _utf8_units
    if encoding == lsp.PositionEncodingKind.Utf32:
        return len
    return _utf16_units


def _utf8_units(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _utf16_units(text: str) -> int:
    # ("utf-16" is one of CPython's fast paths, "utf-16-le" is not; less its byte-order mark)
    return len(text) if text.isascii() else len(text.encode("utf-16", "surrogatepass")) // 2 - 1


def end_of_line(codec: PositionCodec, lines: Sequence[str], line: int) -> lsp.Position:
    text = lines[line] if line < len(lines) else ""
    return lsp.Position(line=line, character=units(codec, text))


class Prebuilt(str):
    """A response's result already written as JSON (ASCII only), which the transport sends as
    it is (:meth:`memlens_lsp.transport.MemlensProtocol._send_response`): a big answer that
    clients ask for again and again (a whole file's inlay hints, 10,000+ of them: Neovim asks
    for the whole buffer on every refresh) costs no conversion the second time."""

    __slots__ = ()


def prebuilt(values: Any) -> Prebuilt:
    """``values`` (JSON values) as a :class:`Prebuilt` result."""
    return Prebuilt(json.dumps(values, separators=(",", ":")))


def inlay_hint_texts(
    items: Sequence[HintItem], codec: PositionCodec, lines: Sequence[str], token: int
) -> list[str]:
    """Inlay hints as the JSON text :func:`inlay_hint` serialises to, with ``data``
    ``[token, recorded line]`` (what hint answers are made of, written directly: no
    lsprotocol object, no dict; a whole file's 10,000 in one pass)."""
    width = counter(codec)
    n = len(lines)
    data = f',"paddingLeft":true,"data":[{token},'
    return [
        f'{{"position":{{"line":{line},"character":{width(lines[line]) if line < n else 0}}},'
        f'"label":{_json_string(label)}{data}{recorded}]}}'
        for line, label, recorded in items
    ]


def prebuilt_array(texts: list[str]) -> Prebuilt:
    """A JSON array of values already written as (ASCII) JSON text."""
    return Prebuilt(f"[{','.join(texts)}]")


def inlay_hint(
    item: HintItem, codec: PositionCodec, lines: Sequence[str], data: Any
) -> lsp.InlayHint:
    return lsp.InlayHint(
        position=end_of_line(codec, lines, item.line),
        label=item.label,
        padding_left=True,
        data=data,
    )


def converter_factory() -> Any:
    """pygls's converter plus a fast unstructure hook for inlay hints.

    A full-file request returns one hint per line with figures (10,000+ in big files); the
    generic cattrs hook costs ~9 µs per hint, this one ~1 µs. It writes the fields this server
    sets (position, label, paddingLeft, data, tooltip) and defers anything else to the
    generic hook.
    """
    conv = default_converter()  # type: ignore[no-untyped-call]
    generic = conv.get_unstructure_hook(lsp.InlayHint)

    def hint_to_json(hint: lsp.InlayHint) -> Any:
        if (
            not isinstance(hint.label, str)
            or hint.kind is not None
            or hint.text_edits is not None
            or hint.padding_right is not None
        ):
            return generic(hint)
        out: dict[str, Any] = {
            "position": {"line": hint.position.line, "character": hint.position.character},
            "label": hint.label,
        }
        if hint.padding_left is not None:
            out["paddingLeft"] = hint.padding_left
        tooltip = hint.tooltip
        if isinstance(tooltip, lsp.MarkupContent):
            out["tooltip"] = {"kind": tooltip.kind.value, "value": tooltip.value}
        elif tooltip is not None:
            out["tooltip"] = tooltip
        if hint.data is not None:
            out["data"] = hint.data
        return out

    conv.register_unstructure_hook(lsp.InlayHint, hint_to_json)
    return conv


def with_tooltip(hint: lsp.InlayHint, text: str | None) -> lsp.InlayHint:
    if text is not None:
        hint.tooltip = markdown(text)
    return hint


def markdown(text: str) -> lsp.MarkupContent:
    return lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text)


def hover(text: str, codec: PositionCodec, lines: Sequence[str], line: int) -> lsp.Hover:
    start = lsp.Position(line=line, character=0)
    return lsp.Hover(
        contents=markdown(text),
        range=lsp.Range(start=start, end=end_of_line(codec, lines, line)),
    )


def code_lens(item: LensItem) -> lsp.CodeLens:
    pos = lsp.Position(line=item.line, character=0)
    return lsp.CodeLens(
        range=lsp.Range(start=pos, end=pos),
        command=lsp.Command(
            title=item.title,
            command=item.command,
            arguments=list(item.arguments) if item.arguments is not None else None,
        ),
    )


_SEVERITY = {"leak": lsp.DiagnosticSeverity.Warning, "test": lsp.DiagnosticSeverity.Error}


def diagnostic_json(item: DiagnosticItem, codec: PositionCodec, lines: Sequence[str]) -> Any:
    """A diagnostic as the JSON value of an ``lsp.Diagnostic`` (what a publication is made of,
    without the lsprotocol object: a big file has thousands)."""
    text = lines[item.line] if item.line < len(lines) else ""
    start = units(codec, text[: item.start])
    end = units(codec, text[: item.end])
    out: dict[str, Any] = {
        "range": {
            "start": {"line": item.line, "character": start},
            "end": {"line": item.line, "character": end},
        },
        "message": item.message,
        "severity": int(_SEVERITY.get(item.code, lsp.DiagnosticSeverity.Information)),
        "code": item.code,
        "source": SOURCE,
    }
    if item.related:
        out["relatedInformation"] = [
            {
                "location": {
                    "uri": from_fs_path(path) or path,
                    "range": {
                        "start": {"line": line, "character": 0},
                        "end": {"line": line, "character": 0},
                    },
                },
                "message": message,
            }
            for path, line, message in item.related
        ]
    return out


def publish_json(uri: str, version: int | None, diags: list[Any]) -> dict[str, Any]:
    """``textDocument/publishDiagnostics``'s parameters as JSON values."""
    out: dict[str, Any] = {"uri": uri, "diagnostics": diags}
    if version is not None:
        out["version"] = version
    return out


def message(text: str, *, error: bool = False) -> lsp.ShowMessageParams:
    kind = lsp.MessageType.Error if error else lsp.MessageType.Warning
    return lsp.ShowMessageParams(type=kind, message=text)


def log(text: str, level: str = "info") -> lsp.LogMessageParams:
    kind = {
        "error": lsp.MessageType.Error,
        "warning": lsp.MessageType.Warning,
        "info": lsp.MessageType.Info,
    }.get(level, lsp.MessageType.Log)
    return lsp.LogMessageParams(type=kind, message=text)


def progress_begin(title: str, message: str) -> lsp.WorkDoneProgressBegin:
    return lsp.WorkDoneProgressBegin(title=title, message=message, cancellable=True)


def progress_report(message: str) -> lsp.WorkDoneProgressReport:
    return lsp.WorkDoneProgressReport(message=message)


def progress_end(message: str) -> lsp.WorkDoneProgressEnd:
    return lsp.WorkDoneProgressEnd(message=message)


def watch_registration(reg_id: str, glob: str) -> lsp.RegistrationParams:
    options = lsp.DidChangeWatchedFilesRegistrationOptions(
        watchers=[lsp.FileSystemWatcher(glob_pattern=glob)]
    )
    return lsp.RegistrationParams(
        registrations=[
            lsp.Registration(
                id=reg_id,
                method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=options,
            )
        ]
    )


def configuration_request(scope_uri: str | None = None) -> lsp.ConfigurationParams:
    return lsp.ConfigurationParams(
        items=[lsp.ConfigurationItem(section="memlens", scope_uri=scope_uri)]
    )
