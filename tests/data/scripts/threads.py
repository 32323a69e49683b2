import threading
import time

out = []


def work():
    time.sleep(0.2)
    out.append(bytearray(8 * 1024 * 1024))  # line 9: allocated after the main thread ended
    print("worker done", flush=True)


threading.Thread(target=work).start()
print("main done", flush=True)
