import sys

print("bye")
kept = bytearray(10**6)  # line 4
sys.stdout.close()
sys.stderr.close()
