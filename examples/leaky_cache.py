"""A web-ish service with a cache that never evicts: memory grows with every new request key.

Run it under memlens:  memlens run examples/leaky_cache.py
The report points at the line that fills the cache (live at exit: the leak) and at the line
whose temporaries make the peak.
"""

import hashlib
import json

_cache: dict[str, dict[str, object]] = {}


def render_profile(user_id: int) -> dict[str, object]:
    history = [
        {"event": "login", "n": i, "token": hashlib.sha1(str(i).encode()).hexdigest()}
        for i in range(40)
    ]
    return {"user": user_id, "history": history, "blob": json.dumps(history)}


def handle_request(user_id: int) -> int:
    key = f"profile:{user_id}"
    if key not in _cache:
        _cache[key] = render_profile(user_id)  # cached forever: the leak
    return len(_cache[key]["blob"])  # type: ignore[arg-type]


def main() -> None:
    served = 0
    for request in range(6000):
        served += handle_request(request % 3000)
    print(f"served {served} bytes for {len(_cache)} users")


if __name__ == "__main__":
    main()
