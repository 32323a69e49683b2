"""Hostile workspaces and bad input: nothing a run file, a client or a workspace
sends can inject into a hover, silence the server, hang it, or grow its memory.

These tests drive the real server process with :class:`raw_client.RawClient`, which writes
frames by hand (so it can send what pytest-lsp's well-behaved client never would).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsp_workspace import APP, MiB, app_run, info, write_run
from markdown_it import MarkdownIt
from raw_client import RawClient, frame
from tests.runs import new_run, source

from memlens.model import CallNode, FunctionStats, HeldBy, Hop, LineStats, replace
from memlens.store import Store

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux only")


def _open(c: RawClient, uri: str, text: str, version: int = 1) -> None:
    c.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}},
    )


def _hover(c: RawClient, uri: str, line: int, timeout: float = 30.0) -> dict[str, Any]:
    return c.call(
        "textDocument/hover",
        {"textDocument": {"uri": uri}, "position": {"line": line, "character": 0}},
        timeout=timeout,
    )


def _loaded(c: RawClient, folder: Path, timeout: float = 30.0) -> dict[str, Any]:
    return c.wait_notification(
        lambda m: (
            m["method"] == "memlens/runLoaded" and m["params"]["workspace"] == folder.as_uri()
        ),
        timeout,
    )


@pytest.fixture
def client() -> Iterator[RawClient]:
    c = RawClient()
    yield c
    assert c.close() == 0


# -- Markdown from a run is escaped ---------------------------------------------------------------
EVIL_NAMES = [
    "[click](https://evil.example/a)",
    "![pixel](https://evil.example/p.png)",
    '<img src="https://evil.example/i.png">',
    "<script>alert(1)</script>",
    "`x` [y](javascript:alert(1)) `",
    "``` <b>bold</b> ```",
    "\x1b[31mred\x1b[0m\x07",
    "a\n[ref]: https://evil.example/r\n\n<div>block</div>\n[ref]",
    "www.evil.example and https://evil.example/auto <https://evil.example/angle> x@evil.example",
    "&lt;img src=x&gt; &#60;b&#62;",
    "admin\u202e\u2066 // evil\u2069\u2066",  # bidi: reorders what the hover shows
]


def _evil_workspace(root: Path) -> tuple[Path, str]:
    folder = root / "evil"
    folder.mkdir()
    text = "def run():\n    data = [0] * 10**6\n    return data\n\nrun()\n"
    (folder / "app.py").write_text(text)
    key = str(folder / "app.py")
    lines = {2: LineStats(alloc_bytes=8 * MiB, alloc_count=1, peak_bytes=8 * MiB)}
    # The call path to line 2 goes through every hostile name (and a hostile file name).
    tree = [CallNode(0, -1, key, 5, "<module>")]
    for i, name in enumerate(EVIL_NAMES, start=1):
        tree.append(CallNode(i, i - 1, key, 5, name))
    tree.append(CallNode(len(tree), len(tree) - 1, key, 2, EVIL_NAMES[0], 8 * MiB, 1, 0, 8 * MiB))
    run = new_run([source(key, text, lines)], tree, run_info=info(8 * MiB))
    # The run id (its file name) is untrusted too.
    write_run(folder, run, "[id](https:evil.example)<b>")
    return folder, text


@pytest.mark.parametrize("preset", ["commonmark", "gfm-like"])
def test_hover_renders_no_link_image_or_html_from_a_run(
    tmp_path: Path, client: RawClient, preset: str
) -> None:
    folder, text = _evil_workspace(tmp_path)
    client.initialize([folder.as_uri()])
    _loaded(client, folder)
    uri = (folder / "app.py").as_uri()
    _open(client, uri, text)
    hover = _hover(client, uri, 1)["result"]
    markdown = hover["contents"]["value"]
    renderer = MarkdownIt(preset)
    if preset == "gfm-like":
        renderer.enable("linkify")  # bare URLs and domains become links here
    tokens = renderer.parse(markdown)
    kinds: set[str] = set()

    def walk(ts: list[Any]) -> None:
        for t in ts:
            kinds.add(t.type)
            walk(t.children or [])

    walk(tokens)
    assert not kinds & {"link_open", "image", "html_inline", "html_block"}, kinds
    html = renderer.render(markdown)
    assert "<a " not in html
    assert "<img" not in html
    assert "<script" not in html
    assert "\x1b" not in markdown
    assert "\x07" not in markdown
    assert not {"\u202e", "\u2066", "\u2069"} & set(markdown)
    # The names are shown (as text), not dropped.
    rendered = "".join(t.content for t in tokens if t.type == "inline")
    assert "[click](https://evil.example/a)" in rendered
    assert "<script>alert(1)</script>" in rendered
    assert "[id](https:evil.example)<b>" in rendered


def test_what_holds_a_line_renders_only_the_servers_own_links(
    tmp_path: Path, client: RawClient
) -> None:
    # Names, types and files of a run's paths are untrusted: every hop carries a hostile name
    # and type, and one's file is a hostile path of the run (listed in it, so it is linked).
    folder = tmp_path / "evil"
    folder.mkdir()
    text = "def run():\n    data = [0] * 10**6\n    return data\n\nrun()\n"
    (folder / "app.py").write_text(text)
    key = str(folder / "app.py")
    evil_file = '/work/x.py)](javascript:alert(1))<b>"\n[ref]: https://evil.example/r'
    lines = {2: LineStats(alloc_bytes=8 * MiB, alloc_count=1, live_bytes=8 * MiB, live_count=1)}
    hops = [Hop("module", EVIL_NAMES[0], EVIL_NAMES[1], key, 1)]
    hops += [Hop("key", name, name, evil_file, 3) for name in EVIL_NAMES[2:]]
    run = new_run(
        [source(key, text, lines), source(evil_file, "x = 1\n", {})],
        run_info=info(8 * MiB),
        holders=(HeldBy(key, 2, 5, "found", tuple(hops)),),
    )
    write_run(folder, run, "20261122-100000-1")
    client.initialize([folder.as_uri()])
    _loaded(client, folder)
    uri = (folder / "app.py").as_uri()
    _open(client, uri, text)
    markdown = _hover(client, uri, 1)["result"]["contents"]["value"]
    assert "**Held by**" in markdown
    renderer = MarkdownIt("commonmark")
    renderer.validateLink = lambda url: True  # every link, file: ones too (as VS Code's hovers)
    tokens = renderer.parse(markdown)
    links: list[str] = []
    kinds: set[str] = set()

    def walk(ts: list[Any]) -> None:
        for t in ts:
            kinds.add(t.type)
            if t.type == "link_open":
                links.append(t.attrs["href"])
            walk(t.children or [])

    walk(tokens)
    assert not kinds & {"image", "html_inline", "html_block"}, kinds
    # One link per part, each to a file of the run at a line: the app's, and the hostile path
    # percent-encoded into a file: URI (no link target survives in it).
    assert links[0] == f"{uri}#L1"
    assert links[1:] == [
        "file:///work/x.py%29%5D%28javascript%3Aalert%281%29%29%3Cb%3E%22%0A%5Bref%5D%3A%20https%3A/evil.example/r#L3"
    ] * (len(EVIL_NAMES) - 2)
    rendered = "".join(t.content for t in tokens if t.type == "inline")
    assert "[click](https://evil.example/a)" in rendered
    assert "<script>alert(1)</script>" in rendered


# -- re-mapping is bounded and off the event loop ------------------------------------------------
def test_hover_answers_promptly_on_20k_repeated_lines_and_hostile_sources(
    tmp_path: Path, client: RawClient
) -> None:
    folder = tmp_path / "big"
    folder.mkdir()
    repeated = "x = [0] * 1000\n" * 20_000
    (folder / "big.py").write_text(repeated)
    # A hostile recorded source: 300k lines that share nothing in order with any buffer.
    hostile = "".join(f"v{i % 3} = {i % 7}\n" for i in range(300_000))
    (folder / "hostile.py").write_text("x = 1\n")
    figures = {
        i: LineStats(alloc_bytes=4096, alloc_count=1, peak_bytes=4096) for i in range(1, 20_001, 10)
    }
    run = new_run(
        [
            source(str(folder / "big.py"), repeated, figures),
            source(str(folder / "hostile.py"), hostile, figures),
        ],
        run_info=info(MiB),
    )
    write_run(folder, run, "20261122-100000-1")
    client.initialize([folder.as_uri()])
    _loaded(client, folder)
    big, bad = (folder / "big.py").as_uri(), (folder / "hostile.py").as_uri()
    # One line inserted at the top: every recorded line moves down by one. difflib took over a
    # minute here (per version); the bound is generous, the cost is a small part of it.
    _open(client, big, "# a new first line\n" + repeated)
    started = time.monotonic()
    hover = _hover(client, big, 1, timeout=60)["result"]
    assert hover is not None
    assert hover["range"]["start"]["line"] == 1
    assert "differs from the profiled version (line 1 when profiled)" in hover["contents"]["value"]
    # The hostile source: the server keeps answering other requests meanwhile.
    _open(client, bad, "".join(f"v{i % 3} = {(i + 1) % 7}\n" for i in range(300_000)))
    assert _hover(client, big, 11, timeout=60)["result"] is not None
    assert "result" in _hover(client, bad, 5, timeout=60)
    # Typing in the big file: each version is mapped once, the newest wins.
    for v in range(2, 30):
        client.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": big, "version": v},
                "contentChanges": [
                    {
                        "range": {
                            "start": {"line": 0, "character": 0},
                            "end": {"line": 0, "character": 0},
                        },
                        "text": "#",
                    }
                ],
            },
        )
    assert _hover(client, big, 1, timeout=60)["result"] is not None
    assert time.monotonic() - started < 120  # a hang guard, not a speed claim


# -- every request answered ------------------------------------------------------------------------
def test_bad_content_length_does_not_silence_the_server(tmp_path: Path, client: RawClient) -> None:
    client.initialize([tmp_path.as_uri()])
    shutdown = '{"jsonrpc":"2.0","id":1,"method":"shutdown"}'
    client.write(frame(shutdown, b"Content-Length: abc\r\n\r\n"))
    client.write(frame(shutdown, b"Content-Length: -5\r\n\r\n"))
    client.write(frame("{}", b"Content-Length: 99999999999999999999\r\n\r\n"))
    client.write(frame(shutdown, b"X-Nonsense: 1\r\n\r\n"))
    client.write(b"garbage without any header at all\r\n\r\n")
    uri = (tmp_path / "x.py").as_uri()
    assert _hover(client, uri, 0)["result"] is None
    # The shutdown above was never understood: the server still answers.
    assert _hover(client, uri, 0)["result"] is None


def test_every_request_is_answered(tmp_path: Path, client: RawClient) -> None:
    client.initialize([tmp_path.as_uri()])
    uri = (tmp_path / "x.py").as_uri()
    bad_params: list[tuple[str, Any]] = [
        ("textDocument/hover", {"textDocument": {}}),
        ("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": -1}}),
        ("textDocument/hover", None),
        ("textDocument/hover", [1, 2]),
        ("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": "0:0-1:0"}),
        ("textDocument/codeLens", {"textDocument": 7}),
        ("inlayHint/resolve", {"label": 3}),
        (
            "inlayHint/resolve",
            {"label": "x", "position": {"line": 0, "character": 0}, "data": [9e99, "x"]},
        ),
        ("workspace/executeCommand", {"command": "memlens.setBaseline", "arguments": [{"run": 5}]}),
        ("workspace/executeCommand", {"command": "memlens.listRuns", "arguments": [[]]}),
        ("workspace/executeCommand", {"command": "memlens.nope", "arguments": []}),
        ("workspace/executeCommand", {"command": 12}),
        ("no/suchMethod", {}),
    ]
    ids = [client.request(method, params) for method, params in bad_params]
    ids.append(client.request("textDocument/hover", {}, msg_id="a string id"))
    for msg_id in ids:
        reply = client.wait(msg_id)
        assert ("error" in reply) or ("result" in reply), reply
    errors = {msg_id: client.wait(msg_id).get("error", {}).get("code") for msg_id in ids}
    assert errors[ids[0]] == -32602  # invalid params
    assert errors[ids[-2]] == -32601  # method not found
    # Messages without a usable id are answered with id null (JSON-RPC 2.0).
    client.write(frame(b"{not json"))
    client.write(frame(b"[1, 2, 3]"))
    client.write(frame(b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "textDocument/hover"}'))
    client.write(frame(b'{"jsonrpc": "1.0", "id": 5, "method": "textDocument/hover"}'))
    client.write(frame(b'{"jsonrpc": "2.0", "id": 6}'))
    assert client.wait(5)["error"]["code"] == -32600
    assert client.wait(6)["error"]["code"] == -32600
    deadline = time.monotonic() + 10
    while len(client.null_id_errors) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    codes = sorted(m["error"]["code"] for m in client.null_id_errors)
    assert codes == [-32700, -32600, -32600]
    assert _hover(client, uri, 0)["result"] is None


def test_requests_after_shutdown_get_an_error(tmp_path: Path) -> None:
    c = RawClient()
    c.initialize([tmp_path.as_uri()])
    assert "result" in c.call("shutdown")
    reply = c.call(
        "textDocument/hover",
        {"textDocument": {"uri": "file:///x"}, "position": {"line": 0, "character": 0}},
    )
    assert reply["error"]["code"] == -32600
    c.notify("exit")
    assert c.proc.wait(30) == 0


def _commands_workspace(root: Path) -> Path:
    folder = root / "proj"
    folder.mkdir()
    (folder / "app.py").write_text(APP)
    write_run(folder, app_run(folder / "app.py"), "20261122-100000-1")
    return folder


def test_commands_validate_their_arguments(tmp_path: Path, client: RawClient) -> None:
    folder = _commands_workspace(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "prog.py").write_text("print('hello')\n")
    os.symlink("/dev/zero", folder / "zero.mlrun")
    client.initialize([folder.as_uri()])
    _loaded(client, folder)

    def command(name: str, *args: Any) -> dict[str, Any]:
        return client.call("workspace/executeCommand", {"command": name, "arguments": list(args)})

    for spec in ("/dev/zero", str(folder / "zero.mlrun"), "/etc/hostname", str(folder)):
        reply = command("memlens.setBaseline", {"run": spec})
        assert reply["error"]["code"] == -32602, reply
        assert reply["error"]["message"].startswith("memlens: ")
    assert Store(folder).baseline() is None
    reply = command("memlens.chooseRun", {"run": "/dev/zero"})
    assert reply["error"]["code"] == -32602
    reply = command("memlens.runFile", {"uri": (outside / "prog.py").as_uri()})
    assert reply["error"]["code"] == -32602
    assert "outside every workspace folder" in reply["error"]["message"]
    assert not (outside / ".memlens").exists()
    reply = command("memlens.runFile", {"uri": "file:///dev/zero"})
    assert reply["error"]["code"] == -32602
    assert not Path("/dev/.memlens").exists()
    # A good run still works.
    ok = command("memlens.setBaseline", {"run": "latest"})
    assert ok["result"]["id"] == "20261122-100000-1"


def test_one_bad_function_row_keeps_the_other_lenses(tmp_path: Path, client: RawClient) -> None:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "app.py").write_text(APP)
    good = app_run(folder / "app.py")
    sf = next(iter(good.files.values()))
    bad_rows = (
        FunctionStats("broken", -7, -1, alloc_bytes=5 * MiB, peak_bytes=5 * MiB),
        FunctionStats("huge", 2**40, 2**40 + 3, alloc_bytes=5 * MiB, peak_bytes=5 * MiB),
        FunctionStats("zero", 0, 0, alloc_bytes=5 * MiB, peak_bytes=5 * MiB),
    )
    broken = replace(sf, functions=bad_rows + sf.functions)
    bad_lines = {
        **sf.lines,
        0: LineStats(live_bytes=9 * MiB, peak_bytes=9 * MiB),
        -3: LineStats(live_bytes=9 * MiB),
    }
    broken = replace(broken, lines=bad_lines)
    write_run(folder, replace(good, files={sf.path: broken}), "20261122-100000-1")
    client.initialize([folder.as_uri()])
    _loaded(client, folder)
    uri = (folder / "app.py").as_uri()
    _open(client, uri, APP)
    lenses = client.call("textDocument/codeLens", {"textDocument": {"uri": uri}})["result"]
    assert [lens["range"]["start"]["line"] for lens in lenses] == [3, 16, 21]
    hints = client.call(
        "textDocument/inlayHint",
        {
            "textDocument": {"uri": uri},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 24, "character": 0}},
        },
    )["result"]
    assert [h["position"]["line"] for h in hints] == [4, 9, 17, 22]
    diags = client.wait_notification(
        lambda m: (
            m["method"] == "textDocument/publishDiagnostics"
            and m["params"]["uri"] == uri
            and bool(m["params"]["diagnostics"])
        )
    )
    assert [d["range"]["start"]["line"] for d in diags["params"]["diagnostics"]] == [4]


def test_a_run_rewritten_in_place_is_reported_once(tmp_path: Path, client: RawClient) -> None:
    folder = tmp_path / "proj"
    runs = folder / ".memlens" / "runs"
    runs.mkdir(parents=True)
    bad = runs / "20261122-100000-1.mlrun"
    bad.write_bytes(b"not a run")
    client.initialize([folder.as_uri()])
    _loaded(client, folder)
    end = time.monotonic() + 4
    n = 0
    while time.monotonic() < end:  # rewritten ~10 times a second (the server polls at 0.2 s)
        n += 1
        bad.write_bytes(b"not a run, take %d" % n)
        time.sleep(0.1)
    time.sleep(0.5)
    shown = [m for m in client.notifications if m["method"] == "window/showMessage"]
    assert len(shown) == 1, shown
    assert "cannot read" in shown[0]["params"]["message"]


def test_null_configuration_answer_does_not_stop_the_folder(tmp_path: Path) -> None:
    folder = _commands_workspace(tmp_path)
    c = RawClient(on_request=lambda method, params: None)  # answers workspace/configuration: null
    try:
        c.initialize([folder.as_uri()])
        loaded = _loaded(c, folder, timeout=20)
        assert loaded["params"]["run"]["id"] == "20261122-100000-1"
        uri = (folder / "app.py").as_uri()
        _open(c, uri, APP)
        assert _hover(c, uri, 4)["result"] is not None
        assert any(r["method"] == "workspace/configuration" for r in c.server_requests)
    finally:
        assert c.close() == 0


def test_a_fifo_pointer_does_not_stop_other_folders_or_exit(tmp_path: Path) -> None:
    healthy = _commands_workspace(tmp_path)
    hostile = tmp_path / "hostile"
    runs = hostile / ".memlens" / "runs"
    runs.mkdir(parents=True)
    os.mkfifo(runs / "latest")
    c = RawClient()
    c.initialize([hostile.as_uri(), healthy.as_uri()])
    loaded = _loaded(c, healthy, timeout=20)
    assert loaded["params"]["run"]["id"] == "20261122-100000-1"
    uri = (healthy / "app.py").as_uri()
    _open(c, uri, APP)
    assert _hover(c, uri, 4)["result"] is not None
    assert c.close(timeout=20) == 0
