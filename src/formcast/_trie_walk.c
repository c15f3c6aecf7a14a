/* formcast._trie_walk: the walk of a token trie through a byte automaton's table, in C.
 *
 * formcast.index walks every token of a vocabulary from one automaton state to build that
 * state's row: which tokens are allowed and where each leads. The numpy walk in index.py
 * pays for some twenty small array operations per trie level; this one does a constant
 * amount of work per live trie node. It is optional: index.py falls back to numpy when this
 * module was not built, and the tests check that both walks give the same rows.
 *
 * The trie is flattened (vocabulary.FlatTrie): node 0 is the root, a node's children are
 * contiguous, and a node's subtree holds the tokens token_ids[first:stop]. The automaton is
 * a table of int32, 256 entries a state (TableAutomaton's, or BoundAutomaton's): -1
 * (UNBUILT) for an entry not built yet, 0 (DEAD) for no transition.
 *
 * walk() stops where it would read an entry that is not built: it returns those (node,
 * state) pairs as pending, the caller builds their rows (in Python, under the automaton's
 * lock) and calls walk() again with them as the frontier. Each live node is processed
 * once over all calls, so a whole walk costs O(live nodes), plus 256 reads for each large
 * subtree whose state may loop on every byte below it.
 *
 * Only the buffer protocol is used (no numpy headers): every array arrives as a buffer,
 * and its size is checked against what the walk reads, so a bad call raises ValueError
 * rather than reading out of bounds. The GIL is released during the walk; table entries
 * only ever change from UNBUILT to their final value (table.py), so concurrent readers
 * see either.
 *
 * Three helpers finish a row at the same cost per token: sort_pairs() orders a small row's
 * (token, state) pairs by token, scatter_pairs() lays a large one out as a table over the
 * vocabulary (the plain tokens' states read off their chain, the row's bitmask written on
 * the way, and the table coded one byte a token when its states are few), and pack_bits()
 * writes a row's tokens as a bitmask; each replaces a handful of numpy calls (some twenty
 * passes over the vocabulary for a large row).
 *
 * The module's second source, _row_visit.c, drives all of this for one state's first
 * visit in a single call (Visitor); the functions here remain what index.py calls for
 * the other automata, and what the tests check one at a time.
 *
 * Two more make a row inside a string without a pass over the vocabulary: its plain
 * tokens' part depends only on the chain's shape (which lengths lead to one state, which
 * to DEAD), not on the states. plain_template() writes that part once per shape (a code a
 * token, 1 + the index of the length's state among the chain's distinct ones, and its
 * bits); scatter_on_template() copies a template, names the codes' states after the
 * chain, and writes the walked tokens and the repeats over it (O(vocabulary / 8) copies
 * plus O(walked tokens)). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_trie_walk.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Whether the entries of `state` for the children of `node` are all built. A table
 * whose rows are built whole (TableAutomaton) or entry by entry (BoundAutomaton) is read
 * alike, and a row being written by another thread reads as not built yet. */
static int children_built(const Walk *w, const NodeRecord *record, int32_t state) {
    const int32_t *row = w->table + (Py_ssize_t)state * 256;
    const NodeRecord *children = w->trie.records + record->child_first;
    /* a whole row: any entry tells, and the first child's is read next anyway (row[0]
     * would be one more cache line a node) */
    if (w->whole_rows) return row[children[0].byte] != UNBUILT;
    for (int32_t k = 0; k < record->child_count; k++)
        if (row[children[k].byte] == UNBUILT) return 0;
    return 1;
}

/* The set bits of `count` words. Where GCC builds for x86-64 Linux, a second version
 * uses the popcnt instruction, chosen at load time on processors that have it: without
 * it, each word was a call into libgcc (~12% of a string's first visit). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
__attribute__((target_clones("popcnt", "default")))
#endif
Py_ssize_t count_word_bits(const uint32_t *words, Py_ssize_t count) {
    Py_ssize_t kept = 0;
    for (Py_ssize_t word = 0; word < count; word++) {
#if defined(__GNUC__) || defined(__clang__)
        kept += __builtin_popcount(words[word]);
#else
        for (uint32_t bits = words[word]; bits; bits &= bits - 1) kept++;
#endif
    }
    return kept;
}

/* Bit k set where entries[k] is `state`, over 64 entries: four at a compare where SSE2
 * is there (every x86-64), where one at a time was ~130 ns a row. */
static inline uint64_t staying_bits(const int32_t *entries, int32_t state) {
    uint64_t bits = 0;
#if defined(__SSE2__)
    const __m128i wanted = _mm_set1_epi32(state);
    for (int k = 0; k < 64; k += 4) {
        __m128i four = _mm_loadu_si128((const __m128i *)(entries + k));
        int equal = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(four, wanted)));
        bits |= (uint64_t)(unsigned)equal << k;
    }
#else
    for (int k = 0; k < 64; k++) bits |= (uint64_t)(entries[k] == state) << k;
#endif
    return bits;
}

/* The bytes on which `state` (its row built) stays where it is, as four words: read off
 * its row the first time in a walk, then kept by state. Computed only where a large
 * subtree asks (`compute`): a state met at a few small nodes costs less walked. An entry
 * not built yet reads as leaving (the subtree is then walked: the same tokens), and a
 * built one never changes, so a mask kept from a row built in part stays true. */
const uint64_t *loop_mask(Walk *w, int32_t state, int compute) {
    LoopMask *slot = &w->loops[((uint32_t)state * 2654435761u) >> 26]; /* 64 slots */
    if (slot->state == state) return slot->bytes;
    if (!compute) return NULL;
    const int32_t *row = w->table + (Py_ssize_t)state * 256;
    for (int word = 0; word < 4; word++) slot->bytes[word] = staying_bits(row + word * 64, state);
    slot->state = state;
    return slot->bytes;
}

/* Whether `state` stays where it is on every byte below `node`, as far as its loop mask
 * tells (none kept and the subtree small: no). */
static int loops_below(Walk *w, int32_t node, int large, int32_t state) {
    const uint64_t *mask = loop_mask(w, state, large);
    if (mask == NULL) return 0;
    const uint64_t *below = w->trie.below_bytes + (Py_ssize_t)node * 4;
    return !((below[0] & ~mask[0]) | (below[1] & ~mask[1]) | (below[2] & ~mask[2]) |
             (below[3] & ~mask[3]));
}

static int emit(Walk *w, int32_t token, int32_t state) {
    if (state == w->counted_state) {
        if (w->counted_ids) w->counted_ids[w->counted] = token;
        w->counted++;
        if (w->counted_bits) w->counted_bits[token >> 5] |= (uint32_t)1 << (token & 31);
        return WALK_OK;
    }
    if (w->filled >= w->out_size) return WALK_FULL;
    w->out_ids[w->filled] = token;
    w->out_states[w->filled] = state;
    w->filled++;
    return WALK_OK;
}

static int emit_subtree(Walk *w, const NodeRecord *record, int32_t state) {
    int32_t first = record->subtree_first, stop = record->subtree_stop;
    if (first < 0 || stop < first || stop > w->trie.tokens) return WALK_BAD_NODE;
    if (state == w->counted_state) {
        if (w->counted_ids)
            memcpy(w->counted_ids + w->counted, w->trie.token_ids + first,
                   (size_t)(stop - first) * sizeof(int32_t));
        w->counted += stop - first;
        if (w->counted_bits)
            for (int32_t i = first; i < stop; i++) {
                int32_t token = w->trie.token_ids[i];
                w->counted_bits[token >> 5] |= (uint32_t)1 << (token & 31);
            }
        return WALK_OK;
    }
    if (w->filled + (stop - first) > w->out_size) return WALK_FULL;
    for (int32_t i = first; i < stop; i++) {
        w->out_ids[w->filled] = w->trie.token_ids[i];
        w->out_states[w->filled] = state;
        w->filled++;
    }
    return WALK_OK;
}

