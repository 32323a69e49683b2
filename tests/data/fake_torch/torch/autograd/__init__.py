import threading

import torch


def backward(tensor):
    """As PyTorch's: the seed gradient on this thread, the rest on an engine thread that has no
    Python frame (its allocations record none); this thread waits for it."""
    seed = torch.Tensor(4, tensor.device)  # _make_grads

    def engine():
        tensor.grad = torch.Tensor(tensor.nbytes, tensor.device, frames=False)

    thread = threading.Thread(target=engine)
    thread.start()
    thread.join()
    del seed
