"""Names on disk, in one place: the run-file suffix, the store's directories, how files of the
store are opened and replaced, and how names are shown on a terminal. Stdlib only.

Kept free of imports (but os) so that ``memlens run`` can name its run file before the profiled
program starts, point ``latest`` at its checkpoints and at it after, without loading the
reader/writer or the store.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable

#: Suffix of run files.
RUN_SUFFIX = ".mlrun"
#: The store lives in <root>/STORE_DIR/RUNS_DIR.
STORE_DIR = ".memlens"
RUNS_DIR = "runs"
#: The kinds of runs, kept apart: a program's (``memlens run``, ``memlens import``) and a test
#: suite's (``pytest --memlens``). Each has its own latest run and baseline, and the editor
#: compares like with like.
KINDS = ("program", "tests")
#: Pointer files beside the runs: ``latest`` is the newest run of any kind (what ``memlens
#: show`` shows); ``latest-<kind>`` the newest of each kind; ``baseline`` the program runs'
#: baseline (as in stores made before kinds), ``baseline-tests`` the test runs'.
POINTERS = ("latest", "baseline", "latest-program", "latest-tests", "baseline-tests")


def pointer_name(which: str, kind: str) -> str:
    """The pointer of the ``which`` ("latest" or "baseline") run of ``kind`` (:data:`KINDS`)."""
    if kind not in KINDS or which not in ("latest", "baseline"):
        raise ValueError(f"{which} {kind}")
    return "baseline" if (which, kind) == ("baseline", "program") else f"{which}-{kind}"


#: The runs of the processes of a run (memlens run follows child processes) live in a folder
#: named after the run file: ``<run file without .mlrun>.processes/<pid>.mlrun``.
PROCESSES_SUFFIX = ".processes"


def processes_folder(run_path: str) -> str:
    """The folder holding the per-process runs of the run file ``run_path``."""
    return run_path.removesuffix(RUN_SUFFIX) + PROCESSES_SUFFIX


def clear_processes(folder: str, remove: bool = False) -> str | None:
    """Empty the processes folder ``folder`` of what memlens puts there (runs, claims,
    temporaries), and with ``remove`` the folder itself when nothing else is left in it. A
    folder that is not there is fine; one that is a link or not a directory is left alone.
    Returns the problem, when the folder cannot be used."""
    import stat

    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{folder}: {exc.strerror or exc}"
    if not stat.S_ISDIR(mode):
        return f"{folder} is not a directory"
    try:
        for entry in os.scandir(folder):
            if entry.name.endswith((RUN_SUFFIX, ".lock", ".claim", ".tmp")):
                os.unlink(entry.path)
        if remove:
            os.rmdir(folder)
    except OSError as exc:
        return f"{folder}: {exc.strerror or exc}"
    return None


def claim_held(lock_path: str) -> bool:
    """Whether a live process holds its claim ``lock_path`` in a processes folder (a POSIX
    lock, which the kernel releases when the process ends, however it ends)."""
    import fcntl

    flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(lock_path, flags | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False  # gone: it finished meanwhile
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing it drops the lock we may have taken
    return False


def claims_held(folder: str) -> bool:
    """Whether a live process still writes into the processes folder ``folder``."""
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return any(n.endswith(".lock") and claim_held(os.path.join(folder, n)) for n in names)


def process_run_name(pid: int, n: int = 1) -> str:
    """The file name of a process's run in a processes folder: ``<pid>.mlrun``, or
    ``<pid>-<n>.mlrun`` for the n-th process of the run that had the same id."""
    return f"{pid}{RUN_SUFFIX}" if n == 1 else f"{pid}-{n}{RUN_SUFFIX}"


def process_runs(run_path: str, pid: int) -> list[str]:
    """The runs of process ``pid`` in the processes folder of ``run_path`` (usually one;
    more when several processes of the run had that id). Like the store, this never follows a
    link: a folder or a run that is a symbolic link does not count."""
    import re
    import stat

    folder = processes_folder(run_path)
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return []
        names = os.listdir(folder)
    except OSError:
        return []
    pattern = re.compile(rf"{pid}(-[0-9]+)?{re.escape(RUN_SUFFIX)}")
    found = []
    for name in sorted(names):
        path = os.path.join(folder, name)
        try:
            regular = stat.S_ISREG(os.lstat(path).st_mode)
        except OSError:
            continue
        if regular and pattern.fullmatch(name):
            found.append(path)
    return found


#: A pointer file holds one file name: anything bigger is not one of ours.
MAX_POINTER_BYTES = 4096


def display_path(path: str, cwd: str | None = None) -> str:
    """A path relative to the working directory when it is under it, fit for a terminal."""
    cwd = cwd or os.getcwd()
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        rel = ".."
    return printable(path if rel.startswith("..") else rel)


#: The invisible marks that reorder or hide text ("Trojan Source": bidi marks, embeddings,
#: overrides and isolates, a zero-width space, the byte order mark): shown as escapes on the
#: terminal (:func:`printable`) and replaced in the editor's Markdown (memlens_lsp.markdown).
INVISIBLE = (
    0x061C, 0x200B, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0xFEFF,
)  # fmt: skip


def _unprintable_table() -> dict[int, str]:
    # C0 controls but tab, DEL, C1 controls (0x9b is a one-byte CSI on some terminals), and the
    # invisible marks.
    codes = [*range(0x09), *range(0x0A, 0x20), *range(0x7F, 0xA0), *INVISIBLE]
    # Lone surrogates: the bytes of a file name that is not UTF-8 (os.fsdecode); printed as
    # they are, they would fail the write ("surrogates not allowed").
    codes += range(0xD800, 0xE000)
    return {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in codes}


_UNPRINTABLE: dict[int, str] | None = None


def printable(text: str) -> str:
    """``text`` made safe to print on a terminal: the one place this is done.

    Everything memlens prints that comes from a run file or the file system (names, source
    lines, commands, run ids, error messages quoting them) goes through here, so no escape
    sequence from a hostile run reaches the terminal. Control characters (all but tab),
    including newlines and ESC, the invisible marks that reorder text and the undecodable
    bytes of a file name that is not UTF-8 become visible escapes (``\\x1b``, ``\\udcff``);
    everything else is kept.
    """
    global _UNPRINTABLE
    if text.isprintable():
        return text  # the common case, and it costs nothing
    if _UNPRINTABLE is None:
        _UNPRINTABLE = _unprintable_table()
    return text.translate(_UNPRINTABLE)


def platform_name() -> str:
    """``Linux-6.1.0-x86_64``: cheap (``platform.platform()`` scans the interpreter binary)."""
    try:
        u = os.uname()
    except AttributeError:  # pragma: no cover - Windows
        import sys

        return sys.platform
    return f"{u.sysname}-{u.release}-{u.machine}"


def python_version() -> str:
    """``3.11.7``: as ``platform.python_version()``, without importing ``platform``."""
    import sys

    return sys.version.split()[0]


def new_run_path(runs_dir: str, started: float | None = None, pid: int | None = None) -> str:
    """A fresh, unused run-file path in ``runs_dir``: ``<UTC start>-<pid>[-n].mlrun``.

    The one naming rule for runs (the store and ``memlens run`` both call it); standard library
    only, so ``memlens run`` can name its file before the program starts at no cost.
    """
    import time

    when = time.gmtime(time.time() if started is None else started)
    stem = f"{time.strftime('%Y%m%d-%H%M%S', when)}-{os.getpid() if pid is None else pid}"
    path = os.path.join(runs_dir, stem + RUN_SUFFIX)
    n = 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(runs_dir, f"{stem}-{n}{RUN_SUFFIX}")
    return path


class NotRegularFileError(OSError):
    """A name that should be a regular file is a FIFO, device, socket or directory."""


def open_regular(path: str, *, follow_links: bool = True) -> int:
    """Open ``path`` for reading, as a file descriptor, only if it is a regular file.

    Never blocks: a FIFO (or a link to ``/proc/self/fd/0``) opens without waiting for a writer
    and is refused, as are devices (``/dev/zero``), sockets and directories
    (:class:`NotRegularFileError`). Without ``follow_links``, a symbolic link is refused too
    (``OSError`` with ``errno.ELOOP``). The caller closes the descriptor.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NOCTTY", 0)
    if not follow_links:
        if not hasattr(os, "O_NOFOLLOW"):  # pragma: no cover - Windows
            import stat

            if stat.S_ISLNK(os.lstat(path).st_mode):
                import errno

                raise OSError(errno.ELOOP, "is a symbolic link", path)
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        import stat

        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            import errno

            if stat.S_ISDIR(mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory", path)
            raise NotRegularFileError(errno.EINVAL, "not a regular file", path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def replace_file(target: str, fill: Callable[[str], object]) -> None:
    """The one way files of the store are written: ``fill(temporary)`` writes the content to
    a temporary beside ``target`` (:func:`new_temporary`), which is then flushed to disk and
    renamed over ``target``. A reader sees the old file or the whole new one, never half, even
    after a crash of the machine; on any error the temporary is removed and ``target`` is left
    as it was.
    """
    tmp = new_temporary(target)
    try:
        fill(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        import contextlib  # only on this failure path: not worth its import cost otherwise

        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def new_temporary(target: str) -> str:
    """Create an empty ``.<name>.<random>.tmp`` beside ``target``, mode 0666 minus the umask.

    (``tempfile.mkstemp`` makes 0600 files, and reading the umask means changing it, which is
    not safe while other threads create files.)
    """
    head, tail = os.path.split(os.path.abspath(target))
    for _ in range(100):
        name = os.path.join(head, f".{tail}.{os.urandom(6).hex()}.tmp")
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return name
    raise FileExistsError(f"cannot create a temporary file beside {target}")


def write_pointer(runs_dir: str, name: str, run_path: str) -> None:
    """Point ``latest`` or ``baseline`` in ``runs_dir`` at a run file of that store, atomically.

    The pointer holds the run's file name. Written to a temporary beside it, flushed and
    renamed over it: a reader sees the old value or the new one, never half, even after a
    crash. The one writer of pointers (:meth:`memlens.store.Store.set_pointer` calls it);
    standard library only, so ``memlens run`` sets ``latest`` without loading the store.
    """
    if name not in POINTERS:
        raise ValueError(name)
    if not in_store(runs_dir, run_path):
        raise ValueError(f"{run_path} is not in {runs_dir}")  # pointers name runs of their store
    os.makedirs(runs_dir, exist_ok=True)
    value = os.path.basename(os.path.realpath(run_path))

    def fill(tmp: str) -> None:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, (value + "\n").encode("utf-8", "surrogateescape"))
        finally:
            os.close(fd)

    replace_file(os.path.join(runs_dir, name), fill)


def point_latest_at(run_path: str, kind: str = "program") -> str | None:
    """Make the store's ``latest`` and the latest of ``kind`` name ``run_path`` (a run file of
    that store), as a run being made does when its first checkpoint and its final run are
    written; the reason, in one line, when it cannot (the run itself is kept)."""
    try:
        write_pointer(os.path.dirname(run_path), pointer_name("latest", kind), run_path)
        write_pointer(os.path.dirname(run_path), "latest", run_path)
    except OSError as exc:
        return f"cannot update latest: {exc.strerror or exc}"
    return None


def read_pointer(runs_dir: str, name: str) -> tuple[str | None, str | None]:
    """What the pointer file ``name`` in ``runs_dir`` names: ``(run path, None)``, or
    ``(None, None)`` when it is unset (missing or empty), or ``(None, problem)`` when it cannot
    be used.

    A pointer is untrusted input (it comes with the workspace): it must be a regular file (not a
    link, FIFO or device), at most :data:`MAX_POINTER_BYTES`, UTF-8, one line, naming a run
    file (``*.mlrun``) directly inside ``runs_dir`` -- by its name, as memlens writes it, or by
    an absolute path that resolves there. The named run need not exist (a dangling pointer is
    unset, not a problem: runs get pruned); it is not opened here.
    """
    path = os.path.join(runs_dir, name)
    try:
        fd = open_regular(path, follow_links=False)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        import errno

        if exc.errno == errno.ELOOP:
            return None, "is a symbolic link"
        return None, exc.strerror or str(exc)
    try:
        data = os.read(fd, MAX_POINTER_BYTES + 1)
    except OSError as exc:
        return None, exc.strerror or str(exc)
    finally:
        os.close(fd)
    if len(data) > MAX_POINTER_BYTES:
        return None, f"larger than {MAX_POINTER_BYTES} bytes"
    try:
        value = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    if not value:
        return None, None
    if "\n" in value or "\x00" in value:
        return None, "not a single file name"
    if not value.endswith(RUN_SUFFIX):
        return None, f"does not name a {RUN_SUFFIX} file"
    if not os.path.isabs(value) and (
        os.sep in value or (os.altsep and os.altsep in value) or value.startswith(".")
    ):
        return None, "names a run outside the store"
    target = os.path.join(runs_dir, value)  # an absolute value (older memlens) stays as it is
    if not in_store(runs_dir, target):
        return None, "names a run outside the store"
    return target, None


def in_store(runs_dir: str, path: str) -> bool:
    """Whether ``path``, links resolved, is a file directly inside ``runs_dir`` (links resolved).

    The store never follows a link out of itself: a run file or pointer that leads elsewhere
    (``/dev/zero``, another folder's runs, a secret file) is not one of its runs.
    """
    return os.path.dirname(os.path.realpath(path)) == os.path.realpath(runs_dir)
