"""The only place that builds lsprotocol objects (from the editor-terms records of views).

Columns are counted in the position encoding negotiated with the client (UTF-16 unless the
client offered UTF-8 or UTF-32), through pygls's position codec.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lsprotocol import types as lsp
from pygls.workspace.position_codec import PositionCodec

from memlens_server.views import DiagnosticItem, HintItem, LensItem

SOURCE = "memlens"

INLAY_HINT_OPTIONS = lsp.InlayHintOptions(resolve_provider=True)
CODE_LENS_OPTIONS = lsp.CodeLensOptions(resolve_provider=False)


def end_of_line(codec: PositionCodec, lines: Sequence[str], line: int) -> lsp.Position:
    text = lines[line] if line < len(lines) else ""
    return lsp.Position(line=line, character=codec.client_num_units(text))


def inlay_hint(
    item: HintItem, codec: PositionCodec, lines: Sequence[str], data: dict[str, Any]
) -> lsp.InlayHint:
    return lsp.InlayHint(
        position=end_of_line(codec, lines, item.line),
        label=item.label,
        padding_left=True,
        data=data,
    )


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


def diagnostic(item: DiagnosticItem, codec: PositionCodec, lines: Sequence[str]) -> lsp.Diagnostic:
    text = lines[item.line] if item.line < len(lines) else ""
    return lsp.Diagnostic(
        range=lsp.Range(
            start=lsp.Position(
                line=item.line, character=codec.client_num_units(text[: item.start])
            ),
            end=lsp.Position(line=item.line, character=codec.client_num_units(text[: item.end])),
        ),
        message=item.message,
        severity=lsp.DiagnosticSeverity.Warning,
        source=SOURCE,
        code="leak",
    )


def publish(
    uri: str, version: int | None, diags: list[lsp.Diagnostic]
) -> lsp.PublishDiagnosticsParams:
    return lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=version)


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
