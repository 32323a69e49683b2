import sys

data = sys.stdin.read()
sys.stdout.write(data.upper())
