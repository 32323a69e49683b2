"""A stand-in for the parts of PyTorch memlens's live GPU path uses (see ../README.md)."""

from torch import autograd, cuda
from torch._tensor import Tensor

__version__ = "0.0+fake"


def empty(nbytes, device="cpu"):
    """A tensor of ``nbytes`` bytes (on the GPU with ``device="cuda"``)."""
    return Tensor(nbytes, device)