/* Build the row of `state` by the walk's builder, unless it is built: 1 built, 0 no room
 * for its new states (or no builder), -1 error (the builder's exception set). With no
 * room, the rest of the walk builds nothing: each try would compute a row only to find
 * the room short again; the caller grows the table and walks again from what is left. */
int build_row(Walk *w, int32_t state) {
    if (w->table[(Py_ssize_t)state * 256] != UNBUILT) return 1;
    if (!w->build) return 0;
    int built = w->build(w->nfa, state, w->writable_table, w->states, w->accepting, w->sets);
    if (built < 0) return -1;
    if (built == 2) {
        w->build = NULL;
        return 0;
    }
    return 1;
}

/* The entries of `state`'s row (not built) at the bytes of `record`'s children, into
 * `next`, each computed alone (StepState): 1 done, 0 no room for a new state (the rest of
 * the walk builds nothing, as with a row), -1 error. A node with a few children costs a
 * few entries where a row costs all 256: below an object key's declared name, a row
 * serves one or two bytes. Elsewhere a state met at many small nodes (a bounded string's
 * count, a pattern matched anywhere) computed most of its row entry by entry: a
 * Snowplow schema's slowest mask took twice its time. */
static int step_children(Walk *w, const NodeRecord *record, int32_t state, int32_t *next) {
    const NodeRecord *children = w->trie.records + record->child_first;
    for (int32_t k = 0; k < record->child_count; k++) {
        int64_t target = w->step(w->nfa, state, children[k].byte, w->writable_table, w->states,
                                 w->accepting, w->sets);
        if (target == -1) return -1;
        if (target == STEP_NO_ROOM) {
            w->build = NULL;
            return 0;
        }
        next[k] = (int32_t)target;
    }
    return 1;
}

/* One reached node: its whole subtree when its state loops below it, else its own token
 * and a push of each live child; a node whose children need a row not built yet is kept
 * pending, whole (nothing of it emitted). Where the walk reads entries alone
 * (Walk.read_entries), below a node of a few children a row not built is read entry by
 * entry (step_children), and the subtree is walked: whether the state loops would take
 * its whole row to tell. */
static int visit(Walk *w, Entry entry, Entry **stack, Py_ssize_t *depth, Py_ssize_t *room) {
    int32_t node = entry.node, state = entry.state;
    if (node < 0 || node >= w->trie.nodes) return WALK_BAD_NODE;
    if (state <= DEAD || state >= w->states) return WALK_BAD_STATE;
    const NodeRecord *record = w->trie.records + node;
    int32_t count = record->child_count;
    int32_t first = record->child_first;
    if (count > 0 && (first < 0 || (Py_ssize_t)first + count > w->trie.nodes)) return WALK_BAD_NODE;
    int missing = count > 0 && !children_built(w, record, state);
    int32_t stepped[STEP_CHILDREN];
    int by_steps = missing && w->build && w->read_entries && count <= STEP_CHILDREN;
    if (by_steps) {
        int done = step_children(w, record, state, stepped);
        if (done < 0) return WALK_ERROR;
        by_steps = done;
        missing = !done;
    } else if (missing && w->build) { /* built here; pending only when the table lacks room */
        int built = build_row(w, state);
        if (built < 0) return WALK_ERROR;
        missing = !built;
    }
    if (missing) {
        if (w->pending >= w->pending_size) return WALK_FULL;
        w->pending_nodes[w->pending] = node;
        w->pending_states[w->pending] = state;
        w->pending++;
        return WALK_OK;
    }
    if (count > 0 && !by_steps && loops_below(w, node, record->large, state))
        return emit_subtree(w, record, state);
    int32_t token = record->token;
    if (token >= 0) {
        int status = emit(w, token, state);
        if (status != WALK_OK) return status;
    }
    if (count <= 0) return WALK_OK;
    if (*depth + count > *room) {
        Py_ssize_t wanted = (*room) * 2 > *depth + count ? (*room) * 2 : *depth + count;
        Entry *grown = realloc(*stack, (size_t)wanted * sizeof(Entry));
        if (grown == NULL) return WALK_NO_MEMORY;
        *stack = grown;
        *room = wanted;
    }
    const int32_t *row = w->table + (Py_ssize_t)state * 256;
    const NodeRecord *children = w->trie.records + first;
    for (int32_t k = 0; k < count; k++) {
        int32_t child = first + k;
        int32_t next = by_steps ? stepped[k] : row[children[k].byte];
        if (next == DEAD) continue;
        if (next < 0 || next >= w->states) return WALK_BAD_STATE;
        if (next == w->plain_loop_state) { /* its subtree ends there: no visit to tell */
            int status = emit_subtree(w, &children[k], next);
            if (status != WALK_OK) return status;
            continue;
        }
        if (children[k].child_count <= 0) { /* a leaf: its token, without a push */
            int32_t leaf_token = children[k].token;
            if (leaf_token >= 0) {
                int status = emit(w, leaf_token, next);
                if (status != WALK_OK) return status;
            }
            continue;
        }
        (*stack)[(*depth)++] = (Entry){child, next};
    }
    return WALK_OK;
}

int run(Walk *w, const int32_t *frontier_nodes, const int32_t *frontier_states,
        Py_ssize_t frontier) {
    LoopMask own[LOOP_SLOTS], *given = w->loops;
    if (given == NULL) { /* masks for this run alone */
        memset(own, 0, sizeof(own));
        w->loops = own;
    }
    Py_ssize_t room = frontier > 1024 ? frontier : 1024, depth = 0;
    Entry *stack = malloc((size_t)room * sizeof(Entry));
    int status = stack == NULL ? WALK_NO_MEMORY : WALK_OK;
    for (Py_ssize_t i = 0; i < frontier && stack; i++)
        stack[depth++] = (Entry){frontier_nodes[i], frontier_states[i]};
    while (depth > 0 && status == WALK_OK) {
        Entry entry = stack[--depth];
        status = visit(w, entry, &stack, &depth, &room);
    }
    free(stack);
    w->loops = given;
    return status;
}

int take(PyObject *object, Held *held, int writable, Py_ssize_t itemsize, Py_ssize_t minimum,
         const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, &held->view, flags) < 0) return -1;
    held->held = 1;
    if (held->view.len % itemsize != 0 || held->view.len / itemsize < minimum) {
        PyErr_Format(PyExc_ValueError,
                     "expected %s to hold at least %zd items of %zd bytes, found %zd bytes",
                     name, minimum, itemsize, held->view.len);
        return -1;
    }
    return 0;
}

/* Parse the two buffer arguments of sort_pairs and pack_bits (int32 items), the second
 * writable. Returns -1 with an exception set when they do not fit; release() frees what
 * was taken either way. */
static int take_two(PyObject *args, const char *format, Held held[2], int first_writable,
                    const char *first_name, const char *second_name) {
    PyObject *first, *second;
    memset(held, 0, 2 * sizeof(Held));
    if (!PyArg_ParseTuple(args, format, &first, &second)) return -1;
    if (take(first, &held[0], first_writable, 4, 0, first_name) < 0) return -1;
    return take(second, &held[1], 1, 4, 0, second_name);
}

/* Take the three buffers of a flattened trie the walk reads (see
 * vocabulary.FlatTrie.walk_arrays), the bytes below checked against the node count.
 * Returns -1 with an exception set; the caller releases `held` (TRIE_ARRAYS entries)
 * either way. */
int take_trie(PyObject *const *arrays, Held *held, TrieArrays *trie) {
    if (take(arrays[0], &held[0], 0, sizeof(NodeRecord), 1, "node_records") < 0) return -1;
    trie->records = held[0].view.buf;
    trie->nodes = held[0].view.len / (Py_ssize_t)sizeof(NodeRecord);
    if (take(arrays[1], &held[1], 0, 8, 4 * trie->nodes, "below_bytes") < 0) return -1;
    trie->below_bytes = held[1].view.buf;
    if (take(arrays[2], &held[2], 0, 4, 0, "token_ids") < 0) return -1;
    trie->token_ids = held[2].view.buf;
    trie->tokens = held[2].view.len / 4;
    return 0;
}

