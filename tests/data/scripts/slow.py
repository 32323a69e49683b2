import time

held = []
for _ in range(12):
    held.append(bytearray(1024 * 1024))  # line 5
    time.sleep(0.1)
print("slow done", flush=True)
