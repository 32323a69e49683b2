"""Starts other Pythons (argv: their paths), as a build script runs an old tool: each prints
what it sees; its stderr must be as without memlens."""

import subprocess
import sys

for python in sys.argv[1:]:
    out = subprocess.run(
        [python, "-c", "import sys; print(sys.version_info[0] * 10 + sys.version_info[1])"],
        capture_output=True,
        text=True,
        check=False,
    )
    print(out.returncode, out.stdout.strip(), repr(out.stderr))
