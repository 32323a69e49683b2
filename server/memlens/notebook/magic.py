"""The IPython magics: ``%%memlens`` (a cell), ``%memlens`` (one statement), ``%memlens_kept``.

A profiled cell runs as IPython runs a cell, in the user's namespace: its code transformed by
IPython (magics and ``!`` lines inside it work), compiled by IPython's compiler (``__future__``
imports of earlier cells hold, tracebacks say ``Cell In[5]``, ``%debug`` works), its last
expression shown (``Out[5]``). Only for the code's own time is the tracer on (started and
stopped here, as :func:`memlens.profile` does; nothing is left behind between cells), and
only the cell's code is traced on this thread (memlens's own work around it is paused). The
cell's text is recorded as its source under ``In [N]``, with the line numbers the editor shows
(the magic's line included); what functions of earlier cells allocate is charged to the line
of this cell that called them.

An exception in the cell is shown as IPython shows one (the cell fails: a notebook's "run
all" stops there) after the run is saved; ``SystemExit`` goes on to IPython as it would.
IPython itself is never imported: the magics are registered on the shell that loads them.
"""

from __future__ import annotations

import argparse
import ast
import io
import linecache
import os
import shlex
import signal
import sys
from collections.abc import Callable
from typing import Any

from memlens import _tracer
from memlens.cli.options import top_rows
from memlens.cli.run import OPTIONS
from memlens.errors import MemlensError
from memlens.layout import RUNS_DIR, STORE_DIR, display_path, new_run_path, point_latest_at
from memlens.model import NotebookCell, Run, replace
from memlens.notebook import cells
from memlens.report import render
from memlens.runfile import writer
from memlens.source import text_digest
from memlens.tracing import tracer
from memlens.units import sample_option

