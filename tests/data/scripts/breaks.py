"""Stops in the debugger (pdb reads "where" and "continue" from stdin) after allocating in a
loop, as a program being debugged does."""

kept = [bytearray(1000) for _ in range(200)]
before = len(kept)
breakpoint()
after = before + 1
print("after", after)
