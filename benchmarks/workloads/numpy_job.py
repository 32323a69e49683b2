"""numpy: array arithmetic with temporaries."""

from __future__ import annotations

import numpy as np

rng = np.random.default_rng(0)
acc = np.zeros(200_000)
for _ in range(400):
    a = rng.random(200_000)
    acc += np.sqrt(a * a + 1.0) - a
print(float(acc.sum()))