/* Point the walk at a trie's arrays. */
void use_trie(Walk *w, const TrieArrays *trie) { w->trie = *trie; }

/* Set the exception of a walk's failed status (WALK_ERROR: the builder's is set). */
void set_walk_error(int status) {
    switch (status) {
    case WALK_ERROR:
        break;
    case WALK_NO_MEMORY:
        PyErr_NoMemory();
        break;
    case WALK_BAD_NODE:
        PyErr_SetString(PyExc_ValueError, "expected trie nodes within the flattened trie");
        break;
    case WALK_BAD_STATE:
        PyErr_SetString(PyExc_ValueError, "expected live states within the table");
        break;
    default:
        PyErr_SetString(PyExc_ValueError, "expected output buffers large enough for the walk");
    }
}

void release(Held *held, int count) {
    for (int i = 0; i < count; i++)
        if (held[i].held) PyBuffer_Release(&held[i].view);
}

#define ARGUMENTS 11 /* buffers: 10 arguments and the builder's acceptance flags */

PyDoc_STRVAR(walk_doc,
"walk(table, trie, frontier_nodes, frontier_states, out_ids, out_states, filled,\n"
"     pending_nodes, pending_states, builder=None) -> (filled, pending)\n"
"\n"
"Walk the flattened trie (the tuple node_records, below_bytes, token_ids of\n"
"FlatTrie.walk_arrays) through the table from each (frontier node, state). Every token\n"
"reached is written with its state to out_ids/out_states from index `filled` on; each\n"
"(node, state) whose row is not built yet to the pending buffers. Returns the new filled\n"
"count and the pending count.\n"
"\n"
"builder: None, or the tuple (nfa, accepting, sets) of a LazyAutomaton whose rows\n"
"formcast._subset builds (its Nfa, its acceptance flags and its list of states), or\n"
"(stacks, accepting, sets, build, step, plain step) of a PushdownAutomaton whose rows\n"
"formcast._pushdown builds through its capsules (_build_state, _step_state,\n"
"_plain_step): the walk then builds the rows it reaches in the table (writable)\n"
"itself, holding the GIL, and leaves a (node, state)\n"
"pending only when the table lacks room for the states its row would add. Without it\n"
"the walk releases the GIL.");

/* formcast._subset's row construction, utf8_steps, step_state and plain_step (its
 * capsules, imported once) into the walk: 0, or -1 with an exception set. */
static int use_subset(Walk *w) {
    static BuildState build = NULL;
    static Utf8Steps utf8 = NULL;
    static StepState step = NULL;
    static PlainStep plain = NULL;
    if (!build) build = (BuildState)PyCapsule_Import(SUBSET_API, 0);
    if (build && !utf8) utf8 = (Utf8Steps)PyCapsule_Import(UTF8_API, 0);
    if (utf8 && !step) step = (StepState)PyCapsule_Import(STEP_API, 0);
    if (step && !plain) plain = (PlainStep)PyCapsule_Import(PLAIN_API, 0);
    if (!plain) return -1;
    w->build = build;
    w->utf8 = utf8;
    w->step = step;
    w->plain_step = plain;
    return 0;
}

/* Set up a walk that builds rows: `builder` is (nfa, accepting, sets), or (builder object,
 * accepting, sets, build, step, plain step) where another construction
 * (formcast._pushdown's) builds rows, entries and chain links through those capsules'
 * functions; the table already taken writable; the acceptance flags are held in
 * `flags`. */
int start_building(Walk *w, PyObject *builder, Held *flags) {
    Py_ssize_t size = PyTuple_Check(builder) ? PyTuple_GET_SIZE(builder) : 0;
    if (size != 3 && size != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "expected builder as (nfa, accepting, sets[, build, step, plain step])");
        return -1;
    }
    if (size == 6) {
        w->build = (BuildState)PyCapsule_GetPointer(PyTuple_GET_ITEM(builder, 3), PUSHDOWN_API);
        w->step = (StepState)PyCapsule_GetPointer(PyTuple_GET_ITEM(builder, 4),
                                                  PUSHDOWN_STEP_API);
        w->plain_step = (PlainStep)PyCapsule_GetPointer(PyTuple_GET_ITEM(builder, 5),
                                                        PUSHDOWN_PLAIN_API);
        if (!w->step || !w->plain_step) return -1;
    } else if (use_subset(w) < 0) {
        return -1;
    }
    if (!w->build) return -1;
    if (take(PyTuple_GET_ITEM(builder, 1), flags, 1, 1, w->states, "accepting") < 0) return -1;
    w->writable_table = (int32_t *)w->table;
    w->accepting = flags->view.buf;
    w->nfa = PyTuple_GET_ITEM(builder, 0);
    w->sets = PyTuple_GET_ITEM(builder, 2);
    return 0;
}

static PyObject *walk(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *objects[ARGUMENTS];
    PyObject *builder = Py_None;
    Py_ssize_t filled;
    if (!PyArg_ParseTuple(args, "O(OOO)OOOOnOO|O:walk", &objects[0], &objects[1], &objects[2],
                          &objects[3], &objects[4], &objects[5], &objects[6], &objects[7],
                          &filled, &objects[8], &objects[9], &builder))
        return NULL;
    Held held[ARGUMENTS];
    memset(held, 0, sizeof(held));
    PyObject *result = NULL;
    Walk w;
    memset(&w, 0, sizeof(w));

    int building = builder != Py_None;
    if (take(objects[0], &held[0], building, 4, 256, "the table") < 0) goto done;
    w.table = held[0].view.buf;
    w.states = held[0].view.len / 4 / 256;
    if (building && start_building(&w, builder, &held[10]) < 0) goto done;
    TrieArrays trie;
    if (take_trie(objects + 1, held + 1, &trie) < 0) goto done;
    use_trie(&w, &trie);
    if (take(objects[4], &held[4], 0, 4, 0, "frontier_nodes") < 0) goto done;
    Py_ssize_t frontier = held[4].view.len / 4;
    if (take(objects[5], &held[5], 0, 4, frontier, "frontier_states") < 0) goto done;
    if (take(objects[6], &held[6], 1, 4, 0, "out_ids") < 0) goto done;
    w.out_ids = held[6].view.buf;
    w.out_size = held[6].view.len / 4;
    if (take(objects[7], &held[7], 1, 4, w.out_size, "out_states") < 0) goto done;
    w.out_states = held[7].view.buf;
    if (take(objects[8], &held[8], 1, 4, 0, "pending nodes") < 0) goto done;
    w.pending_nodes = held[8].view.buf;
    w.pending_size = held[8].view.len / 4;
    if (take(objects[9], &held[9], 1, 4, w.pending_size, "pending states") < 0) goto done;
    w.pending_states = held[9].view.buf;
    if (filled < 0 || filled > w.out_size) {
        PyErr_Format(PyExc_ValueError, "expected filled in [0, %zd], found %zd", w.out_size,
                     filled);
        goto done;
    }
    w.filled = filled;

    int status;
    if (building) { /* the builder makes Python objects: the GIL stays held */
        status = run(&w, held[4].view.buf, held[5].view.buf, frontier);
    } else {
        Py_BEGIN_ALLOW_THREADS
        status = run(&w, held[4].view.buf, held[5].view.buf, frontier);
        Py_END_ALLOW_THREADS
    }
    if (status == WALK_OK) result = Py_BuildValue("(nn)", w.filled, w.pending);
    else set_walk_error(status);
done:
    release(held, ARGUMENTS);
    return result;
}

#define INSERTION_SORTED 64 /* sort_pairs: up to this many pairs, an insertion sort */
#define RADIX_BITS 11
#define RADIX_SIZE (1 << RADIX_BITS)

