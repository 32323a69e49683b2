"""memlens.sha256: CPython's own SHA-256 for small inputs, OpenSSL's past SMALL bytes, the
same digest either way (run files and recorded sources name it; the editor compares by it)."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from memlens import sha256


@pytest.mark.parametrize("size", [0, 1, 1000, sha256.SMALL, sha256.SMALL + 1, 3 * sha256.SMALL])
def test_one_shot_digest_is_sha256(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    assert sha256.hexdigest(data) == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("chunks", [[], [b"a"], [b"ab" * 1000] * 3, [b"z" * 100_000] * 5])
def test_incremental_digest_is_sha256_across_the_switch(chunks: list[bytes]) -> None:
    """Kept while small, handed to OpenSSL once past SMALL (5 x 100 kB crosses it)."""
    h = sha256.Sha256()
    for chunk in chunks:
        h.update(chunk)
    assert h.hexdigest() == hashlib.sha256(b"".join(chunks)).hexdigest()


def test_small_inputs_do_not_load_openssl() -> None:
    """The point of the module: hashing a source file or a small run's rows leaves hashlib
    (and OpenSSL's libcrypto) unloaded; a large input loads it."""
    code = (
        "import sys\n"
        "from memlens import sha256\n"
        "h = sha256.Sha256(); h.update(b'rows' * 1000); h.hexdigest()\n"
        "sha256.hexdigest(b'print(1)\\n')\n"
        "print('hashlib' in sys.modules)\n"
        "sha256.hexdigest(bytes(sha256.SMALL + 1))\n"
        "print('hashlib' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["False", "True"]