#: ``memlens run``'s options that a cell takes (the others are about starting a program).
CELL_OPTIONS = (
    "--exact",
    "--sample",
    "--seed",
    "--output",
    "--dir",
    "--include",
    "--exclude",
    "--libraries",
    "--no-native",
    "--no-report",
    "--timeline-interval",
    "--top",
    "--by",
)
#: The name of the magics (``%%memlens``, ``%memlens``) and of the table's.
NAME = "memlens"
KEPT = "memlens_kept"


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (a MemlensError), not an exit."""

    def error(self, message: str) -> Any:
        raise MemlensError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        if message:
            print(message, file=sys.stderr, end="")
        raise _Helped


class _Helped(Exception):
    """``--help`` was shown: nothing to run."""


def parser(prog: str) -> argparse.ArgumentParser:
    """The options of ``prog`` (``%%memlens`` or ``%memlens``): :data:`CELL_OPTIONS`, as
    ``memlens run`` defines them."""
    out = _Parser(prog=prog, description="Profile the cell (or one statement) in place.")
    mode = out.add_mutually_exclusive_group()
    for flags, keywords in OPTIONS:
        if flags[-1] not in CELL_OPTIONS:
            continue
        (mode if flags[-1] in ("--exact", "--sample") else out).add_argument(*flags, **keywords)
    return out


def split_statement(line: str) -> tuple[list[str], str]:
    """``%memlens [options] statement``: (the options' words, the statement as written)."""
    stream = io.StringIO(line)
    lexer = shlex.shlex(stream, posix=True)
    lexer.whitespace_split = True
    takes_value = {
        flag
        for flags, keywords in OPTIONS
        if flags[-1] in CELL_OPTIONS and keywords.get("action") not in ("store_true",)
        for flag in flags
    }
    words: list[str] = []
    position = 0
    while True:
        start = position
        try:
            word = lexer.get_token()
        except ValueError:  # an unclosed quote: the rest is the statement (Python says why)
            return words, line[start:].strip()
        position = stream.tell()
        if word is None:
            return words, ""
        if word == "--":
            return words, line[position:].strip()
        if not word.startswith("-") or word == "-":
            return words, line[start:].strip()
        words.append(word)
        if word in takes_value:
            try:
                value = lexer.get_token()
            except ValueError:
                value = None
            position = stream.tell()
            if value is None:
                return words, ""
            words.append(value)


class Options:
    """A cell's options, checked."""

    def __init__(self, args: argparse.Namespace, words: list[str]) -> None:
        self.words = words
        self.interval = sample_option(args.sample)
        if args.seed is not None and self.interval is None:
            raise MemlensError("--seed is for sampling mode: add --sample BYTES")
        self.seed = tracer.sampling_seed(args.seed) if self.interval else None
        if args.timeline_interval < 0:
            raise MemlensError("intervals must not be negative")
        self.top = top_rows(args.top)
        self.by: str = args.by
        self.report = not args.no_report
        self.include: list[str] = args.include
        self.exclude: list[str] = args.exclude
        self.libraries: bool = args.libraries
        self.native = not args.no_native
        self.timeline_interval: float = args.timeline_interval
        self.root = os.path.realpath(args.dir)
        runs_dir = os.path.join(self.root, STORE_DIR, RUNS_DIR)
        if args.output:
            self.out = os.path.abspath(args.output)
            self.in_store = os.path.realpath(os.path.dirname(self.out)) == runs_dir
        else:
            self.out = new_run_path(runs_dir)
            self.in_store = True


class Ending:
    """How the profiled code ended: as a program's run records it."""

    def __init__(self) -> None:
        self.exit_code: int | None = 0
        self.complete = True
        self.failed = False


class Magics:
    """The magics of one shell, and what ``%memlens_kept`` remembers of its profiled cells."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.profiled: list[cells.Profiled] = []

    # -- the magics ----------------------------------------------------------------------------
    def memlens(self, line: str, cell: str | None = None) -> None:
        """%%memlens [options]: profile this cell. %memlens [options] STATEMENT: profile one
        statement. Options as `memlens run`'s (%memlens --help lists them)."""
        try:
            if cell is None:
                words, statement = split_statement(line)
                args = parser(f"%{NAME}").parse_args(words)
                if not statement:
                    raise MemlensError(f"%{NAME}: give a statement (or use %%{NAME} for a cell)")
                text = cells.line_magic_text(self._raw_cell(), NAME, line, self._calling_line())
                command = (f"%{NAME}", *words, statement)
                self._profile(Options(args, words), text, statement, command)
            else:
                words = shlex.split(line)
                args = parser(f"%%{NAME}").parse_args(words)
                text = cells.cell_magic_text(self._raw_cell(), NAME, line, cell)
                self._profile(Options(args, words), text, cell, (f"%%{NAME}", *words))
        except _Helped:
            return
        except (MemlensError, ValueError) as exc:  # ValueError: shlex (an unclosed quote)
            print(f"memlens: {exc}".replace("memlens: memlens: ", "memlens: "), file=sys.stderr)
            self._fail(exc)

    def kept(self, line: str = "") -> None:
        """%memlens_kept: what each profiled cell left alive in this kernel, cell by cell."""
        for row in cells.kept_table(self.profiled, self.shell.user_ns):
            print(row)

    # -- profiling -----------------------------------------------------------------------------
    def _profile(
        self, options: Options, text: cells.CellText, code: str, command: tuple[str, ...]
    ) -> None:
        shell = self.shell
        number = self._number()
        label = f"In [{number}]"
        numbered = shell.transform_cell(cells.numbered(code, text.first_line))
        shown = cells.with_header(text.text, numbered, text.first_line)
        # The code's file name is the cell's label: not IPython's "<ipython-input-...>", whose
        # code the tracer never charges (no file to show), nor the kernel's temporary file name
        # (a path that does not exist). Registered as IPython registers a cell's, so that
        # tracebacks show its lines and say "Cell In[N]".
        filename = label
        linecache.cache[filename] = (len(shown), None, shown.splitlines(keepends=True), filename)
        names = getattr(shell.compile, "_filename_map", None)
        if isinstance(names, dict):
            names[filename] = number
        try:
            codes = self._compile(numbered, filename)
        except SyntaxError:
            shell.showsyntaxerror(filename)
            print("memlens: no run written (the code did not compile)", file=sys.stderr)
            self._fail(sys.exc_info()[1])
            return
        sources = {filename: (label, text.text)}
        namespace = shell.user_ns
        before = cells.ids(namespace)
        try:
            os.makedirs(os.path.dirname(options.out), exist_ok=True)
        except OSError as exc:
            raise MemlensError(f"cannot write {options.out}: {exc.strerror or exc}") from None
        tracer.start(
            mode="sampling" if options.interval else "exact",
            sample_interval=options.interval,
            seed=options.seed,
            include=options.include,
            exclude=options.exclude,
            libraries=options.libraries,
            native=options.native,
            timeline_interval_ms=options.timeline_interval,
            workspace_root=options.root,
            sources=sources,
            # Functions earlier cells defined are charged to the line that called them.
            hidden=[f for f in self._cell_files() if f not in sources],
        )
        _tracer.set_thread_paused(True)  # memlens's own work on this thread is not the cell's
        ending = Ending()
        error: BaseException | None = None
        try:
            _tracer.restart_sampling()
            _tracer.set_thread_paused(False)
            try:
                for compiled in codes:
                    exec(compiled, shell.user_global_ns, namespace)  # noqa: S102 - the cell
            finally:
                _tracer.set_thread_paused(True)
        except SystemExit as exc:  # IPython says what it says of a cell that calls exit()
            ending.exit_code = (
                0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
            )
            error = exc
        except BaseException as exc:  # noqa: BLE001 - shown as IPython shows it, below
            ending.failed = True
            if isinstance(exc, KeyboardInterrupt):
                ending.exit_code, ending.complete = None, False
            else:
                ending.exit_code = 1
            run, interrupted = self._save(ending, command, options, text, label, before)
            # The cell's frames (not this one), as IPython shows a failing cell's.
            tb = exc.__traceback__
            shell.showtraceback((type(exc), exc, tb.tb_next if tb else None), tb_offset=0)
            self._fail(exc)
            del exc
            self._report(run, options, label, interrupted)
            return
        run, interrupted = self._save(ending, command, options, text, label, before)
        self._report(run, options, label, interrupted)
        if error is not None:
            raise error

    def _save(
        self,
        ending: Ending,
        command: tuple[str, ...],
        options: Options,
        text: cells.CellText,
        label: str,
        before: dict[str, int],
    ) -> tuple[Run | None, bool]:
        """Stop the tracer, write the run: with Ctrl-C (Jupyter's interrupt) held meanwhile,
        as half a run is no run. The run written (None: none) and whether Ctrl-C came."""
        held = _hold_interrupts()
        saved: Run | None = None
        try:
            run = self._stop(ending, command)
            if run is not None:
                saved = self._write(run, options, text, label, before)
        finally:
            interrupted = _release(held)
        return saved, interrupted

    def _stop(self, ending: Ending, command: tuple[str, ...]) -> Run | None:
        try:
            return tracer.stop(
                command=list(command), exit_code=ending.exit_code, complete=ending.complete
            )
        except MemlensError as exc:
            print(f"memlens: {exc}", file=sys.stderr)
            return None
        finally:
            if tracer.is_tracing():  # an error building the run: nothing stays installed
                tracer.abandon()

    def _write(
        self,
        run: Run,
        options: Options,
        text: cells.CellText,
        label: str,
        before: dict[str, int],
    ) -> Run | None:
        """The cell's run, written (and made ``latest`` in a store); None when it could not
        be written."""
        notebook, cell_id = self._where()
        cell = NotebookCell(
            file=label,
            execution_count=self._number(),
            notebook=notebook,
            cell_id=cell_id,
            sha256=text_digest(text.text),
        )
        run = replace(run, info=replace(run.info, cell=cell))
        try:
            writer.write(run, options.out)
        except OSError as exc:
            print(f"memlens: cannot write {options.out}: {exc.strerror or exc}", file=sys.stderr)
            return None
        if options.in_store:
            problem = point_latest_at(options.out)
            if problem is not None:
                print(f"memlens: {problem}", file=sys.stderr)
        run_id = os.path.splitext(os.path.basename(options.out))[0]
        names = cells.bound(before, self.shell.user_ns)
        self.profiled.append(cells.profiled(run, label, names, run_id))
        return run

    def _report(self, run: Run | None, options: Options, label: str, interrupted: bool) -> None:
        if run is not None:
            sys.stdout.flush()
            print(f"memlens: run written to {display_path(options.out)}")
            if options.report:
                render(run, sys.stdout, by=options.by, top=options.top, file=label)
            sys.stdout.flush()
        if interrupted:  # Ctrl-C while the run was written: the cell stops here
            raise KeyboardInterrupt

    def _compile(self, code: str, filename: str) -> list[Any]:
        """The cell's code objects, compiled as IPython compiles a cell: the last expression
        in "single" mode (shown as ``Out[N]``), as ``ast_node_interactivity`` says."""
        shell = self.shell
        tree = shell.transform_ast(shell.compile.ast_parse(code, filename=filename))
        nodes: list[ast.stmt] = list(tree.body)
        how = getattr(shell, "ast_node_interactivity", "last_expr")
        if how == "last_expr_or_assign" and nodes:
            last = nodes[-1]
            target = getattr(last, "target", None) or next(iter(getattr(last, "targets", [])), None)
            if isinstance(last, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and isinstance(
                target, ast.Name
            ):
                shown = ast.Expr(ast.Name(target.id, ast.Load()))
                nodes.append(ast.copy_location(shown, last))
                ast.fix_missing_locations(shown)
            how = "last_expr"
        if how == "none" or not nodes or _quiet(code):
            split = len(nodes)
        elif how == "all":
            split = 0
        elif how == "last" or isinstance(nodes[-1], ast.Expr):
            split = len(nodes) - 1
        else:
            split = len(nodes)
        out = []
        if split:
            out.append(shell.compile(ast.Module(nodes[:split], type_ignores=[]), filename, "exec"))
        out.extend(shell.compile(ast.Interactive([n]), filename, "single") for n in nodes[split:])
        return out

    # -- what the shell knows ----------------------------------------------------------------------
    def _raw_cell(self) -> str | None:
        """The cell as the front end sent it (Jupyter: the execute request's code; IPython:
        the input history's last raw cell)."""
        parent = getattr(self.shell, "parent_header", None)
        if isinstance(parent, dict):
            code = parent.get("content", {}).get("code")
            if isinstance(code, str):
                return code
        history = getattr(getattr(self.shell, "history_manager", None), "input_hist_raw", None)
        if history:
            last = history[-1]
            return last if isinstance(last, str) else None
        return None

    def _where(self) -> tuple[str, str]:
        """(the notebook's absolute path, the front end's cell id), each "" when unknown."""
        notebook = self.shell.user_ns.get("__vsc_ipynb_file__")  # set by VS Code's Jupyter
        if not isinstance(notebook, str):
            notebook = os.environ.get("JPY_SESSION_NAME", "")  # set by Jupyter's server
        notebook = notebook if os.path.isabs(notebook) else ""
        cell_id = ""
        parent = getattr(self.shell, "parent_header", None)
        if isinstance(parent, dict):
            found = parent.get("metadata", {}).get("cellId")
            cell_id = found if isinstance(found, str) else ""
        return notebook, cell_id

    def _number(self) -> int:
        """The running cell's number (``In [N]``): IPython 9 counts the next cell already."""
        result = getattr(getattr(self.shell, "displayhook", None), "exec_result", None)
        count = getattr(result, "execution_count", None)
        if not isinstance(count, int):
            count = getattr(self.shell, "execution_count", 0)
        return int(count or 0)

    def _cell_files(self) -> dict[str, int]:
        """Code file name -> execution count of every cell IPython compiled."""
        found = getattr(self.shell.compile, "_filename_map", None)
        return dict(found) if isinstance(found, dict) else {}

    def _calling_line(self) -> int:
        """The line of the cell that called ``%memlens`` (1 when not called from a cell)."""
        files = self._cell_files()
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename in files:
                return frame.f_lineno or 1
            frame = frame.f_back  # type: ignore[assignment]
        return 1

    def _fail(self, error: object) -> None:
        """Mark the running cell as failed (Jupyter replies "error": "run all" stops), with
        nothing printed again: what failed was shown already."""
        result = getattr(getattr(self.shell, "displayhook", None), "exec_result", None)
        if result is not None and getattr(result, "error_in_exec", 0) is None:
            result.error_in_exec = error


def _quiet(code: str) -> bool:
    """Whether the code ends with ``;``, which keeps IPython from showing its last value."""
    lines = [line.split("#", 1)[0].rstrip() for line in code.splitlines()]
    last = next((line for line in reversed(lines) if line), "")
    return last.endswith(";")


def _hold_interrupts() -> Any:
    """Hold Ctrl-C (Jupyter's interrupt) while the run is built and written: the cell is over,
    and half a run is no run. Returns what :func:`_release` needs."""
    state: list[Any] = [False]

    def held(signum: int, frame: object) -> None:
        state[0] = True

    try:
        state.append(signal.signal(signal.SIGINT, held))
    except (ValueError, TypeError):  # not the main thread: nothing held
        return None
    return state


def _release(state: Any) -> bool:
    """Put Ctrl-C back; whether it was pressed meanwhile."""
    if state is None:
        return False
    handler: Callable[..., Any] | int | None = state[1]
    signal.signal(signal.SIGINT, handler if handler is not None else signal.SIG_DFL)
    return bool(state[0])


def load(shell: Any) -> None:
    """Register the magics on ``shell`` (``%load_ext memlens``)."""
    magics = Magics(shell)
    shell.register_magic_function(magics.memlens, "line_cell", NAME)
    shell.register_magic_function(magics.kept, "line", KEPT)


def unload(shell: Any) -> None:
    """Remove the magics (``%unload_ext memlens``)."""
    table = getattr(getattr(shell, "magics_manager", None), "magics", {})
    for kind, name in (("line", NAME), ("cell", NAME), ("line", KEPT)):
        table.get(kind, {}).pop(name, None)
