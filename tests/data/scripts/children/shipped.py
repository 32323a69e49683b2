"""A function shipped by value (cloudpickle, as Dask, Ray and loky ship functions of __main__)
to a Python child process, which runs it; then run here, rebuilt from the same pickle."""

import pickle
import subprocess
import sys

import cloudpickle


def task(i):
    block = bytearray(5 * 1024 * 1024)
    return len(block) + i


payload = cloudpickle.dumps(task)
child = "import pickle, sys; print(pickle.loads(sys.stdin.buffer.read())(1))"
subprocess.run([sys.executable, "-c", child], input=payload, check=True, timeout=120)
print(pickle.loads(payload)(2))
