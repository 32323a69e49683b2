"""Runs cells in a real IPython shell (the class the ``ipython`` command runs), one after the
other, as a terminal session would: ``python driver.py CELLS.json``.

Each entry of the JSON list is a cell's text, or ``{"code": ..., "cell_id": ...,
"notebook": ...}`` for a cell a Jupyter front end sent (ipykernel hands the shell the request
as ``parent_header``: its code and its metadata's ``cellId``; VS Code sets
``__vsc_ipynb_file__``). Before each cell the driver prints ``=== In [N]``, after it ``=== ok``
or ``=== failed`` (what IPython's result says).
"""

from __future__ import annotations

import json
import sys

from IPython.terminal.interactiveshell import TerminalInteractiveShell


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        cells = json.load(fh)
    shell = TerminalInteractiveShell.instance(colors="nocolor")
    for cell in cells:
        if isinstance(cell, dict):
            shell.parent_header = {
                "content": {"code": cell["code"]},
                "metadata": {"cellId": cell["cell_id"]},
            }
            shell.user_ns["__vsc_ipynb_file__"] = cell["notebook"]
            code = cell["code"]
        else:
            code = cell
        print("=== In", flush=True)
        result = shell.run_cell(code, store_history=True)
        print("=== ok" if result.success else "=== failed", flush=True)


if __name__ == "__main__":
    main()
