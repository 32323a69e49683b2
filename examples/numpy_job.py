"""A numpy job: the array temporaries of one expression make the peak.

Run it under memlens:  memlens run examples/numpy_job.py
numpy allocates array data outside Python's allocator; memlens still charges it to your line.
"""

import numpy as np


def normalise(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / x.std()  # two full-size temporaries at once


def main() -> None:
    rng = np.random.default_rng(0)
    data = rng.random((2000, 2000))  # 32 MB
    scaled = normalise(data)
    keep = scaled[::10].copy()
    print(f"mean {keep.mean():.3f}, shape {keep.shape}")


if __name__ == "__main__":
    main()
