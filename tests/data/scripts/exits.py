import sys

how = sys.argv[1]
print("before", flush=True)
if how == "code":
    sys.exit(3)
if how == "msg":
    sys.exit("fatal: bad things")
if how == "raise":
    def inner():
        raise ValueError("boom")
    inner()
if how == "none":
    sys.exit()
