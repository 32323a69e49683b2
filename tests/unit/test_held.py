"""How a path of what holds a line is written (memlens.held): as Python would name it, in
parts that each end at one object, and as the export's JSON; the terminal's `--why` lines."""

from __future__ import annotations

from memlens import held
from memlens.model import HeldBy, Hop, replace
from memlens.report import why_lines
from tests.runs import sample_holders, sample_run

APP = "/work/app.py"


def path(*hops: Hop) -> HeldBy:
    return HeldBy(APP, 4, 2, "found", hops)


def test_every_kind_of_hop_written_out() -> None:
    root = Hop("module", "ledger", "module")
    cases = {
        (Hop("attribute", "cache", "dict", APP, 2),): "ledger.cache",
        (Hop("key", "('AB-1', 3)", "list", APP, 4),): "ledger[('AB-1', 3)]",
        (Hop("dict_key", "'k'", "str"),): "ledger.keys() ∋ 'k'",
        (Hop("index", "7", "int"),): "ledger[7]",
        (Hop("member", "", "tuple"),): "ledger ∋ member",
        (Hop("buffer", "table", ""),): "ledger (its hash table)",
        (Hop("buffer", "items", ""),): "ledger (its item array)",
        (Hop("buffer", "data", ""),): "ledger (its data)",
        (Hop("referent", "", "tuple"),): "ledger → <tuple>",
        (Hop("referent", "cell_contents", "list"),): "ledger → cell_contents",
        (Hop("elided", "12", ""),): "ledger → … 12 more …",
    }
    for hops, text in cases.items():
        assert held.expression(path(root, *hops)) == text
    thread = Hop("thread", "worker in fill", "frame")
    assert held.expression(path(thread, Hop("local", "buf", "list"))) == (
        "<thread worker in fill> local buf"
    )
    assert held.expression(path(thread, Hop("frame", "outer", "frame"))) == (
        "<thread worker in fill> → outer()"
    )
    assert held.expression(path(Hop("c", "list", "list"), Hop("index", "1", "function"))) == (
        "<list held by C code>[1]"
    )
    assert held.expression(path(Hop("cycle", "Node", "Node"), Hop("attribute", "x", "list"))) == (
        "<Node in a reference cycle>.x"
    )


def test_parts_end_at_one_object_each() -> None:
    h = path(
        Hop("module", "ledger", "module", APP, 1),
        Hop("attribute", "_cache", "dict", APP, 2),
        Hop("attribute", "rows", "list", APP, 3),
        Hop("key", "'a'", "list", APP, 4),
        Hop("index", "0", "float", APP, 5),
    )
    assert [(p.text, p.type, p.file, p.line) for p in held.parts(h)] == [
        ("ledger._cache.rows", "list", APP, 3),  # attributes join the part before them
        ("['a']", "list", APP, 4),
        ("[0]", "float", APP, 5),
    ]


def test_json_and_summary() -> None:
    found, none = sample_holders()
    assert held.to_json([found, none]) == [
        {
            "objects": 5,
            "outcome": "found",
            "path": "__main__.data (its item array)",
            "hops": [
                {
                    "kind": "module",
                    "name": "__main__",
                    "type": "module",
                    "file": None,
                    "line": None,
                },
                {"kind": "attribute", "name": "data", "type": "list", "file": APP, "line": 4},
                {"kind": "buffer", "name": "items", "type": "", "file": APP, "line": 4},
            ],
        },
        {"objects": 0, "outcome": "unreached"},
    ]
    assert held.to_json([found], {APP: "/here/app.py"})[0]["hops"][1]["file"] == "/here/app.py"
    assert held.summary([found]) == "__main__.data (its item array)"
    assert held.summary([none]) == held.NO_PATH["unreached"]
    assert held.summary([]) is None


def test_why_lines_in_the_terminal() -> None:
    run = replace(sample_run(), holders=sample_holders())
    assert why_lines(run, APP, 4) == [
        "/work/app.py:4 holds 30.0 MiB at exit in 10 objects",
        "  held by __main__.data (its item array)  (5 of 5 sampled)",
        "    __main__.data     list          allocated at /work/app.py:4",
        "    (its item array)  -             allocated at /work/app.py:4",
    ]
    assert why_lines(run, APP, 6)[1] == f"  {held.NO_PATH['unreached']}"
    nothing = replace(sample_run(), holders=())
    assert why_lines(nothing, APP, 4)[1].startswith("  the run recorded nothing")
    # A name from the run is made printable (it is untrusted).
    evil = HeldBy(APP, 4, 1, "found", (Hop("module", "m\x1b[31m", "module"),))
    assert "\x1b" not in "".join(why_lines(replace(sample_run(), holders=(evil,)), APP, 4))