/* One stable counting pass of a radix sort: the pairs of (from_ids, from_states) go to
 * (to_ids, to_states) ordered by the digit of their id at `shift`. */
static void radix_pass(const int32_t *from_ids, const int32_t *from_states, int32_t *to_ids,
                       int32_t *to_states, Py_ssize_t count, int shift) {
    Py_ssize_t start[RADIX_SIZE];
    memset(start, 0, sizeof(start));
    for (Py_ssize_t i = 0; i < count; i++)
        start[((uint32_t)from_ids[i] >> shift) & (RADIX_SIZE - 1)]++;
    Py_ssize_t total = 0;
    for (int d = 0; d < RADIX_SIZE; d++) {
        Py_ssize_t here = start[d];
        start[d] = total;
        total += here;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t at = start[((uint32_t)from_ids[i] >> shift) & (RADIX_SIZE - 1)]++;
        to_ids[at] = from_ids[i];
        to_states[at] = from_states[i];
    }
}

/* Order the pairs by id in place, the DEAD ones left out (they are dropped before the
 * passes); returns how many are kept, or -1 when the scratch buffers cannot be had. */
Py_ssize_t radix_sort_pairs(int32_t *ids, int32_t *states, Py_ssize_t count) {
    Py_ssize_t kept = 0;
    uint32_t largest = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (states[i] == DEAD) continue;
        ids[kept] = ids[i];
        states[kept] = states[i];
        if ((uint32_t)ids[kept] > largest) largest = (uint32_t)ids[kept];
        kept++;
    }
    int32_t *scratch = malloc(2 * (size_t)(kept ? kept : 1) * sizeof(int32_t));
    if (!scratch) return -1;
    int32_t *from_ids = ids, *from_states = states;
    int32_t *to_ids = scratch, *to_states = scratch + kept;
    for (int shift = 0; shift < 32 && (shift == 0 || (largest >> shift) != 0);
         shift += RADIX_BITS) {
        radix_pass(from_ids, from_states, to_ids, to_states, kept, shift);
        int32_t *swap_ids = from_ids, *swap_states = from_states;
        from_ids = to_ids, from_states = to_states;
        to_ids = swap_ids, to_states = swap_states;
    }
    if (from_ids != ids) { /* an odd number of passes: the order is in the scratch */
        memcpy(ids, from_ids, (size_t)kept * sizeof(int32_t));
        memcpy(states, from_states, (size_t)kept * sizeof(int32_t));
    }
    free(scratch);
    return kept;
}

/* sort_pairs's work (see its docstring): the kept pairs' count, or -1 when the radix
 * sort's scratch cannot be had. */
Py_ssize_t sort_pairs_in_place(int32_t *ids, int32_t *states, Py_ssize_t count) {
    if (count > INSERTION_SORTED) return radix_sort_pairs(ids, states, count);
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int32_t id = ids[i], state = states[i];
        if (state == DEAD) continue;
        Py_ssize_t at = kept++;
        for (; at > 0 && ids[at - 1] > id; at--) {
            ids[at] = ids[at - 1];
            states[at] = states[at - 1];
        }
        ids[at] = id;
        states[at] = state;
    }
    return kept;
}

PyDoc_STRVAR(sort_pairs_doc,
"sort_pairs(ids, states) -> kept\n"
"\n"
"Order the (id, state) pairs of two int32 buffers of one length by id, in place,\n"
"leaving out pairs whose state is DEAD (0): the kept pairs come first, and their count\n"
"is returned. An insertion sort up to 64 pairs; past it, a radix sort of the ids (two\n"
"counting passes of 11 bits below 2**22, three past it), O(pairs) with two scratch\n"
"buffers. Each id at most once.");

static PyObject *sort_pairs(PyObject *module, PyObject *args) {
    (void)module;
    Held held[2];
    PyObject *result = NULL;
    if (take_two(args, "OO:sort_pairs", held, 1, "ids", "states") < 0) goto done;
    Py_ssize_t count = held[0].view.len / 4;
    if (held[1].view.len / 4 != count) {
        PyErr_Format(PyExc_ValueError, "expected %zd states, one an id, found %zd", count,
                     held[1].view.len / 4);
        goto done;
    }
    Py_ssize_t kept = sort_pairs_in_place(held[0].view.buf, held[1].view.buf, count);
    if (kept < 0) PyErr_NoMemory();
    else result = PyLong_FromSsize_t(kept);
done:
    release(held, 2);
    return result;
}

/* pack_bits's work (see its docstring): 0, or -1 with the first id out of range in *bad
 * (`out` then unfinished). */
int pack_ids(const int32_t *ids, Py_ssize_t count, uint32_t *out, Py_ssize_t words,
             int32_t *bad) {
    memset(out, 0, (size_t)words * 4);
    /* the bits of one word gather in a register while the ids stay in it (a row's ids
     * are sorted), then one store: no read-modify-write of memory per id */
    Py_ssize_t current = -1;
    uint32_t bits = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int32_t id = ids[i];
        if (id < 0 || (Py_ssize_t)id >= words * 32) {
            *bad = id;
            return -1;
        }
        Py_ssize_t word = id >> 5;
        if (word != current) {
            if (current >= 0) out[current] |= bits;
            current = word;
            bits = 0;
        }
        bits |= (uint32_t)1 << (id & 31);
    }
    if (current >= 0) out[current] |= bits;
    return 0;
}

PyDoc_STRVAR(pack_bits_doc,
"pack_bits(ids, out) -> None\n"
"\n"
"Write into the uint32 buffer out the set of ids (int32): bit i % 32 of word i // 32\n"
"is set for each id i, every other bit cleared. ValueError for an id outside\n"
"[0, 32 * len(out)).");

static PyObject *pack_bits(PyObject *module, PyObject *args) {
    (void)module;
    Held held[2];
    PyObject *result = NULL;
    if (take_two(args, "OO:pack_bits", held, 0, "ids", "out") < 0) goto done;
    Py_ssize_t words = held[1].view.len / 4;
    int32_t bad;
    if (pack_ids(held[0].view.buf, held[0].view.len / 4, held[1].view.buf, words, &bad) < 0)
        PyErr_Format(PyExc_ValueError, "expected ids in [0, %zd), found %d", words * 32,
                     (int)bad);
    else
        result = Py_NewRef(Py_None);
done:
    release(held, 2);
    return result;
}

PyDoc_STRVAR(scatter_pairs_doc,
"scatter_pairs(ids, states, plain_ids, plain_lengths, chain, table, repeats, repeated,\n"
"              out_bits, out_codes, out_palette) -> (kept, distinct)\n"
"\n"
"A large row as a table over the vocabulary: the int32 buffer table (one entry a token)\n"
"is cleared; each ids[i] gets states[i]; each plain_ids[k] gets chain[plain_lengths[k]]\n"
"(a plain token's state read off the chain of plain bytes by its length); each\n"
"repeats[k] the entry of repeated[k] (a token repeating another's bytes). The tokens\n"
"whose entry is not DEAD (0) are written as bits to the uint32 buffer out_bits (bit\n"
"i % 32 of word i // 32, every word of it written), and counted (kept). When the row's\n"
"states are at most 255 distinct ones, the table is also written as one uint8 code a\n"
"token to out_codes (as long as the table), code c standing for out_palette[c] (int32,\n"
"256 entries; code 0 for DEAD), and distinct is their count; else distinct is -1 and\n"
"out_codes is left unfinished. O(pairs + vocabulary), the GIL released. ValueError for\n"
"an id outside the table or a length outside the chain.");

#define PALETTE_SLOTS 1024 /* a power of two, well above 255 */

/* The codes of a row's states (at most 255 of them, code 0 for DEAD): a state's code
 * found in a small open-addressing map, its state written to the palette. */
typedef struct {
    int32_t slot_state[PALETTE_SLOTS];
    uint8_t slot_code[PALETTE_SLOTS]; /* 0: an empty slot */
    int32_t *palette;                 /* 256 entries */
    Py_ssize_t distinct;              /* codes given, DEAD's included */
} Palette;

