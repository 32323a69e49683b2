def make(n):
    return bytearray(n)  # line 2: the allocation itself
