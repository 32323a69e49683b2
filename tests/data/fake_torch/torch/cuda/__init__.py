"""Lazy initialisation as PyTorch's: calls queued by ``_lazy_call`` run when the first CUDA
allocation initialises CUDA."""

from torch.cuda import memory

_initialized = False
_queued_calls = []


def is_initialized():
    return _initialized


def _lazy_call(callable, **kwargs):
    if is_initialized():
        callable()
    else:
        _queued_calls.append(callable)


def _lazy_init():
    global _initialized
    if _initialized:
        return
    _initialized = True
    for call in _queued_calls:
        call()


def max_memory_allocated():
    return memory._peak
