/* formcast._trie_walk: what its two sources share (_trie_walk.c, the walk and the row
 * helpers; _row_visit.c, a state's whole first visit in one call). */
#ifndef FORMCAST_TRIE_WALK_H
#define FORMCAST_TRIE_WALK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_row_api.h"

typedef struct {
    int32_t node;
    int32_t state;
} Entry;

/* A node with at most this many children, whose state's row is not built, reads its
 * children's entries by StepState instead of building the row, where the walk says so
 * (Walk.read_entries; see visit). */
#define STEP_CHILDREN 4

/* What the walk reads of a node, side by side (vocabulary.FlatTrie.node_records): the
 * fields of the arrays below, in one cache line a node. */
typedef struct {
    int32_t child_first, child_count, token, subtree_first, subtree_stop, byte, large, unused;
} NodeRecord;

/* The arrays of a flattened trie the walk reads (vocabulary.FlatTrie.walk_arrays). */
typedef struct {
    const NodeRecord *records; /* one a node */
    Py_ssize_t nodes;
    const uint64_t *below_bytes; /* four words a node */
    const int32_t *token_ids;
    Py_ssize_t tokens;
} TrieArrays;

/* A state's loop mask: the bytes on which it stays where it is (LOOP_SLOTS of them kept
 * a walk, by state; state 0, DEAD, marks a free slot). */
#define LOOP_SLOTS 64
typedef struct {
    int32_t state;
    uint64_t bytes[4];
} LoopMask;

typedef struct {
    const int32_t *table;
    Py_ssize_t states; /* rows of the table */
    /* the rows' builder, when the walk builds them (else NULL: they are left pending) */
    BuildState build;
    Utf8Steps utf8; /* where the rows are a lazy DFA's (formcast._subset), else NULL */
    StepState step; /* the same */
    PlainStep plain_step; /* the same */
    /* below a node of a few children whose state's row is not built, read those
     * children's entries alone by `step` (an object key's walk under its names' initials:
     * a name's prefix is met at a node or two; elsewhere a state met at many nodes costs
     * more entry by entry than its row) */
    int read_entries;
    int32_t *writable_table;
    uint8_t *accepting;
    PyObject *nfa, *sets;
    TrieArrays trie; /* the trie walked */
    int32_t *out_ids;
    int32_t *out_states;
    Py_ssize_t out_size;
    Py_ssize_t filled;
    int32_t *pending_nodes;
    int32_t *pending_states;
    Py_ssize_t pending_size;
    Py_ssize_t pending;
    /* rows are built whole, and none is being written (a LazyAutomaton's, under its
     * lock): a row's first entry tells whether it is built */
    int whole_rows;
    /* the loop masks of states met so far (LOOP_SLOTS, zeroed before the walk) */
    LoopMask *loops;
    /* tokens reaching this state are counted (`counted`), not written out as pairs:
     * their bits set in counted_bits and their ids kept in counted_ids where those are
     * not NULL; DEAD (the zeroed walk's): none is (no token is written with DEAD) */
    int32_t counted_state;
    Py_ssize_t counted;
    uint32_t *counted_bits;
    int32_t *counted_ids; /* where not NULL, the counted tokens in order (room for all) */
    /* in a walk of plain tokens alone, a state that stays where it is on every plain
     * byte (DEAD: none): a child it reaches ends there with its whole subtree, taken
     * without a visit (an object key's walk under its names' initials) */
    int32_t plain_loop_state;
} Walk;

enum {
    WALK_OK = 0,
    WALK_NO_MEMORY = 1,
    WALK_BAD_NODE = 2,
    WALK_BAD_STATE = 3,
    WALK_FULL = 4,
    WALK_ERROR = 5 /* the builder failed: its exception is set */
};

/* Buffers, with the item size and count each must have. */
typedef struct {
    Py_buffer view;
    int held;
} Held;


#define TRIE_ARRAYS 3 /* the buffers of a flattened trie */

int take(PyObject *object, Held *held, int writable, Py_ssize_t itemsize, Py_ssize_t minimum,
         const char *name);
void release(Held *held, int count);
int take_trie(PyObject *const *arrays, Held *held, TrieArrays *trie);
void use_trie(Walk *w, const TrieArrays *trie);
int run(Walk *w, const int32_t *frontier_nodes, const int32_t *frontier_states,
        Py_ssize_t frontier);
int build_row(Walk *w, int32_t state);
const uint64_t *loop_mask(Walk *w, int32_t state, int compute);
void set_walk_error(int status);
int start_building(Walk *w, PyObject *builder, Held *flags);
Py_ssize_t radix_sort_pairs(int32_t *ids, int32_t *states, Py_ssize_t count);
Py_ssize_t sort_pairs_in_place(int32_t *ids, int32_t *states, Py_ssize_t count);
int pack_ids(const int32_t *ids, Py_ssize_t count, uint32_t *out, Py_ssize_t words,
             int32_t *bad);
int split_first_bytes(const int32_t *table, Py_ssize_t states, int32_t state,
                      const uint8_t *plain, Py_ssize_t plains, uint8_t *by_first,
                      int32_t *looping, Py_ssize_t counts[3]);

enum { FINE, BAD_SHAPE, BAD_ID, TOO_MANY }; /* template_core's outcomes */
int scatter_core(const int32_t *ids, const int32_t *states, Py_ssize_t count,
                 const int32_t *plain_ids, const int32_t *plain_lengths, Py_ssize_t plain,
                 const int32_t *chain, Py_ssize_t links, int32_t *table, Py_ssize_t size,
                 const int32_t *repeat, const int32_t *original, Py_ssize_t repeats,
                 uint32_t *out_bits, Py_ssize_t words, uint8_t *codes, int32_t *palette,
                 Py_ssize_t *kept_out, Py_ssize_t *distinct_out);
int template_core(const int32_t *ids, const int32_t *states, Py_ssize_t count,
                  const int32_t *chain, const uint8_t *shape, Py_ssize_t links,
                  const uint8_t *template_codes, const uint32_t *template_bits,
                  Py_ssize_t template_kept, const uint32_t *plain_bits, Py_ssize_t size,
                  const int32_t *repeat, const int32_t *original, Py_ssize_t repeats,
                  uint8_t *codes, uint32_t *changed, const uint32_t *dropped,
                  uint32_t *out_bits, Py_ssize_t out_words, int32_t *palette,
                  Py_ssize_t *kept_out, Py_ssize_t *distinct_out);

Py_ssize_t count_word_bits(const uint32_t *words, Py_ssize_t count); /* set bits */

/* The Visitor type of _row_visit.c, added to the module by PyInit__trie_walk. */
int add_visitor_type(PyObject *module);

#endif
