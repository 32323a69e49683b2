"""A reader of pickles that hold plain data only: it runs nothing.

A pickle is a program for a small stack machine, and the standard unpickler runs whatever it
asks for: ``GLOBAL`` imports any object, ``REDUCE`` calls it (``os.system``...). PyTorch's
memory snapshots (``torch.cuda.memory._dump_snapshot``) are pickles of plain dicts, lists,
strings and numbers, and they come from other machines (a cluster job), so they are read here
by an interpreter of the opcodes that build those and nothing else: every opcode that names,
calls or builds another object (``GLOBAL``, ``STACK_GLOBAL``, ``REDUCE``, ``BUILD``, ``INST``,
``OBJ``, ``NEWOBJ``, ``NEWOBJ_EX``, the extension registry, persistent ids, out-of-band
buffers) is refused with one line, before anything of the file is used.

The file is untrusted in other ways too, so the reader holds it to limits: lengths are checked
against what is left of the data before anything is read or allocated, numbers written out in
decimal are short, every container and the whole result hold a bounded number of items (a
memo reference costs the file two bytes, so a small file could otherwise repeat one object a
billion times), dicts and sets are small (keys whose hashes collide make insertion quadratic),
and marks nest a bounded number of levels. It never recurses. Standard library only.
"""

from __future__ import annotations

import codecs
import struct
from collections.abc import Callable

#: Most items all containers of one pickle may hold together (list and tuple items, dict
#: entries, set members): about what a 1 GiB snapshot holds.
MAX_ITEMS = 50_000_000
#: Most entries of one dict or set (a snapshot's dicts have a few dozen).
MAX_MAPPING_ITEMS = 4096
#: Longest string or bytes value.
MAX_STRING_BYTES = 16 * 1024 * 1024
#: Most digits of an integer or float written out in text (protocol 0's INT, LONG, FLOAT).
MAX_DIGITS = 64
#: Most bytes of a binary integer (LONG1, LONG4): far beyond 64 bits.
MAX_LONG_BYTES = 64
#: Deepest nesting of marks (each open tuple, list or dict being filled by mark).
MAX_MARKS = 10_000

_MARK = object()  # on the stack where a MARK opened a group


class PickleRefused(ValueError):
    """The data is not a pickle of plain data, or breaks a limit: the message says why in a
    few words (one line)."""


#: Opcodes refused by name: what each would do (the standard unpickler's meaning).
REFUSED: dict[int, str] = {
    ord("c"): "GLOBAL (imports a Python object)",
    0x93: "STACK_GLOBAL (imports a Python object)",
    ord("R"): "REDUCE (calls an object)",
    ord("b"): "BUILD (sets an object's state)",
    ord("i"): "INST (makes an object of a class)",
    ord("o"): "OBJ (makes an object of a class)",
    0x81: "NEWOBJ (makes an object of a class)",
    0x92: "NEWOBJ_EX (makes an object of a class)",
    0x82: "EXT1 (imports a registered object)",
    0x83: "EXT2 (imports a registered object)",
    0x84: "EXT4 (imports a registered object)",
    ord("P"): "PERSID (a persistent object)",
    ord("Q"): "BINPERSID (a persistent object)",
    0x97: "NEXT_BUFFER (an out-of-band buffer)",
    0x98: "READONLY_BUFFER (an out-of-band buffer)",
}


