"""Invariants of the native tracer (docs/ARCHITECTURE.md, ``native/``), checked on its source."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "native" / "src"

#: The prefixes of the functions installed as hooks: the PEP 445 domains in exact (ex_), sampling
#: (sm_) and pymalloc-sampling (pym_) modes, pymalloc's arena allocator, numpy's handler (np_),
#: the C library's allocator and mappings (ml_, through native.cpp's patched slots) and
#: CPython's reference tracer (ref_: objects made, 3.13+).
HOOK = re.compile(
    r"^(?:MEMLENS_HOT )?(?:void\*|void|int) ((?:ex|sm|pym|np|ml|arena|ref)_\w+)\(", re.MULTILINE
)
FUNCTION = re.compile(
    r"^(?:__attribute__\(\(\w+\)\) )?(?:MEMLENS_HOT )?(?:inline |static )*[\w:<>*& ]+?\b(\w+)\([^;{]*\)"
    r"(?:\s*noexcept)?\s*\{",
    re.MULTILINE,
)

#: Hooks that need no reentrancy flag, and why (each also said in ARCHITECTURE.md).
UNGUARDED = {
    # pymalloc's small requests never re-enter the hooks (it serves them from its pools); an
    # unsampled one is a countdown subtraction and a tail call. Sampled ones go through
    # pym_sampled, which checks the flag.
    "pym_malloc": "pymalloc serves it without re-entering the hooks",
    "pym_calloc": "pymalloc serves it without re-entering the hooks",
}


#: The files that may branch on CPython's version: compat.hpp, and free_lists.c, which reads the
#: free lists from each version's interpreter state (before 3.13 its headers compile only as C).
VERSIONED = {"compat.hpp", "free_lists.c"}


def _sources() -> dict[str, str]:
    files = [*SRC.glob("*.[ch]pp"), *SRC.glob("*.[ch]")]
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(files)}


def _bodies(text: str) -> dict[str, str]:
    """Each top-level function's body, by name (brace matching; the tracer's style is simple)."""
    out: dict[str, str] = {}
    for m in FUNCTION.finditer(text):
        depth, i = 0, m.end() - 1
        while i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        out.setdefault(m.group(1), text[m.end() : i])
    return out


def _guarded(name: str, bodies: dict[str, str], seen: set[str]) -> bool:
    """Whether ``name`` reads the reentrancy flag, itself or through a function it calls."""
    if name in seen or name not in bodies:
        return False
    seen.add(name)
    body = bodies[name]
    if re.search(r"\bin_hook\b(?!\s*=[^=])", body):  # read, not only set
        return True
    called = set(re.findall(r"\b(\w+)(?:<[^>]*>)?\(", body))
    return any(_guarded(c, bodies, seen) for c in called)


def test_version_branches_live_in_compat_only() -> None:
    """ARCHITECTURE.md: compat.hpp holds every CPython version branch (but the free lists')."""
    sources = _sources()
    assert set(sources) >= VERSIONED
    for name, text in sources.items():
        if name in VERSIONED:
            continue
        for word in ("PY_VERSION_HEX", "Py_GIL_DISABLED", "PY_MINOR_VERSION"):
            assert word not in text, f"{name} branches on {word}: move it to compat.hpp"


def test_every_hook_checks_the_reentrancy_flag() -> None:
    """ARCHITECTURE.md: every allocating hook checks a thread-local reentrancy flag first."""
    text = _sources()["hooks.cpp"]
    bodies = _bodies(text)
    hooks = set(HOOK.findall(text))
    assert {"ex_malloc", "sm_malloc", "pym_malloc", "np_malloc", "ml_malloc", "ml_mmap"} <= hooks
    assert "ref_event" in hooks
    # Frees call no allocator (the tables they update allocate nothing): they need no flag.
    hooks = {h for h in hooks if not h.endswith("_free")}
    unguarded = {h for h in hooks if h not in UNGUARDED and not _guarded(h, bodies, set())}
    assert not unguarded, f"hooks that never read the reentrancy flag: {sorted(unguarded)}"
    # The exemptions are real hooks, and still reach the flag on their sampled path.
    assert set(UNGUARDED) <= hooks
    assert all(_guarded(h, bodies, set()) for h in UNGUARDED)


def test_the_reentrancy_flag_is_set_by_its_guard_only() -> None:
    """ARCHITECTURE.md: a hook sets the flag through an InHook (state.hpp) for its extent, so
    no return path can leave it set."""
    for name, text in _sources().items():
        sets = re.findall(r"\bin_hook\s*=[^=]", text)
        if name == "state.hpp":
            assert len(sets) == 2, sets  # InHook's constructor and destructor
        else:
            assert not sets, f"{name} sets in_hook by hand: use an InHook"
    bodies = _bodies(_sources()["hooks.cpp"])
    assert {"reused", "alloc_tracked"} <= set(bodies)  # noexcept functions are read too
