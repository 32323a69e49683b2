"""A small data pipeline whose peak comes from holding every stage's copy at once.

Run it under memlens:  memlens run examples/pipeline_peak.py
The peak column shows which stage's data was alive when memory was highest.
"""

import csv
import io
import random


def extract(n: int) -> str:
    rng = random.Random(42)
    out = io.StringIO()
    writer = csv.writer(out)
    for i in range(n):
        writer.writerow([i, rng.choice("abcde"), rng.random() * 100])
    return out.getvalue()


def transform(text: str) -> list[dict[str, object]]:
    rows = list(csv.reader(io.StringIO(text)))
    return [{"id": int(r[0]), "cat": r[1], "value": float(r[2])} for r in rows]


def aggregate(records: list[dict[str, object]]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for r in records:
        totals[str(r["cat"])] = totals.get(str(r["cat"]), 0.0) + float(r["value"])  # type: ignore[arg-type]
    return totals


def main() -> None:
    raw = extract(120_000)
    records = transform(raw)  # raw and records are both alive here: the peak
    del raw
    totals = aggregate(records)
    print({k: round(v) for k, v in sorted(totals.items())})


if __name__ == "__main__":
    main()