static void palette_start(Palette *p, int32_t *palette) {
    memset(p->slot_code, 0, sizeof(p->slot_code));
    p->palette = palette;
    palette[0] = DEAD;
    p->distinct = 1;
}

/* The code of a live `state`, given it the first time; -1 when 255 states have theirs
 * already. With `known` (the state's code, for the chain's states) the state takes that
 * code if it has none yet, and the palette is left to the caller. */
static int palette_code(Palette *p, int32_t state, int known) {
    uint32_t slot = ((uint32_t)state * 2654435761u) & (PALETTE_SLOTS - 1);
    while (p->slot_code[slot] && p->slot_state[slot] != state)
        slot = (slot + 1) & (PALETTE_SLOTS - 1);
    if (p->slot_code[slot]) return p->slot_code[slot];
    if (known > 0) {
        p->slot_state[slot] = state;
        p->slot_code[slot] = (uint8_t)known;
        return known;
    }
    if (p->distinct == 256) return -1;
    p->slot_state[slot] = state;
    p->slot_code[slot] = (uint8_t)p->distinct;
    p->palette[p->distinct] = state;
    return (int)p->distinct++;
}

/* The bits of the tokens whose code is not 0, every word of out_bits written; returns
 * their count. */
static Py_ssize_t bits_of_codes(const uint8_t *codes, Py_ssize_t size, uint32_t *out_bits,
                                Py_ssize_t words) {
    memset(out_bits, 0, (size_t)words * 4);
    for (Py_ssize_t first = 0; first < size; first += 32) {
        Py_ssize_t stop = first + 32 < size ? first + 32 : size;
        uint32_t bits = 0;
        for (Py_ssize_t token = first; token < stop; token++)
            bits |= (uint32_t)(codes[token] != 0) << (token - first);
        out_bits[first / 32] = bits;
    }
    return count_word_bits(out_bits, words);
}

/* The core of scatter_pairs (see its docstring), without the GIL: 1 for an id or a
 * length out of range, else 0 with *kept and *distinct set. */
int scatter_core(const int32_t *ids, const int32_t *states, Py_ssize_t count,
                 const int32_t *plain_ids, const int32_t *plain_lengths, Py_ssize_t plain,
                 const int32_t *chain, Py_ssize_t links, int32_t *table, Py_ssize_t size,
                 const int32_t *repeat, const int32_t *original, Py_ssize_t repeats,
                 uint32_t *out_bits, Py_ssize_t words, uint8_t *codes, int32_t *palette,
                 Py_ssize_t *kept_out, Py_ssize_t *distinct_out) {
    int bad = 0;
    Py_ssize_t kept = 0, distinct = 0;
    memset(table, 0, (size_t)size * 4);
    for (Py_ssize_t i = 0; i < count && !bad; i++) {
        if (ids[i] < 0 || ids[i] >= size)
            bad = 1;
        else
            table[ids[i]] = states[i];
    }
    for (Py_ssize_t k = 0; k < plain && !bad; k++) {
        int32_t id = plain_ids[k], length = plain_lengths[k];
        if (id < 0 || id >= size || length < 0 || length >= links)
            bad = 1;
        else
            table[id] = chain[length];
    }
    for (Py_ssize_t k = 0; k < repeats && !bad; k++) {
        if (repeat[k] < 0 || repeat[k] >= size || original[k] < 0 || original[k] >= size)
            bad = 1;
        else
            table[repeat[k]] = table[original[k]];
    }
    if (!bad) {
        memset(out_bits, 0, (size_t)words * 4);
        for (Py_ssize_t first = 0; first < size; first += 32) {
            Py_ssize_t stop = first + 32 < size ? first + 32 : size;
            uint32_t bits = 0;
            for (Py_ssize_t token = first; token < stop; token++)
                bits |= (uint32_t)(table[token] != DEAD) << (token - first);
            out_bits[first / 32] = bits;
        }
        kept = count_word_bits(out_bits, words);
        /* the codes, through a map of the states met */
        Palette map;
        palette_start(&map, palette);
        int32_t last_state = DEAD;
        uint8_t last_code = 0;
        int overflow = 0;
        for (Py_ssize_t token = 0; token < size; token++) {
            int32_t state = table[token];
            if (state != last_state && state == DEAD) {
                last_state = DEAD;
                last_code = 0;
            } else if (state != last_state) { /* runs of one state are common: no lookup */
                int code = palette_code(&map, state, 0);
                if (code < 0) { /* too many: the caller keeps the int32 table */
                    overflow = 1;
                    break;
                }
                last_state = state;
                last_code = (uint8_t)code;
            }
            codes[token] = last_code;
        }
        distinct = overflow ? -1 : map.distinct;
    }
    *kept_out = kept;
    *distinct_out = distinct;
    return bad;
}

static PyObject *scatter_pairs(PyObject *module, PyObject *args) {
    (void)module;
    enum { COUNT = 11 };
    PyObject *objects[COUNT];
    Held held[COUNT];
    memset(held, 0, sizeof(held));
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOO:scatter_pairs", &objects[0], &objects[1],
                          &objects[2], &objects[3], &objects[4], &objects[5], &objects[6],
                          &objects[7], &objects[8], &objects[9], &objects[10]))
        return NULL;
    if (take(objects[0], &held[0], 0, 4, 0, "ids") < 0) goto done;
    Py_ssize_t count = held[0].view.len / 4;
    if (take(objects[1], &held[1], 0, 4, count, "states") < 0) goto done;
    if (take(objects[2], &held[2], 0, 4, 0, "plain_ids") < 0) goto done;
    Py_ssize_t plain = held[2].view.len / 4;
    if (take(objects[3], &held[3], 0, 4, plain, "plain_lengths") < 0) goto done;
    if (take(objects[4], &held[4], 0, 4, 0, "chain") < 0) goto done;
    Py_ssize_t links = held[4].view.len / 4;
    if (take(objects[5], &held[5], 1, 4, 0, "table") < 0) goto done;
    Py_ssize_t size = held[5].view.len / 4;
    if (take(objects[6], &held[6], 0, 4, 0, "repeats") < 0) goto done;
    Py_ssize_t repeats = held[6].view.len / 4;
    if (take(objects[7], &held[7], 0, 4, repeats, "repeated") < 0) goto done;
    if (take(objects[8], &held[8], 1, 4, (size + 31) / 32, "out_bits") < 0) goto done;
    if (take(objects[9], &held[9], 1, 1, size, "out_codes") < 0) goto done;
    if (take(objects[10], &held[10], 1, 4, 256, "out_palette") < 0) goto done;
    const int32_t *ids = held[0].view.buf, *states = held[1].view.buf;
    const int32_t *plain_ids = held[2].view.buf, *plain_lengths = held[3].view.buf;
    const int32_t *chain = held[4].view.buf;
    int32_t *table = held[5].view.buf;
    const int32_t *repeat = held[6].view.buf, *original = held[7].view.buf;
    uint32_t *out_bits = held[8].view.buf;
    Py_ssize_t words = held[8].view.len / 4;
    uint8_t *codes = held[9].view.buf;
    int32_t *palette = held[10].view.buf;
    Py_ssize_t kept = 0, distinct = 0;
    int bad;
    Py_BEGIN_ALLOW_THREADS
    bad = scatter_core(ids, states, count, plain_ids, plain_lengths, plain, chain, links, table,
                       size, repeat, original, repeats, out_bits, words, codes, palette, &kept,
                       &distinct);
    Py_END_ALLOW_THREADS
    if (bad)
        PyErr_Format(PyExc_ValueError,
                     "expected token ids in [0, %zd) and plain lengths in [0, %zd)", size,
                     links);
    else
        result = Py_BuildValue("(nn)", kept, distinct);
done:
    release(held, COUNT);
    return result;
}

