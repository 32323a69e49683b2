"""A batch job whose peak is a temporary, and whose leak comes after the peak.

Run it under memlens:  memlens run examples/peak_then_keep.py
The first table ranks lines by what they held at the peak: the raw rows, freed before the end.
The index is built after the peak and kept to the end, so it held nothing at the peak: the
second table, "live at exit", is where it shows.
"""

_index: dict[int, bytes] = {}


def load_rows(n: int) -> list[str]:
    return [f"{i},{i % 97},{'x' * 40}" for i in range(n)]


def summarize(rows: list[str]) -> int:
    return sum(int(row.split(",")[1]) for row in rows)


def build_index(n: int) -> None:
    for i in range(n):
        _index[i] = f"item-{i:06d}".encode() * 8  # kept until the program ends


def main() -> None:
    rows = load_rows(300_000)
    total = summarize(rows)
    del rows
    build_index(60_000)
    print(f"total {total}, index of {len(_index)} items")


if __name__ == "__main__":
    main()
