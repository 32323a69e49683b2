import sys

print("argv", sys.argv[1:])
print("name", __name__)
print("file", __file__)
print("path0", sys.path[0])
big = bytearray(50 * 1024 * 1024)  # line 7: the hottest line
small = [bytes(100) for _ in range(1000)]
sys.stdout.write("done\n")
