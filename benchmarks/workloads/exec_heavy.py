"""exec-heavy code: classes generated from source at run time, as attrs, dataclasses and
template engines do. Each generated code object is dropped after use."""

from __future__ import annotations

TEMPLATE = """
def __init__(self, {args}):
{body}
def __repr__(self):
    return "{name}(" + {fields} + ")"
"""

total = 0
for i in range(12_000):
    names = [f"f{i}_{k}" for k in range(6)]
    src = TEMPLATE.format(
        args=", ".join(names),
        body="\n".join(f"    self.{n} = {n}" for n in names),
        name=f"C{i}",
        fields=" + ', ' + ".join(f"repr(self.{n})" for n in names),
    )
    ns: dict[str, object] = {}
    exec(compile(src, f"<generated C{i}>", "exec"), ns)  # noqa: S102 - the point of the workload
    cls = type(f"C{i}", (), ns)
    total += len(repr(cls(*range(6))))
print(total)
