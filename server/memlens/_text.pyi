# Type stub of the native text module (native/src/text_module.cpp); tests/unit/test_diff_native.py
# checks it stays in sync.
from array import array
from collections.abc import Callable, Sequence
from typing import Any, Literal, overload

@overload
def format_rows(
    parts: Sequence[str],
    fields: list[Any],
    sources: list[Any],
    at: tuple[Any, Any],
    tables: int,
    n: int,
    sep: None = None,
    write: None = None,
    lead: str = "",
    binary: Literal[False] = False,
) -> list[str]: ...
@overload
def format_rows(
    parts: Sequence[str],
    fields: list[Any],
    sources: list[Any],
    at: tuple[Any, Any],
    tables: int,
    n: int,
    sep: str,
    write: None = None,
    lead: str = "",
    binary: Literal[False] = False,
) -> str: ...
@overload
def format_rows(
    parts: Sequence[str],
    fields: list[Any],
    sources: list[Any],
    at: tuple[Any, Any],
    tables: int,
    n: int,
    sep: str,
    write: Callable[[str], object],
    lead: str = "",
    binary: Literal[False] = False,
) -> None: ...
@overload
def format_rows(
    parts: Sequence[str],
    fields: list[Any],
    sources: list[Any],
    at: tuple[Any, Any],
    tables: int,
    n: int,
    sep: str,
    write: Callable[[bytes], object],
    lead: str = "",
    *,
    binary: Literal[True],
) -> None: ...
def order(keys: array[int]) -> array[int]: ...
def locate(positions: Sequence[int], counts: list[int]) -> tuple[array[int], array[int]]: ...
def order_of_changes(a: tuple[Any, Any], b: tuple[Any, Any], counts: list[int]) -> array[int]: ...