PyDoc_STRVAR(plain_template_doc,
"plain_template(plain_ids, plain_lengths, shape, out_codes, out_bits) -> kept\n"
"\n"
"The plain tokens' part of a row inside a string, for every chain of one shape: the\n"
"uint8 buffer out_codes (one code a token of the vocabulary, its length) is cleared,\n"
"then each plain_ids[k] gets shape[plain_lengths[k]], the code of the chain's state after\n"
"that many plain bytes (0: DEAD; else 1 + the index of that state among the chain's\n"
"distinct live ones). The tokens of a code other than 0 are written as bits to the\n"
"uint32 buffer out_bits (bit i % 32 of word i // 32, every word of it written) and\n"
"counted (kept). O(plain tokens + vocabulary), the GIL released. ValueError for an id\n"
"outside out_codes or a length outside [1, len(shape)).");

static PyObject *plain_template(PyObject *module, PyObject *args) {
    (void)module;
    enum { COUNT = 5 };
    PyObject *objects[COUNT];
    Held held[COUNT];
    memset(held, 0, sizeof(held));
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOOO:plain_template", &objects[0], &objects[1], &objects[2],
                          &objects[3], &objects[4]))
        return NULL;
    if (take(objects[0], &held[0], 0, 4, 0, "plain_ids") < 0) goto done;
    Py_ssize_t plain = held[0].view.len / 4;
    if (take(objects[1], &held[1], 0, 4, plain, "plain_lengths") < 0) goto done;
    if (take(objects[2], &held[2], 0, 1, 0, "shape") < 0) goto done;
    Py_ssize_t links = held[2].view.len;
    if (take(objects[3], &held[3], 1, 1, 0, "out_codes") < 0) goto done;
    Py_ssize_t size = held[3].view.len;
    if (take(objects[4], &held[4], 1, 4, (size + 31) / 32, "out_bits") < 0) goto done;
    const int32_t *plain_ids = held[0].view.buf, *plain_lengths = held[1].view.buf;
    const uint8_t *shape = held[2].view.buf;
    uint8_t *codes = held[3].view.buf;
    uint32_t *out_bits = held[4].view.buf;
    Py_ssize_t words = held[4].view.len / 4;
    int bad = 0;
    Py_ssize_t kept = 0;
    Py_BEGIN_ALLOW_THREADS
    memset(codes, 0, (size_t)size);
    for (Py_ssize_t k = 0; k < plain && !bad; k++) {
        int32_t id = plain_ids[k], length = plain_lengths[k];
        if (id < 0 || id >= size || length < 1 || length >= links)
            bad = 1;
        else
            codes[id] = shape[length];
    }
    if (!bad) kept = bits_of_codes(codes, size, out_bits, words);
    Py_END_ALLOW_THREADS
    if (bad)
        PyErr_Format(PyExc_ValueError,
                     "expected plain token ids in [0, %zd) and lengths in [1, %zd)", size,
                     links);
    else
        result = PyLong_FromSsize_t(kept);
done:
    release(held, COUNT);
    return result;
}

PyDoc_STRVAR(by_byte_doc,
"tokens_by_byte(ids, lengths, token_bytes, out_bits)\n"
"\n"
"Set bit id % 32 of word id // 32 of row b of out_bits (uint32, 256 x words, zeroed by\n"
"the caller) for every byte b among the first lengths[k] bytes of row id of token_bytes\n"
"(uint8, 2-D: one zero-padded row a token of the vocabulary), id = ids[k]: the tokens\n"
"`ids` by the bytes they hold.");

static PyObject *tokens_by_byte(PyObject *module, PyObject *args) {
    (void)module;
    enum { COUNT = 4 };
    PyObject *objects[COUNT];
    Held held[COUNT];
    memset(held, 0, sizeof(held));
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOO:tokens_by_byte", &objects[0], &objects[1], &objects[2],
                          &objects[3]))
        return NULL;
    if (take(objects[0], &held[0], 0, 4, 0, "ids") < 0) goto done;
    Py_ssize_t count = held[0].view.len / 4;
    if (take(objects[1], &held[1], 0, 4, count, "lengths") < 0) goto done;
    if (take(objects[2], &held[2], 0, 1, 0, "token_bytes") < 0) goto done;
    if (take(objects[3], &held[3], 1, 4, 256, "out_bits") < 0) goto done;
    const Py_buffer *matrix = &held[2].view;
    Py_ssize_t words = held[3].view.len / 4 / 256;
    if (matrix->ndim != 2 || held[3].view.len != 256 * words * 4) {
        PyErr_SetString(PyExc_ValueError, "expected a row of bytes a token and 256 rows out");
        goto done;
    }
    Py_ssize_t rows = matrix->shape[0], width = matrix->shape[1];
    const int32_t *ids = held[0].view.buf, *lengths = held[1].view.buf;
    const uint8_t *data = matrix->buf;
    uint32_t *out = held[3].view.buf;
    for (Py_ssize_t k = 0; k < count; k++) {
        int32_t id = ids[k], length = lengths[k];
        if (id < 0 || id >= rows || id >= words * 32 || length < 0 || length > width) {
            PyErr_Format(PyExc_ValueError, "expected ids below %zd and lengths up to %zd",
                         rows < words * 32 ? rows : words * 32, width);
            goto done;
        }
        for (int32_t j = 0; j < length; j++)
            out[(Py_ssize_t)data[id * width + j] * words + (id >> 5)] |= (uint32_t)1 << (id & 31);
    }
    result = Py_NewRef(Py_None);
done:
    release(held, COUNT);
    return result;
}

/* A token's code in a row on its template: its own where `changed` (NULL: every code
 * is the row's own) marks it set, else the template's. */
static inline uint8_t code_now(const uint8_t *codes, const uint8_t *template_codes,
                               const uint32_t *changed, int32_t token) {
    if (!changed || (changed[token >> 5] >> (token & 31) & 1)) return codes[token];
    return template_codes[token];
}

/* Give `token`, whose code is `old`, the code `code`, keeping its bit and the count of
 * kept tokens right (and its mark in `changed`, where given); set_code reads `old`. */
static inline void set_code_over(uint8_t *codes, uint32_t *changed, uint32_t *bits,
                                 Py_ssize_t *kept, int32_t token, uint8_t old, uint8_t code) {
    uint32_t bit = (uint32_t)1 << (token & 31);
    codes[token] = code;
    if (changed) changed[token >> 5] |= bit;
    if (old && !code) {
        bits[token >> 5] &= ~bit;
        (*kept)--;
    } else if (!old && code) {
        bits[token >> 5] |= bit;
        (*kept)++;
    }
}

static void set_code(uint8_t *codes, const uint8_t *template_codes, uint32_t *changed,
                     uint32_t *bits, Py_ssize_t *kept, int32_t token, uint8_t code) {
    set_code_over(codes, changed, bits, kept, token,
                  code_now(codes, template_codes, changed, token), code);
}

/* The core of scatter_on_template (see its docstring), without the GIL: FINE with *kept
 * and *distinct set (distinct -1 past 255 states: TOO_MANY), or BAD_SHAPE, BAD_ID.
 * template_kept: the template's bits set, where known (else -1: counted here). Where
 * `changed` (bits over the vocabulary) is given, `codes` holds only the codes set over
 * the template's, each marked there (code_now reads a token's code). Where `dropped`
 * (bits over the vocabulary; `changed` NULL) is given, those plain tokens are dropped
 * from the template first (their bits cleared: their codes then stand for nothing), and
 * the pairs' plain tokens take their states too (a diverted chain's: see _row_visit.c). */
