/* What formcast's C modules agree on between them: an automaton's table entries, and the
 * functions formcast._subset and formcast._pushdown export as capsules, which
 * formcast._trie_walk's walks (and formcast._pushdown, for its machines' rows) call
 * without going back to Python. Each capsule's name, signature and codes are here once. */
#ifndef FORMCAST_ROW_API_H
#define FORMCAST_ROW_API_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define UNBUILT (-1) /* a table entry not built yet (formcast.automaton.table) */
#define DEAD 0       /* the dead state (formcast.automaton.table) */

/* Build the row of a state into the table, registering the states it adds. Returns 1
 * built, 0 built already, 2 no room for its new states (nothing registered), -1 error. */
typedef int (*BuildState)(PyObject *nfa, int32_t state, int32_t *table, Py_ssize_t capacity,
                          uint8_t *accepting, PyObject *sets);
#define SUBSET_API "formcast._subset._build_state"
#define PUSHDOWN_API "formcast._pushdown._build_state" /* the same, for sets of stacks */

/* The entry of a state's row at one byte, computed alone where the row is not built,
 * registering a new state as a row would; STEP_NO_ROOM where the table lacks room for
 * it (nothing registered), -1 on error. */
typedef int64_t (*StepState)(PyObject *nfa, int32_t state, int byte, int32_t *table,
                             Py_ssize_t capacity, uint8_t *accepting, PyObject *sets);
#define STEP_API "formcast._subset._step_state"
#define PUSHDOWN_STEP_API "formcast._pushdown._step_state"
#define STEP_NO_ROOM (-2)

/* The one state every byte `plain` (four words of byte flags) leads to from a state, its
 * row built or not, registering it as a row would; DEAD where none lives, PLAIN_PARTS
 * where they part ways, STEP_NO_ROOM, -1 on error. */
typedef int64_t (*PlainStep)(PyObject *nfa, int32_t state, const uint64_t *plain,
                             int32_t *table, Py_ssize_t capacity, uint8_t *accepting,
                             PyObject *sets);
#define PLAIN_API "formcast._subset._plain_step"
#define PUSHDOWN_PLAIN_API "formcast._pushdown._plain_step"
#define PLAIN_PARTS (-3)

/* formcast._subset's utf8_steps: the state every well-formed non-ASCII character leads to
 * from a state whose row is built, and the states inside a character (3 x UTF8_LEADS: by
 * depth, then lead byte - 0xC0); 0 where characters part ways, -1 on error. */
typedef int32_t (*Utf8Steps)(PyObject *nfa, int32_t state, const int32_t *table,
                             Py_ssize_t states, int32_t *steps);
#define UTF8_API "formcast._subset._utf8_steps"
#define UTF8_LEADS 64 /* the bytes 0xC0 .. 0xFF, of which 0xC2 .. 0xF4 start one */

/* formcast._subset's live_bytes: the bytes on which a state leads to a live state (four
 * words), its row built or not, registering nothing: 0, or -1 on error. */
typedef int (*LiveBytes)(PyObject *nfa, int32_t state, int32_t *table, Py_ssize_t capacity,
                         uint8_t *accepting, PyObject *sets, uint64_t *out);
#define LIVE_API "formcast._subset._live_bytes"

#endif
