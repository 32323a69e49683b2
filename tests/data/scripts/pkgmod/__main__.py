import sys

print("pkg main", __name__, sys.argv[1:])