int template_core(const int32_t *ids, const int32_t *states, Py_ssize_t count,
                  const int32_t *chain, const uint8_t *shape, Py_ssize_t links,
                  const uint8_t *template_codes, const uint32_t *template_bits,
                  Py_ssize_t template_kept, const uint32_t *plain_bits, Py_ssize_t size,
                  const int32_t *repeat, const int32_t *original, Py_ssize_t repeats,
                  uint8_t *codes, uint32_t *changed, const uint32_t *dropped,
                  uint32_t *out_bits, Py_ssize_t out_words, int32_t *palette,
                  Py_ssize_t *kept_out, Py_ssize_t *distinct_out) {
    int status = FINE;
    Py_ssize_t kept = 0;
    Py_ssize_t words = (size + 31) / 32;
    /* the chain's states take their codes: code shape[k] for chain[k] */
    Palette map;
    palette_start(&map, palette);
    uint8_t named[256];
    memset(named, 0, sizeof(named));
    int top = 0;
    for (Py_ssize_t k = 1; k < links && status == FINE; k++) {
        int code = shape[k];
        int32_t state = chain[k];
        if ((code == 0) != (state == DEAD) || (code && named[code] && palette[code] != state))
            status = BAD_SHAPE;
        else if (code && !named[code]) {
            named[code] = 1;
            palette[code] = state;
            palette_code(&map, state, code); /* a state named twice keeps its first code */
            if (code > top) top = code;
        }
    }
    for (int code = 1; code <= top; code++)
        if (!named[code]) palette[code] = DEAD; /* a code no length has */
    map.distinct = top + 1;
    if (status == FINE) {
        if (changed) /* the codes set are marked: the template's are not copied */
            memset(changed, 0, (size_t)words * 4);
        else
            memcpy(codes, template_codes, (size_t)size);
        memcpy(out_bits, template_bits, (size_t)words * 4);
        if (out_words > words) memset(out_bits + words, 0, (size_t)(out_words - words) * 4);
        if (size % 32) out_bits[words - 1] &= ((uint32_t)1 << (size % 32)) - 1;
        kept = template_kept >= 0 ? template_kept : count_word_bits(out_bits, words);
        if (dropped && !changed) /* their bits alone: a dropped token's code is read no more */
            for (Py_ssize_t word = 0; word < words; word++) {
                uint32_t gone = out_bits[word] & dropped[word];
                out_bits[word] &= ~gone;
                kept -= __builtin_popcount(gone);
            }
    }
    for (Py_ssize_t i = 0; i < count && status == FINE; i++) {
        int32_t id = ids[i], state = states[i];
        if (id < 0 || id >= size) {
            status = BAD_ID;
        } else if (dropped || !(plain_bits[id >> 5] >> (id & 31) & 1)) {
            int code = state == DEAD ? 0 : palette_code(&map, state, 0);
            if (dropped && !changed && (dropped[id >> 5] >> (id & 31) & 1))
                codes[id] = 0; /* its template code stands no more: its bit is clear */
            /* code_now, but a token that is not plain has no template code: the template's
             * (49 KB, seldom in cache) is not read for it */
            int plain = plain_bits[id >> 5] >> (id & 31) & 1;
            uint8_t old = !changed || (changed[id >> 5] >> (id & 31) & 1) ? codes[id]
                          : plain                                          ? template_codes[id]
                                                                           : 0;
            if (code < 0)
                status = TOO_MANY;
            else
                set_code_over(codes, changed, out_bits, &kept, id, old, (uint8_t)code);
        }
    }
    for (Py_ssize_t k = 0; k < repeats && status == FINE; k++) {
        if (repeat[k] < 0 || repeat[k] >= size || original[k] < 0 || original[k] >= size)
            status = BAD_ID;
        else
            set_code(codes, template_codes, changed, out_bits, &kept, repeat[k],
                     code_now(codes, template_codes, changed, original[k]));
    }
    *kept_out = kept;
    *distinct_out = status == TOO_MANY ? -1 : map.distinct;
    return status;
}

PyDoc_STRVAR(scatter_on_template_doc,
"scatter_on_template(ids, states, chain, shape, template_codes, template_bits,\n"
"                    plain_bits, repeats, repeated, out_codes, out_bits, out_palette)\n"
"    -> (kept, distinct)\n"
"\n"
"scatter_pairs() of a row whose plain tokens' part is a template (plain_template() of\n"
"`shape`, as template_codes and template_bits, one code a token and its bits): the row\n"
"is written as one uint8 code a token to out_codes (as long as template_codes), code c\n"
"standing for out_palette[c] (int32, 256 entries; code 0 for DEAD). out_codes and\n"
"out_bits start as copies of the template; code shape[k] stands for chain[k] (k >= 1;\n"
"shape as long as chain, and 0 exactly where chain holds DEAD). Then each ids[i] that\n"
"is not a plain token (its bit clear in the uint32 buffer plain_bits: a plain token\n"
"keeps its state off the chain, as in scatter_pairs) gets the code of states[i], a new\n"
"one after the chain's for a state not met yet; then each repeats[k] the code of\n"
"repeated[k]. Returns the count of tokens not DEAD (kept) and of codes (distinct, DEAD's\n"
"included), or distinct -1 when the row has more than 255 live states (out_codes and\n"
"out_bits then left unfinished). O(vocabulary / 8 + pairs), the GIL released.\n"
"ValueError for an id outside the table or a shape that does not code the chain.");

static PyObject *scatter_on_template(PyObject *module, PyObject *args) {
    (void)module;
    enum { COUNT = 12 };
    PyObject *objects[COUNT];
    Held held[COUNT];
    memset(held, 0, sizeof(held));
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOO:scatter_on_template", &objects[0], &objects[1],
                          &objects[2], &objects[3], &objects[4], &objects[5], &objects[6],
                          &objects[7], &objects[8], &objects[9], &objects[10], &objects[11]))
        return NULL;
    if (take(objects[0], &held[0], 0, 4, 0, "ids") < 0) goto done;
    Py_ssize_t count = held[0].view.len / 4;
    if (take(objects[1], &held[1], 0, 4, count, "states") < 0) goto done;
    if (take(objects[2], &held[2], 0, 4, 0, "chain") < 0) goto done;
    Py_ssize_t links = held[2].view.len / 4;
    if (take(objects[3], &held[3], 0, 1, links, "shape") < 0) goto done;
    if (take(objects[4], &held[4], 0, 1, 0, "template_codes") < 0) goto done;
    Py_ssize_t size = held[4].view.len, words = (size + 31) / 32;
    if (take(objects[5], &held[5], 0, 4, words, "template_bits") < 0) goto done;
    if (take(objects[6], &held[6], 0, 4, words, "plain_bits") < 0) goto done;
    if (take(objects[7], &held[7], 0, 4, 0, "repeats") < 0) goto done;
    Py_ssize_t repeats = held[7].view.len / 4;
    if (take(objects[8], &held[8], 0, 4, repeats, "repeated") < 0) goto done;
    if (take(objects[9], &held[9], 1, 1, size, "out_codes") < 0) goto done;
    if (take(objects[10], &held[10], 1, 4, words, "out_bits") < 0) goto done;
    if (take(objects[11], &held[11], 1, 4, 256, "out_palette") < 0) goto done;
    if (held[3].view.len != links) {
        PyErr_Format(PyExc_ValueError, "expected a shape as long as the chain (%zd), found %zd",
                     links, held[3].view.len);
        goto done;
    }
    const int32_t *ids = held[0].view.buf, *states = held[1].view.buf;
    const int32_t *chain = held[2].view.buf;
    const uint8_t *shape = held[3].view.buf, *template_codes = held[4].view.buf;
    const uint32_t *template_bits = held[5].view.buf, *plain_bits = held[6].view.buf;
    const int32_t *repeat = held[7].view.buf, *original = held[8].view.buf;
    uint8_t *codes = held[9].view.buf;
    uint32_t *out_bits = held[10].view.buf;
    Py_ssize_t out_words = held[10].view.len / 4;
    int32_t *palette = held[11].view.buf;
    Py_ssize_t kept = 0, distinct = 0;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = template_core(ids, states, count, chain, shape, links, template_codes,
                           template_bits, -1, plain_bits, size, repeat, original, repeats, codes,
                           NULL, NULL, out_bits, out_words, palette, &kept, &distinct);
    Py_END_ALLOW_THREADS
    if (status == BAD_SHAPE)
        PyErr_SetString(PyExc_ValueError,
                        "expected a shape coding the chain: 0 exactly for DEAD, one state a "
                        "code");
    else if (status == BAD_ID)
        PyErr_Format(PyExc_ValueError, "expected token ids in [0, %zd)", size);
    else
        result = Py_BuildValue("(nn)", kept, distinct);