class _Machine:
    """The stack machine of one pickle: ``run`` interprets it to its STOP."""

    def __init__(self, data: bytes, max_items: int) -> None:
        self.data = bytes(data)
        self.pos = 0
        self.stack: list[object] = []
        self.marks: list[int] = []  # stack lengths at each MARK
        self.memo: dict[int, object] = {}
        self.items_left = max_items
        self.handlers: dict[int, Callable[[], None]] = {}
        self._table()

    # -- reading the data ---------------------------------------------------------------------
    def take(self, n: int) -> bytes:
        if n < 0 or n > len(self.data) - self.pos:
            raise PickleRefused("the data is cut short")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def line(self) -> bytes:
        """Text up to the next newline (protocol 0 arguments), at most MAX_DIGITS + 4 bytes
        unless it is a string (read by :meth:`text_line`)."""
        return self.text_line(MAX_DIGITS + 4)

    def text_line(self, limit: int) -> bytes:
        # Searched in place: a copy of up to ``limit`` bytes per argument would make many short
        # protocol-0 strings cost quadratic time.
        end = self.data.find(b"\n", self.pos, self.pos + limit + 1)
        if end < 0:
            if len(self.data) - self.pos <= limit:
                raise PickleRefused("the data is cut short")
            raise PickleRefused("a text argument is too long")
        out = self.data[self.pos : end]
        self.pos = end + 1
        return out

    def uint(self, size: int) -> int:
        return int.from_bytes(self.take(size), "little")

    def length(self, size: int) -> int:
        n = self.uint(size)
        if n > MAX_STRING_BYTES:
            raise PickleRefused(f"a value of {n:,} bytes (at most {MAX_STRING_BYTES:,})")
        if n > len(self.data) - self.pos:
            raise PickleRefused("the data is cut short")
        return n

    # -- the stack --------------------------------------------------------------------------------
    def pop(self) -> object:
        if not self.stack or (self.marks and len(self.stack) <= self.marks[-1]):
            raise PickleRefused("the pickle pops more than it pushed")
        return self.stack.pop()

    def top(self) -> object:
        if not self.stack or (self.marks and len(self.stack) <= self.marks[-1]):
            raise PickleRefused("the pickle reads an empty stack")
        return self.stack[-1]

    def pop_mark(self) -> list[object]:
        if not self.marks:
            raise PickleRefused("the pickle closes a mark it never opened")
        start = self.marks.pop()
        items = self.stack[start:]
        del self.stack[start:]
        return items

    def count(self, n: int) -> None:
        self.items_left -= n
        if self.items_left < 0:
            raise PickleRefused("the pickle holds too many items")

    def push(self, value: object) -> None:
        self.stack.append(value)

    # -- containers -------------------------------------------------------------------------------
    def extend_list(self, target: object, items: list[object]) -> None:
        if not isinstance(target, list):
            raise PickleRefused("the pickle appends to something that is not a list")
        self.count(len(items))
        target.extend(items)

    def set_items(self, target: object, items: list[object]) -> None:
        if not isinstance(target, dict) or len(items) % 2:
            raise PickleRefused("the pickle sets items of something that is not a dict")
        if len(target) + len(items) // 2 > MAX_MAPPING_ITEMS:
            raise PickleRefused(f"a dict of more than {MAX_MAPPING_ITEMS:,} entries")
        self.count(len(items) // 2)
        for i in range(0, len(items), 2):
            key = items[i]
            target[key if type(key) is str else _key(key)] = items[i + 1]

    def add_items(self, target: object, items: list[object]) -> None:
        if not isinstance(target, set):
            raise PickleRefused("the pickle adds items to something that is not a set")
        if len(target) + len(items) > MAX_MAPPING_ITEMS:
            raise PickleRefused(f"a set of more than {MAX_MAPPING_ITEMS:,} members")
        self.count(len(items))
        target.update(_key(x) for x in items)

    def tuple_of(self, items: list[object]) -> tuple[object, ...]:
        self.count(len(items))
        return tuple(items)

    # -- the opcodes ------------------------------------------------------------------------------
    def _table(self) -> None:
        h = self.handlers
        push, pop = self.push, self.pop

        def op(code: str | int) -> Callable[[Callable[[], None]], Callable[[], None]]:
            def register(fn: Callable[[], None]) -> Callable[[], None]:
                h[code if isinstance(code, int) else ord(code)] = fn
                return fn

            return register

        @op(0x80)  # PROTO
        def proto() -> None:
            if self.uint(1) > 5:
                raise PickleRefused("a pickle protocol newer than 5")

        @op(0x95)  # FRAME: protocol 4's framing (the data is read as one piece)
        def frame() -> None:
            if self.uint(8) > len(self.data) - self.pos:
                raise PickleRefused("the data is cut short")

        @op("(")
        def mark() -> None:
            if len(self.marks) >= MAX_MARKS:
                raise PickleRefused("marks nest too deeply")
            self.marks.append(len(self.stack))

        @op("0")
        def pop_() -> None:
            if self.marks and len(self.stack) == self.marks[-1]:
                self.marks.pop()  # POP of a mark, as the standard unpickler allows
            else:
                pop()

        @op("1")
        def pop_mark() -> None:
            self.pop_mark()

        @op("2")
        def dup() -> None:
            push(self.top())

        @op("N")
        def none() -> None:
            push(None)

        @op(0x88)
        def true() -> None:
            push(True)

        @op(0x89)
        def false() -> None:
            push(False)

        @op("I")
        def int_text() -> None:
            text = self.line()
            if text == b"00":
                push(False)
            elif text == b"01":
                push(True)
            else:
                push(_decimal(text))

        @op("L")
        def long_text() -> None:
            push(_decimal(self.line().removesuffix(b"L")))

        @op("J")
        def binint() -> None:
            push(int.from_bytes(self.take(4), "little", signed=True))

        @op("K")
        def binint1() -> None:
            push(self.uint(1))

        @op("M")
        def binint2() -> None:
            push(self.uint(2))

        @op(0x8A)
        def long1() -> None:
            push(int.from_bytes(self.take(self.uint(1)), "little", signed=True))

        @op(0x8B)
        def long4() -> None:
            n = int.from_bytes(self.take(4), "little", signed=True)
            if not 0 <= n <= MAX_LONG_BYTES:
                raise PickleRefused(f"an integer of {n:,} bytes")
            push(int.from_bytes(self.take(n), "little", signed=True))

        @op("F")
        def float_text() -> None:
            try:
                push(float(self.line().decode("ascii")))
            except (UnicodeDecodeError, ValueError):
                raise PickleRefused("a float that is not a number") from None

        @op("G")
        def binfloat() -> None:
            push(struct.unpack(">d", self.take(8))[0])

        @op("S")
        def string_text() -> None:
            text = self.text_line(MAX_STRING_BYTES)
            if len(text) < 2 or text[0] != text[-1] or text[:1] not in (b"'", b'"'):
                raise PickleRefused("a STRING that is not quoted")
            try:
                push(codecs.escape_decode(text[1:-1])[0].decode("ascii"))
            except (UnicodeDecodeError, ValueError):
                raise PickleRefused("a STRING that is not ASCII text") from None

        def ascii_str(n: int) -> None:
            try:
                push(bytes(self.take(n)).decode("ascii"))
            except UnicodeDecodeError:
                raise PickleRefused("a Python 2 string that is not ASCII text") from None

        @op("T")
        def binstring() -> None:
            ascii_str(self.length(4))

        @op("U")
        def short_binstring() -> None:
            ascii_str(self.length(1))

        @op("V")
        def unicode_text() -> None:
            try:
                push(self.text_line(MAX_STRING_BYTES).decode("raw-unicode-escape"))
            except UnicodeDecodeError:
                raise PickleRefused("a UNICODE string that does not decode") from None

        def utf8(n: int) -> None:
            try:
                push(str(self.take(n), "utf-8", "surrogatepass"))
            except UnicodeDecodeError:
                raise PickleRefused("a string that is not UTF-8") from None

        @op("X")
        def binunicode() -> None:
            utf8(self.length(4))

        @op(0x8C)
        def short_binunicode() -> None:
            utf8(self.length(1))

        @op(0x8D)
        def binunicode8() -> None:
            utf8(self.length(8))

        @op("B")
        def binbytes() -> None:
            push(bytes(self.take(self.length(4))))

        @op("C")
        def short_binbytes() -> None:
            push(bytes(self.take(self.length(1))))

        @op(0x8E)
        def binbytes8() -> None:
            push(bytes(self.take(self.length(8))))

        @op(0x96)
        def bytearray8() -> None:
            push(bytes(self.take(self.length(8))))  # plain bytes: nothing here mutates it

        @op("]")
        def empty_list() -> None:
            push([])

        @op("l")
        def list_() -> None:
            items = self.pop_mark()
            self.count(len(items))
            push(items)

        @op("a")
        def append() -> None:
            item = pop()
            self.extend_list(self.top(), [item])

        @op("e")
        def appends() -> None:
            target = self.top_below_mark()
            self.extend_list(target, self.pop_mark())

        @op(")")
        def empty_tuple() -> None:
            push(())

        @op("t")
        def tuple_() -> None:
            push(self.tuple_of(self.pop_mark()))

        @op(0x85)
        def tuple1() -> None:
            push(self.tuple_of([pop()]))

        @op(0x86)
        def tuple2() -> None:
            b, a = pop(), pop()
            push(self.tuple_of([a, b]))

        @op(0x87)
        def tuple3() -> None:
            c, b, a = pop(), pop(), pop()
            push(self.tuple_of([a, b, c]))

        @op("}")
        def empty_dict() -> None:
            push({})

        @op("d")
        def dict_() -> None:
            items = self.pop_mark()
            target: dict[object, object] = {}
            self.set_items(target, items)
            push(target)

        @op("s")
        def setitem() -> None:
            value, key = pop(), pop()
            self.set_items(self.top(), [key, value])

        @op("u")
        def setitems() -> None:
            target = self.top_below_mark()
            self.set_items(target, self.pop_mark())

        @op(0x8F)
        def empty_set() -> None:
            push(set())

        @op(0x90)
        def additems() -> None:
            target = self.top_below_mark()
            self.add_items(target, self.pop_mark())

        @op(0x91)
        def frozenset_() -> None:
            members: set[object] = set()
            self.add_items(members, self.pop_mark())
            push(frozenset(members))

        def put(index: int) -> None:
            self.memo[index] = self.top()

        def get(index: int) -> None:
            try:
                push(self.memo[index])
            except KeyError:
                raise PickleRefused("the pickle refers to an object it never stored") from None

        @op("p")
        def put_text() -> None:
            put(_decimal(self.line()))

        @op("q")
        def binput() -> None:
            put(self.uint(1))

        @op("r")
        def long_binput() -> None:
            put(self.uint(4))

        @op(0x94)
        def memoize() -> None:
            put(len(self.memo))

        @op("g")
        def get_text() -> None:
            get(_decimal(self.line()))

        @op("h")
        def binget() -> None:
            get(self.uint(1))

        @op("j")
        def long_binget() -> None:
            get(self.uint(4))

    def run(self) -> object:
        """Interpret the pickle to its STOP. The opcodes a snapshot is made of are handled in
        this loop (a handler call each would make reading several times slower); the rest go
        through :attr:`handlers`."""
        handlers, stack, marks, memo = self.handlers, self.stack, self.marks, self.memo
        data = self.data
        end = len(data)
        unpack_h = struct.Struct("<H").unpack_from
        unpack_i = struct.Struct("<I").unpack_from
        unpack_l = struct.Struct("<i").unpack_from
        pos = self.pos
        try:
            while pos < end:
                code = data[pos]
                pos += 1
                if code == 0x68:  # BINGET
                    if pos >= end:
                        break
                    stack.append(memo[data[pos]])
                    pos += 1
                elif code == 0x94:  # MEMOIZE
                    if not stack or (marks and len(stack) <= marks[-1]):
                        raise PickleRefused("the pickle stores an empty stack")
                    memo[len(memo)] = stack[-1]
                elif code == 0x6A:  # LONG_BINGET
                    if pos + 4 > end:
                        break
                    stack.append(memo[unpack_i(data, pos)[0]])
                    pos += 4
                elif code == 0x28:  # MARK
                    if len(marks) >= MAX_MARKS:
                        raise PickleRefused("marks nest too deeply")
                    marks.append(len(stack))
                elif code == 0x7D:  # EMPTY_DICT
                    stack.append({})
                elif code == 0x4B:  # BININT1
                    if pos >= end:
                        break
                    stack.append(data[pos])
                    pos += 1
                elif code == 0x8C:  # SHORT_BINUNICODE
                    if pos >= end:
                        break
                    n = data[pos]
                    if pos + 1 + n > end:
                        break
                    stack.append(data[pos + 1 : pos + 1 + n].decode("utf-8", "surrogatepass"))
                    pos += 1 + n
                elif code == 0x4D:  # BININT2
                    if pos + 2 > end:
                        break
                    stack.append(unpack_h(data, pos)[0])
                    pos += 2
                elif code == 0x4A:  # BININT
                    if pos + 4 > end:
                        break
                    stack.append(unpack_l(data, pos)[0])
                    pos += 4
                elif code == 0x75:  # SETITEMS
                    self.set_items(self.top_below_mark(), self.pop_mark())
                elif code == 0x65:  # APPENDS
                    self.extend_list(self.top_below_mark(), self.pop_mark())
                elif code == 0x2E:  # STOP
                    if marks or len(stack) != 1:
                        raise PickleRefused("the pickle ends with a damaged stack")
                    return stack[0]
                else:
                    handler = handlers.get(code)
                    if handler is None:
                        why = REFUSED.get(code)
                        if why is not None:
                            raise PickleRefused(
                                f"opcode {why} at byte {pos - 1}: only plain data is read"
                            )
                        raise PickleRefused(f"unknown opcode 0x{code:02x} at byte {pos - 1}")
                    self.pos = pos
                    handler()
                    pos = self.pos
        except KeyError:
            raise PickleRefused("the pickle refers to an object it never stored") from None
        except UnicodeDecodeError:
            raise PickleRefused("a string that is not UTF-8") from None
        if pos < end:
            raise PickleRefused("the data is cut short")
        raise PickleRefused("the data is cut short (no STOP)")

    def top_below_mark(self) -> object:
        """The object a group (from the last MARK on) is added to: the one below the mark."""
        if not self.marks or self.marks[-1] == 0 or self.marks[-1] > len(self.stack):
            raise PickleRefused("the pickle adds items to nothing")
        if len(self.marks) > 1 and self.marks[-2] >= self.marks[-1]:
            raise PickleRefused("the pickle adds items to nothing")
        return self.stack[self.marks[-1] - 1]


def _decimal(text: bytes) -> int:
    if len(text) > MAX_DIGITS:
        raise PickleRefused(f"a number of more than {MAX_DIGITS} digits")
    try:
        return int(text.decode("ascii"), 10)
    except (UnicodeDecodeError, ValueError):
        raise PickleRefused("a number that is not decimal") from None


def _key(value: object) -> object:
    """A dict key or set member: plain hashable values only."""
    if isinstance(value, (str, int, float, bytes, tuple, frozenset)) or value is None:
        try:
            hash(value)
        except TypeError:
            raise PickleRefused("a dict key that holds a list or dict") from None
        return value
    raise PickleRefused(f"a dict key of type {type(value).__name__}")


def loads(data: bytes, *, max_items: int = MAX_ITEMS) -> object:
    """The plain data a pickle holds (dicts, lists, tuples, sets, strings, bytes, numbers,
    booleans, None). :class:`PickleRefused` (one line) for anything else, a damaged or cut
    pickle, or one beyond the limits above; nothing the data says is ever run."""
    return _Machine(data, max_items).run()
