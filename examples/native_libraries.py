"""Memory that C libraries allocate themselves: libxml2 (through lxml), Pillow's images and
numpy's BLAS buffers. memlens charges it to the Python line that made the library allocate.

    memlens run examples/native_libraries.py        (needs lxml, Pillow and numpy)
"""

import numpy as np
from lxml import etree
from PIL import Image


def build_tree():
    root = etree.Element("root")
    for i in range(60_000):
        child = etree.SubElement(root, "item", id=str(i))  # libxml2 nodes
        child.text = f"value {i}"
    return root


def make_images():
    return [Image.new("RGB", (1200, 1200), (i, 0, 0)) for i in range(8)]  # Pillow buffers


def solve():
    a = np.random.default_rng(0).random((1500, 1500))
    b = a @ a.T  # BLAS: OpenBLAS allocates its work buffers here
    return float(np.linalg.inv(b[:800, :800] + np.eye(800)).sum())


def main():
    tree = build_tree()
    data = etree.tostring(tree)
    parsed = etree.fromstring(data)
    thumbs = [im.resize((600, 600)) for im in make_images()]
    print(len(data), len(parsed), len(thumbs), round(solve(), 3))


if __name__ == "__main__":
    main()