done:
    release(held, COUNT);
    return result;
}

/* The core of first_byte_split (see its docstring): `looping` holds the four lists of
 * 256 entries each; counts gets (looping, walked, unread). -1 with ValueError set where a
 * target lies outside the table or its row is not built. */
int split_first_bytes(const int32_t *table, Py_ssize_t states, int32_t state,
                      const uint8_t *plain, Py_ssize_t plains, uint8_t *by_first,
                      int32_t *looping, Py_ssize_t counts[3]) {
    const int32_t *row = table + (Py_ssize_t)state * 256;
    int32_t *walked_bytes = looping + 256, *walked_states = looping + 512, *unread = looping + 768;
    int32_t targets[256];
    Py_ssize_t looped = 0, walked = 0, left = 0;
    for (Py_ssize_t i = 0; i < plains; i++) {
        int32_t target = row[plain[i]];
        targets[i] = target;
        if (target == DEAD) continue;
        if (target < 0 || target >= states || table[(Py_ssize_t)target * 256] == UNBUILT) {
            PyErr_Format(PyExc_ValueError, "expected built rows of the targets, found %d",
                         (int)target);
            return -1;
        }
        Py_ssize_t at = looped; /* where it goes in the sorted list of looping states */
        while (at > 0 && looping[at - 1] > target) at--;
        if (at > 0 && looping[at - 1] == target) continue; /* listed already */
        const int32_t *next = table + (Py_ssize_t)target * 256;
        int loops = 1;
        for (Py_ssize_t j = 0; j < plains && loops; j++) loops = next[plain[j]] == target;
        if (!loops) continue;
        memmove(looping + at + 1, looping + at, (size_t)(looped - at) * sizeof(int32_t));
        looping[at] = target;
        looped++;
    }
    memset(by_first, 0, 256);
    for (Py_ssize_t i = 0; i < plains; i++) {
        int32_t target = targets[i];
        Py_ssize_t code = 0;
        for (Py_ssize_t k = 0; k < looped && !code; k++)
            if (looping[k] == target) code = k + 1;
        if (code) {
            by_first[plain[i]] = (uint8_t)code;
            continue;
        }
        unread[left++] = plain[i];
        if (target != DEAD) {
            walked_bytes[walked] = plain[i];
            walked_states[walked++] = target;
        }
    }
    counts[0] = looped;
    counts[1] = walked;
    counts[2] = left;
    return 0;
}

PyDoc_STRVAR(first_byte_split_doc,
"first_byte_split(table, state, plain, by_first, lists) -> (looping, walked, unread)\n"
"\n"
"Part the plain bytes (uint8 `plain`) of `state` by where they lead in the int32 table,\n"
"whose rows of those targets must be built: `looping` states stay where they are on\n"
"every plain byte. Writes by_first (uint8[256]): for a plain byte leading to the k-th\n"
"looping state (in increasing order), k + 1; 0 for every other byte. Writes the rows\n"
"of `lists` (int32, 4 x 256): 0, the looping states; 1 and 2, the plain bytes that lead\n"
"to another live state and those states; 3, the plain bytes by_first leaves at 0 (those\n"
"and the dead ones). Returns the three counts. ValueError where a target lies outside\n"
"the table or its row is not built.");

static PyObject *first_byte_split(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *objects[4];
    Py_ssize_t state;
    if (!PyArg_ParseTuple(args, "OnOOO:first_byte_split", &objects[0], &state, &objects[1],
                          &objects[2], &objects[3]))
        return NULL;
    Held held[4];
    memset(held, 0, sizeof(held));
    PyObject *result = NULL;
    if (take(objects[0], &held[0], 0, 4, 256, "the table") < 0) goto done;
    if (take(objects[1], &held[1], 0, 1, 0, "plain") < 0) goto done;
    if (take(objects[2], &held[2], 1, 1, 256, "by_first") < 0) goto done;
    if (take(objects[3], &held[3], 1, 4, 4 * 256, "lists") < 0) goto done;
    const int32_t *table = held[0].view.buf;
    Py_ssize_t states = held[0].view.len / 4 / 256;
    const uint8_t *plain = held[1].view.buf;
    Py_ssize_t plains = held[1].view.len;
    uint8_t *by_first = held[2].view.buf;
    int32_t *looping = held[3].view.buf;
    if (state <= DEAD || state >= states) {
        PyErr_Format(PyExc_ValueError, "expected a live state below %zd, found %zd", states,
                     state);
        goto done;
    }
    if (plains > 256) {
        PyErr_Format(PyExc_ValueError, "expected at most 256 plain bytes, found %zd", plains);
        goto done;
    }
    Py_ssize_t counts[3];
    if (split_first_bytes(table, states, (int32_t)state, plain, plains, by_first, looping,
                          counts) < 0)
        goto done;
    result = Py_BuildValue("(nnn)", counts[0], counts[1], counts[2]);
done:
    release(held, 4);
    return result;
}

PyDoc_STRVAR(state_after_doc,
"state_after(ids, states, token, /) -> int\n--\n\n"
"The state `token` leads to in a row held as two bytes objects of int32 (`ids`\n"
"ascending, `states` beside them, as a visit answers), or 0 (DEAD) where the row lacks\n"
"it. A binary search: O(log n), with no array made (see index._Row.next_state).");

static PyObject *state_after(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "expected state_after(ids: bytes, states: bytes, token)");
        return NULL;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    if (size % 4 != 0 || PyBytes_GET_SIZE(args[1]) != size) {
        PyErr_Format(PyExc_ValueError,
                     "expected ids and states of one length in int32 items, found %zd and %zd "
                     "bytes", size, PyBytes_GET_SIZE(args[1]));
        return NULL;
    }
    long long token = PyLong_AsLongLong(args[2]);
    if (token == -1 && PyErr_Occurred()) return NULL;
    const int32_t *ids = (const int32_t *)PyBytes_AS_STRING(args[0]);
    const int32_t *states = (const int32_t *)PyBytes_AS_STRING(args[1]);
    Py_ssize_t low = 0, high = size / 4; /* the first id >= token lies in [low, high] */
    while (low < high) {
        Py_ssize_t middle = low + (high - low) / 2;
        if ((long long)ids[middle] < token) low = middle + 1;
        else high = middle;
    }
    return PyLong_FromLong(low < size / 4 && ids[low] == token ? states[low] : DEAD);
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, walk_doc},
    {"sort_pairs", sort_pairs, METH_VARARGS, sort_pairs_doc},
    {"scatter_pairs", scatter_pairs, METH_VARARGS, scatter_pairs_doc},
    {"pack_bits", pack_bits, METH_VARARGS, pack_bits_doc},
    {"tokens_by_byte", tokens_by_byte, METH_VARARGS, by_byte_doc},
    {"plain_template", plain_template, METH_VARARGS, plain_template_doc},
    {"scatter_on_template", scatter_on_template, METH_VARARGS, scatter_on_template_doc},
    {"first_byte_split", first_byte_split, METH_VARARGS, first_byte_split_doc},
    {"state_after", (PyCFunction)(void (*)(void))state_after, METH_FASTCALL, state_after_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "formcast._trie_walk",
    "The walk of a token trie through a byte automaton's table, and the sort and the "
    "packing of its rows, in C (see index.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__trie_walk(void) {
    PyObject *module = PyModule_Create(&module_def);
    if (module && add_visitor_type(module) < 0) Py_CLEAR(module);
    return module;
}
