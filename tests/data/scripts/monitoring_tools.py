"""Claims sys.monitoring tool ids 4, 3 and 5 (memlens holds one of them) and counts its
PY_RETURN events: as under python."""

import sys

monitoring = sys.monitoring
print([monitoring.get_tool(i) for i in range(6)])
for tool in (4, 3, 5):
    monitoring.use_tool_id(tool, f"mine{tool}")
print([monitoring.get_tool(i) for i in range(6)])


def fib(n):
    return [0] * n if n < 2 else fib(n - 1) + fib(n - 2)


returns = []
monitoring.register_callback(4, monitoring.events.PY_RETURN, lambda *a: returns.append(a[0].co_name))
monitoring.set_events(4, monitoring.events.PY_RETURN)
kept = fib(12)
monitoring.set_events(4, 0)
print(len(kept), len(returns), sorted(set(returns)))
for tool in (4, 3, 5):
    monitoring.free_tool_id(tool)
