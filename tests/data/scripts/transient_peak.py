def crunch():
    scratch = bytearray(50 * 1024 * 1024)  # the 50 MB transient peak
    return len(scratch)


total = crunch()
kept = bytearray(5 * 1024 * 1024)  # line 7: 5 MB kept to exit, allocated after the peak
print(total, len(kept))
