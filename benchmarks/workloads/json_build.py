"""JSON and string building: records serialised, joined and parsed back."""

from __future__ import annotations

import json

rows = [{"id": i, "name": f"user-{i}", "tags": ["a", "b", str(i % 7)]} for i in range(200_000)]
text = json.dumps(rows)
parts = []
for r in rows:
    parts.append(f"{r['id']},{r['name']},{'|'.join(r['tags'])}")
csv = "\n".join(parts)
back = json.loads(text)
print(len(text), len(csv), len(back))
