// The blocks CPython's free lists hold: objects that died and are kept, not freed, for the
// next object of their type (and dict keys tables). Their blocks stay tracked, and live on
// the line that last made an object in them, though no object of the program is there.
// C (free_lists.c): 3.10-3.12's interpreter state does not compile as C++.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Calls visit(arg, block) for the block of each entry of the interpreter's free lists
// (tuples, floats, lists, dicts, dict keys tables; 3.10's frames; 3.14+'s ints and the
// others of its generic lists), with the GIL held. At most a million entries per list (a
// list holds 2,000 at most): a damaged list ends there.
void memlens_free_listed_blocks(void (*visit)(void* arg, uintptr_t block), void* arg);

#ifdef __cplusplus
}
#endif
