import sys

data = [str(i) for i in range(10000)]
print("module", __name__, sys.argv[1:], len(data))
sys.exit(5)
