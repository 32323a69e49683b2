import atexit
import os
import signal

atexit.register(lambda: print("atexit ran", flush=True))
keep = bytearray(2 * 1024 * 1024)
os.kill(os.getpid(), signal.SIGINT)
