/* formcast._subset: the subset construction of a lazy byte DFA's row, in C.
 *
 * formcast.automaton.lazy builds a DFA state's row the first time a walk reaches it: the
 * byte edges of the state's NFA members, the epsilon closure of every target, and the
 * union of those closures over each run of bytes. In Python that costs ~50-600 us a row,
 * most of it in closures through counted repeats and subroutine calls (virtual copies of
 * a template, see formcast.automaton.nfa.Block). This module does the same work on the
 * same NFA, with the same meaning, in C: a virtual state's edges are its template
 * state's, shifted into its copy, plus the repeat's glue at a copy's end and the edges a
 * parent attached to that id (Nfa.extras), resolved down the nesting of blocks.
 *
 * It is optional: lazy.py keeps its Python construction where this module was not built,
 * and the tests compare both on random patterns (tests/automaton/test_native_subset.py).
 *
 * Nfa(byte_offsets, byte_lo, byte_hi, byte_dst, eps_offsets, eps_dst, reads, blocks,
 *     extra_sources, extra_offsets, extra_targets, final)
 *   every array an int64 buffer: the CSR of the concrete states' byte and epsilon edges
 *   (formcast.automaton.lazy._EdgeIndex), reads[s] = 1 where concrete s has a byte edge,
 *   blocks as rows of the 11 fields of Block (sorted by base), the extras as a CSR over
 *   sorted sources. The buffers are held (not copied) for the object's life.
 * .segments(members) -> [(lo, hi, frozenset of NFA ids)]: the row of the DFA state whose
 *   members are given, as disjoint byte runs in ascending order (adjacent runs with equal
 *   successors joined); bytes in no run lead to the dead state.
 * .build_rows(states, table, accepting, sets) -> next: the rows of the DFA states
 *   `states` (int32), in order, written into `table` (the automaton's int32 table,
 *   capacity rows of 256), each state whose row is still UNBUILT there. The object holds
 *   its automaton's DFA states, interned by content: those `sets` (the automaton's list,
 *   one entry a state) gained from Python since the last call (frozensets of NFA ids)
 *   are taken in first; a row's new successor states are appended to `sets` as None,
 *   with their acceptance (whether the final state is a member) written to `accepting`
 *   (a byte a table row) and their rows made UNBUILT. No Python object is made a state.
 *   Stops before a row when the table might lack room for its new states (a row adds at
 *   most 256; those not interned yet count) and returns the index of that state
 *   (len(states) when all are built).
 *   The same construction of one row is exported to formcast._trie_walk as the capsule
 *   `_build_state`, so that a walk builds the rows it reaches without leaving C.
 * .plain_chain(chain, filled, plain, table, accepting, sets) -> (filled, parted):
 *   chain (int32) holds chain[0 .. filled) (filled >= 1); from there, chain[k] is the one
 *   state all the bytes `plain` (uint8) lead to from chain[k - 1], whose row is built as
 *   by build_rows; DEAD stays DEAD and a state leading to itself stays put. Stops where
 *   the plain bytes part ways (parted 1: chain[filled - 1]'s row sends them to different
 *   states), where the table may lack room for a row's new states (the caller grows it
 *   and calls again from `filled`), or at the chain's end.
 * .step(state, byte, table, accepting, sets) -> target: the entry of `state`'s row at
 *   `byte`, computed alone and kept where the row is not built (the table is left as it
 *   is; a new state is registered as build_rows registers it); -2 where the table might
 *   lack room for it. Exported to formcast._trie_walk as the capsule `_step_state`: a
 *   walk reads a few children's entries below a trie node without building the row.
 * .kept_step(state, byte) -> target: the entry step kept there, or -1 (computes nothing).
 * .plain_step(state, plain, table, accepting, sets) -> target: the one state every byte
 *   `plain` (32 bytes of flags) leads to, read off the edges where the row is not built
 *   (nothing but the target registered); -3 where they part ways. Exported to
 *   formcast._trie_walk as the capsule `_plain_step`: a string's chain past the links
 *   its walk reads.
 * .live_bytes(state, table, accepting, sets) -> bytes: 32 bytes of flags, the bytes on
 *   which `state` leads to a live state, read off the edges where the row is not built
 *   (nothing registered). Exported to formcast._pushdown as the capsule `_live_bytes`:
 *   what a machine state reads, for a frame whose row no walk may ask for.
 * .closure(state) -> frozenset: the "important" states (a byte edge out, or the final
 *   state) reachable from `state` by epsilon edges.
 * .members(state) -> frozenset: the NFA members of a DFA state held here.
 * .find(members) -> state: the DFA state held here with these members, or -1.
 *
 * Closures are memoized per NFA state for the object's life; the caller serialises calls
 * (lazy.py builds rows under the automaton's lock). Ids out of range raise ValueError. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_int_tables.h"

#define VIRTUAL_BASE ((int64_t)1 << 40)
#define BLOCK_FIELDS 11
#define DESCENT_CACHE 8 /* depths of nested blocks whose last block a descent keeps */
#define BUFFERS 11

typedef struct {
    int64_t base, span, copies, s0, size_c, v0, x_start, x_end, low, bounded, exit;
} Block;

/* -- the NFA ----------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    Py_buffer views[BUFFERS];
    int held;
    const int64_t *boff, *blo, *bhi, *bdst, *eoff, *edst, *reads;
    Py_ssize_t n;           /* concrete states */
    Py_ssize_t byte_edges;  /* entries of blo/bhi/bdst */
    Py_ssize_t eps_edges;   /* entries of edst */
    const Block *blocks;
    Py_ssize_t nblocks;
    int64_t *bases; /* blocks[i].base, apart: a bisection reads 8 bytes a step, not 88 */
    /* the extras whose source lies in block i's ids: extra_src[extra_first[i] ..
     * extra_stop[i]) (a block's ids are one range, and the sources are sorted) */
    Py_ssize_t *extra_first, *extra_stop;
    /* the block found last at each depth of a descent (a state's neighbours, met next,
     * mostly lie in the same copies); NULL: none yet */
    const Block *found_at[DESCENT_CACHE];
    const int64_t *extra_src, *extra_off, *extra_dst;
    Py_ssize_t nextras;
    int64_t final;
    Map closures; /* state -> offset in pool: pool[offset] = size, then the members */
    /* DFA state -> utf8_steps' answer, kept (a free key's is asked at each of its object's
     * keys): an offset in utf8_pool (the target, then the steps), or -1 (0 answered) */
    Map utf8_known;
    Vec utf8_pool;
    Map steps; /* (DFA state << 8 | byte) -> the state step_state found there */
    Map plain_steps; /* DFA state -> plain_step's answer there */
    Vec pool;
    /* a concrete state's closure offset (-1: not computed) and the stamp of the search
     * that met it: concrete ids are dense, and most states are concrete, so these
     * arrays stand in for the hash map and the seen set (a cache miss each, and hashing,
     * at every closure asked for and every state a search meets) */
    int64_t *concrete_closures;
    uint32_t *concrete_seen, concrete_stamp;
    /* scratch */
    Seen seen;
    Vec stack, found, eps, edges, chain, join;
    Vec runs, succ, targets; /* a row's runs (see compute_runs) */
    Vec clipped;                /* plain_step's edges cut to the plain bytes */
    Vec order, active, covering, before; /* compute_runs' sweep */
    Interned states; /* the DFA states held here, by their NFA members (see _int_tables.h) */
    Py_ssize_t rows_computed; /* rows computed, kept or not (see build_state) */
} Nfa;

static int out_of_range(int64_t state) {
    PyErr_Format(PyExc_ValueError, "expected an NFA state id, found %lld", (long long)state);
    return -1;
}

static inline int holds(const Block *block, int64_t state) {
    return state >= block->base && state < block->base + block->copies * block->span;
}

/* The block whose copies hold the virtual `state`, or NULL (ValueError). Blocks' ids are
 * disjoint ranges, so the block kept for this depth answers when it holds the state. */
static const Block *block_of(Nfa *self, int64_t state, Py_ssize_t depth) {
    const Block *kept = depth < DESCENT_CACHE ? self->found_at[depth] : NULL;
    if (kept && holds(kept, state)) return kept;
    Py_ssize_t lo = 0, hi = self->nblocks; /* bisect_right over the bases, minus one */
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (self->bases[mid] <= state)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) return NULL;
    const Block *block = &self->blocks[lo - 1];
    if (block->span <= 0 || !holds(block, state)) return NULL;
    if (depth < DESCENT_CACHE) self->found_at[depth] = block;
    return block;
}

static inline int64_t shifted(int64_t state, int64_t concrete_shift, int64_t virtual_shift) {
    return state + (state < VIRTUAL_BASE ? concrete_shift : virtual_shift);
}

/* Walk `state` down to its concrete template state (itself when it is concrete):
 * self->chain then holds, per level from the outermost, (block index, copy, template
 * state, the level's state), and is empty for a concrete state. */
static int descend(Nfa *self, int64_t state, int64_t *concrete) {
    self->chain.size = 0;
    while (state >= VIRTUAL_BASE) {
        const Block *block = block_of(self, state, self->chain.size / 4);
        if (!block) return out_of_range(state);
        int64_t j = (state - block->base) / block->span, local = (state - block->base) % block->span;
        int64_t template = local < block->size_c ? block->s0 + local : block->v0 + local - block->size_c;
        if (vec_reserve(&self->chain, 4) < 0) return -1;
        int64_t *level = self->chain.data + self->chain.size;
        level[0] = block - self->blocks;
        level[1] = j;
        level[2] = template;
        level[3] = state;
        self->chain.size += 4;
        state = template;
    }
    if (state < 0 || state >= self->n) return out_of_range(state);
    *concrete = state;
    return 0;
}

static inline void copy_shifts(const Block *block, int64_t j, int64_t *cs, int64_t *vs) {
    int64_t first = block->base + j * block->span;
    *cs = first - block->s0;
    *vs = first + block->size_c - block->v0;
}

/* Append the byte edges of `state` to self->edges as (lo, hi, target) triples. */
static int byte_edges_of(Nfa *self, int64_t state) {
    int64_t concrete;
    Vec *out = &self->edges;
    Py_ssize_t start = out->size;
    if (descend(self, state, &concrete) < 0) return -1;
    int64_t a = self->boff[concrete], b = self->boff[concrete + 1];
    if (vec_reserve(out, 3 * (b - a)) < 0) return -1;
    for (int64_t k = a; k < b; k++) {
        out->data[out->size++] = self->blo[k];
        out->data[out->size++] = self->bhi[k];
        out->data[out->size++] = self->bdst[k];
    }
    for (Py_ssize_t level = self->chain.size - 4; level >= 0; level -= 4) {
        const int64_t *at = self->chain.data + level;
        int64_t cs, vs;
        copy_shifts(&self->blocks[at[0]], at[1], &cs, &vs);
        for (Py_ssize_t k = start + 2; k < out->size; k += 3) out->data[k] = shifted(out->data[k], cs, vs);
    }
    return 0;
}

/* self->edges: the byte edges of the members of DFA state `sid` (held here, checked by
 * the caller), read in place: byte_edges_of leaves the interned states alone. */
static int state_edges(Nfa *self, int64_t sid) {
    const int64_t *members = interned_members(&self->states, sid);
    self->edges.size = 0;
    for (Py_ssize_t k = 0; k < members[0]; k++)
        if (byte_edges_of(self, members[1 + k]) < 0) return -1;
    return 0;
}

/* The first of the extras extra_src[lo .. hi) whose source is at least `state`, or hi
 * (extra_src is sorted). */
static Py_ssize_t first_extra_from(const Nfa *self, int64_t state, Py_ssize_t lo,
                                   Py_ssize_t hi) {
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (self->extra_src[mid] < state)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The epsilon targets of `state` into self->eps, and whether it is important (a byte
 * edge out, or the final state). */
static int eps_of(Nfa *self, int64_t state, int *important) {
    Vec *out = &self->eps;
    out->size = 0;
    int64_t concrete;
    if (descend(self, state, &concrete) < 0) return -1;
    *important = self->reads[concrete] != 0 || state == self->final;
    int64_t a = self->eoff[concrete], b = self->eoff[concrete + 1];
    if (vec_reserve(out, b - a) < 0) return -1;
    for (int64_t k = a; k < b; k++) out->data[out->size++] = self->edst[k];
    for (Py_ssize_t level = self->chain.size - 4; level >= 0; level -= 4) {
        const int64_t *at = self->chain.data + level;
        const Block *block = &self->blocks[at[0]];
        int64_t j = at[1], template = at[2], here = at[3], cs, vs;
        copy_shifts(block, j, &cs, &vs);
        for (Py_ssize_t k = 0; k < out->size; k++) out->data[k] = shifted(out->data[k], cs, vs);
        if (template == block->x_end) { /* the repeat's glue (Block.glue) */
            int64_t last = block->copies - 1, lcs, lvs;
            copy_shifts(block, last, &lcs, &lvs);
            if (j < last) {
                int64_t ncs, nvs;
                copy_shifts(block, j + 1, &ncs, &nvs);
                if (vec_push(out, shifted(block->x_start, ncs, nvs)) < 0) return -1;
                int64_t low = block->low > 1 ? block->low : 1;
                if (block->bounded && j >= low - 1 &&
                    vec_push(out, shifted(block->x_end, lcs, lvs)) < 0)
                    return -1;
            } else if (!block->bounded) {
                if (vec_push(out, shifted(block->x_start, lcs, lvs)) < 0) return -1;
                if (vec_push(out, block->exit) < 0) return -1;
            }
        }
        /* the edges a parent attached to `here`, among those of its block */
        Py_ssize_t stop = self->extra_stop[at[0]];
        Py_ssize_t lo = first_extra_from(self, here, self->extra_first[at[0]], stop);
        if (lo < stop && self->extra_src[lo] == here) {
            for (int64_t k = self->extra_off[lo]; k < self->extra_off[lo + 1]; k++)
                if (vec_push(out, self->extra_dst[k]) < 0) return -1;
        }
    }
    return 0;
}

/* Mark `state` met by the current search: 1 newly, 0 already, -1 on error. */
static inline int met(Nfa *self, int64_t state) {
    if (state >= 0 && state < self->n) {
        if (self->concrete_seen[state] == self->concrete_stamp) return 0;
        self->concrete_seen[state] = self->concrete_stamp;
        return 1;
    }
    return seen_insert(&self->seen, state);
}

/* The offset in self->pool of the closure of `state` (computed once). */
static int closure_of(Nfa *self, int64_t state, int64_t *offset) {
    int concrete = state >= 0 && state < self->n;
    if (concrete ? (*offset = self->concrete_closures[state]) >= 0
                 : map_get(&self->closures, state, offset))
        return 0;
    Seen *seen = &self->seen;
    Vec *stack = &self->stack, *found = &self->found;
    seen_clear(seen);
    if (++self->concrete_stamp == 0) { /* wrapped: forget every old stamp */
        memset(self->concrete_seen, 0, (size_t)(self->n ? self->n : 1) * sizeof(uint32_t));
        self->concrete_stamp = 1;
    }
    stack->size = found->size = 0;
    if (met(self, state) < 0 || vec_push(stack, state) < 0) return -1;
    while (stack->size) {
        int64_t x = stack->data[--stack->size];
        int important;
        if (eps_of(self, x, &important) < 0) return -1;
        if (important && vec_push(found, x) < 0) return -1;
        for (Py_ssize_t k = 0; k < self->eps.size; k++) {
            int64_t y = self->eps.data[k];
            int added = met(self, y);
            if (added < 0) return -1;
            if (added && vec_push(stack, y) < 0) return -1;
        }
    }
    sort_ids(found->data, found->size);
    *offset = self->pool.size;
    if (vec_reserve(&self->pool, found->size + 1) < 0) return -1;
    self->pool.data[self->pool.size++] = found->size;
    memcpy(self->pool.data + self->pool.size, found->data, (size_t)found->size * sizeof(int64_t));
    self->pool.size += found->size;
    if (concrete) {
        self->concrete_closures[state] = *offset;
        return 0;
    }
    return map_put(&self->closures, state, *offset);
}


/* The row of the DFA state whose members' byte edges are in self->edges, as runs: each
 * run four entries of self->runs (lo, hi, start, size), its successors (sorted, distinct)
 * at self->succ[start .. start + size); runs ascending and disjoint, adjacent runs with
 * equal successors joined; bytes in no run lead to the dead state.
 *
 * The bytes are cut where some edge starts or stops; a sweep over the edges sorted by
 * their first byte keeps those covering the current piece, and a piece covered by the
 * same closures as the one before (most pieces of a state with many members) extends its
 * run without joining them again. */
/* The first byte from `from` on where a cut is marked, or 256: a row's bytes are cut in
 * a few places, and a byte-by-byte scan for them was half of compute_runs' time. */
static inline int next_cut(const uint64_t cuts[4], int from) {
    if (from >= 256) return 256;
    int word = from >> 6;
    uint64_t bits = cuts[word] & (~(uint64_t)0 << (from & 63));
    while (!bits) {
        if (++word == 4) return 256;
        bits = cuts[word];
    }
#if defined(__GNUC__) || defined(__clang__)
    return (word << 6) + __builtin_ctzll(bits);
#else
    int bit = 0;
    while (!(bits & 1)) {
        bits >>= 1;
        bit++;
    }
    return (word << 6) + bit;
#endif
}

static int compute_runs(Nfa *self) {
    Py_ssize_t edges = self->edges.size / 3;
    Vec *runs = &self->runs, *succ = &self->succ, *targets = &self->targets;
    Vec *order = &self->order, *active = &self->active, *covering = &self->covering;
    Vec *before = &self->before, *join = &self->join;
    runs->size = succ->size = targets->size = order->size = active->size = 0;
    covering->size = before->size = 0;
    /* the closure of each edge's target, as an offset in the pool (which may move) */
    if (vec_reserve(targets, edges) < 0 || vec_reserve(order, edges) < 0 ||
        vec_reserve(active, edges) < 0 || vec_reserve(covering, edges) < 0 ||
        vec_reserve(before, edges) < 0)
        return -1;
    uint64_t cuts[4] = {0, 0, 0, 0}; /* the bytes where an edge starts, or one stopped */
    for (Py_ssize_t e = 0; e < edges; e++) {
        const int64_t *edge = self->edges.data + 3 * e;
        if (edge[0] < 0 || edge[1] > 255 || edge[0] > edge[1]) {
            PyErr_SetString(PyExc_ValueError, "expected byte ranges within 0..255");
            return -1;
        }
        cuts[edge[0] >> 6] |= (uint64_t)1 << (edge[0] & 63);
        if (edge[1] < 255) cuts[(edge[1] + 1) >> 6] |= (uint64_t)1 << ((edge[1] + 1) & 63);
        if (closure_of(self, edge[2], &targets->data[e]) < 0) return -1;
        order->data[order->size++] = edge[0] << 40 | e; /* by first byte */
    }
    sort_ids(order->data, order->size);
    Py_ssize_t next_edge = 0, previous = -1; /* the offset in runs of the last run */
    for (int a = 0; a < 256;) {
        int b = next_cut(cuts, a + 1);
        /* the bytes [a, b) are read alike by every edge: those covering a cover them */
        Py_ssize_t kept = 0;
        for (Py_ssize_t k = 0; k < active->size; k++) { /* drop the edges ended before a */
            int64_t e = active->data[k];
            if (self->edges.data[3 * e + 1] >= a) active->data[kept++] = e;
        }
        active->size = kept;
        while (next_edge < edges && (order->data[next_edge] >> 40) == a)
            active->data[active->size++] = order->data[next_edge++] & (((int64_t)1 << 40) - 1);
        if (active->size) {
            covering->size = 0; /* the distinct closures covering the piece, by offset */
            for (Py_ssize_t k = 0; k < active->size; k++)
                covering->data[covering->size++] = targets->data[active->data[k]];
            Py_ssize_t distinct = covering->size = sort_unique(covering->data, covering->size);
            int64_t *last = previous >= 0 ? runs->data + previous : NULL;
            /* the last run ends where the last piece covered does */
            if (last && last[1] == a - 1 && before->size == distinct &&
                !memcmp(before->data, covering->data, (size_t)distinct * sizeof(int64_t))) {
                last[1] = b - 1; /* the same closures: the same successors */
            } else {
                join->size = 0;
                for (Py_ssize_t k = 0; k < distinct; k++) {
                    const int64_t *closure = self->pool.data + covering->data[k];
                    if (vec_reserve(join, closure[0]) < 0) return -1;
                    memcpy(join->data + join->size, closure + 1,
                           (size_t)closure[0] * sizeof(int64_t));
                    join->size += closure[0];
                }
                Py_ssize_t unique = sort_unique(join->data, join->size);
                if (last && last[1] == a - 1 && last[3] == unique &&
                    !memcmp(succ->data + last[2], join->data, (size_t)unique * sizeof(int64_t))) {
                    last[1] = b - 1; /* the same successors: one run */
                } else {
                    if (vec_reserve(runs, 4) < 0 || vec_reserve(succ, unique) < 0) return -1;
                    previous = runs->size;
                    runs->data[runs->size++] = a;
                    runs->data[runs->size++] = b - 1;
                    runs->data[runs->size++] = succ->size;
                    runs->data[runs->size++] = unique;
                    memcpy(succ->data + succ->size, join->data, (size_t)unique * sizeof(int64_t));
                    succ->size += unique;
                }
            }
            memcpy(before->data, covering->data, (size_t)distinct * sizeof(int64_t));
            before->size = distinct;
        }
        a = b;
    }
    return 0;
}

static int append_segment(PyObject *list, int lo, int hi, const int64_t *ids, Py_ssize_t count) {
    PyObject *set = frozenset_of(ids, count);
    if (!set) return -1;
    PyObject *segment = Py_BuildValue("(iiN)", lo, hi, set);
    if (!segment) return -1;
    int status = PyList_Append(list, segment);
    Py_DECREF(segment);
    return status;
}

static PyObject *Nfa_segments(Nfa *self, PyObject *members) {
    PyObject *sequence = PySequence_Fast(members, "expected a sequence of NFA state ids");
    if (!sequence) return NULL;
    self->edges.size = 0;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence);
    for (Py_ssize_t i = 0; i < count; i++) {
        long long member = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(sequence, i));
        if ((member == -1 && PyErr_Occurred()) || byte_edges_of(self, member) < 0) {
            Py_DECREF(sequence);
            return NULL;
        }
    }
    Py_DECREF(sequence);
    if (compute_runs(self) < 0) return NULL;
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    for (Py_ssize_t r = 0; r < self->runs.size; r += 4) {
        const int64_t *run = self->runs.data + r;
        if (append_segment(list, (int)run[0], (int)run[1], self->succ.data + run[2], run[3]) < 0) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

static int contains(const int64_t *sorted, Py_ssize_t count, int64_t id) {
    Py_ssize_t lo = 0, hi = count;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (sorted[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < count && sorted[lo] == id;
}


/* A new DFA state of these sorted members (whose hash is `h`): interned_new_state, with
 * its acceptance (whether the final state is a member). Its id, or -1 on error. */
static int64_t new_state(Nfa *self, const int64_t *succ, Py_ssize_t count, uint64_t h,
                         const Target *at) {
    int64_t sid = interned_new_state(&self->states, succ, count, h, at);
    if (sid >= 0) at->accepting[sid] = (uint8_t)contains(succ, count, self->final);
    return sid;
}

/* The states Python registered since the last call taken in, and `sid` one of those
 * held: 0, or -1 with an exception set. */
static int held_state(Nfa *self, int32_t sid, const Target *at) {
    Interned *states = &self->states;
    if (states->count < PyList_GET_SIZE(at->sets) &&
        interned_sync(states, &self->found, at->sets, 0, INT64_MAX) < 0)
        return -1;
    if (sid < 0 || sid >= at->capacity || sid >= states->count) {
        PyErr_Format(PyExc_ValueError, "expected a DFA state id, found %d", sid);
        return -1;
    }
    return 0;
}

/* Build the row of DFA state `sid` into the table: 1 when built, 0 when it was built
 * already, 2 when the table may lack room for the states it adds (those of its runs not
 * interned yet, at most 256: nothing is registered then), -1 on error (an exception
 * set). The new states' rows are UNBUILT before the row's entries are written, each
 * once, from UNBUILT to its final value. */
static int build_state(Nfa *self, int32_t sid, const Target *at) {
    Interned *states = &self->states;
    if (held_state(self, sid, at) < 0) return -1;
    int32_t *target = at->table + (Py_ssize_t)sid * 256;
    if (target[0] != UNBUILT) return 0;
    if (state_edges(self, sid) < 0) return -1;
    if (compute_runs(self) < 0) return -1;
    self->rows_computed++;
    /* each run's state, where it is interned already; room for the others */
    int64_t found[256];
    uint64_t hashes[256];
    Py_ssize_t runs = self->runs.size / 4, unknown = 0;
    for (Py_ssize_t r = 0; r < runs; r++) {
        const int64_t *run = self->runs.data + 4 * r, *succ = self->succ.data + run[2];
        hashes[r] = hash_members(succ, run[3]);
        found[r] = interned_find(states, succ, run[3], hashes[r]);
        unknown += found[r] < 0;
    }
    if (states->count + unknown > at->capacity) return 2;
    int32_t row[256];
    memset(row, 0, sizeof(row));
    for (Py_ssize_t r = 0; r < runs; r++) {
        const int64_t *run = self->runs.data + 4 * r;
        int64_t state = found[r];
        if (state < 0) {
            const int64_t *succ = self->succ.data + run[2];
            state = interned_find(states, succ, run[3], hashes[r]); /* an earlier run's? */
            if (state < 0) state = new_state(self, succ, run[3], hashes[r], at);
            if (state < 0) return -1;
        }
        for (int64_t byte = run[0]; byte <= run[1]; byte++) row[byte] = (int32_t)state;
    }
    memcpy(target, row, sizeof(row));
    return 1;
}

/* -- one entry of a row -----------------------------------------------------------------
 *
 * A walk that meets a state at a trie node with few children reads only those children's
 * entries of its row. The prefixes of an object's declared names are such states: each
 * holds, beside the name's own member, the free key's and those that keep an undeclared
 * key apart from every name, and its row (a construction over every byte, ~2 us) is read
 * at the one to three bytes the trie has below the prefix. step_state computes one
 * entry alone: the union of the closures the members' edges on that byte lead to,
 * interned as its row would intern it (the same state, the same id and acceptance), and
 * kept by (state, byte). The table is left as it is: a row is built whole or not at all. */

/* The state `byte` leads to from DFA state `sid` (its row built or not), registering it
 * when new: >= 0, or STEP_NO_ROOM where the table lacks room for it (nothing is
 * registered), -1 on error (an exception set). */
static int64_t step_state(Nfa *self, int32_t sid, int byte, const Target *at) {
    Interned *states = &self->states;
    if (states->count < PyList_GET_SIZE(at->sets) &&
        interned_sync(states, &self->found, at->sets, 0, INT64_MAX) < 0)
        return -1;
    if (sid < 0 || sid >= at->capacity || sid >= states->count || byte < 0 || byte > 255) {
        PyErr_Format(PyExc_ValueError, "expected a DFA state id and a byte, found %d, %d", sid,
                     byte);
        return -1;
    }
    int32_t built = at->table[(Py_ssize_t)sid * 256 + byte];
    if (built != UNBUILT) return built;
    int64_t key = (int64_t)sid << 8 | byte, kept;
    if (map_get(&self->steps, key, &kept)) return kept;
    if (state_edges(self, sid) < 0) return -1;
    Vec *join = &self->join;
    join->size = 0;
    for (Py_ssize_t e = 0; e < self->edges.size; e += 3) {
        const int64_t *edge = self->edges.data + e;
        if (edge[0] > byte || edge[1] < byte) continue;
        int64_t offset;
        if (closure_of(self, edge[2], &offset) < 0) return -1;
        const int64_t *closure = self->pool.data + offset;
        if (vec_reserve(join, closure[0]) < 0) return -1;
        memcpy(join->data + join->size, closure + 1, (size_t)closure[0] * sizeof(int64_t));
        join->size += closure[0];
    }
    Py_ssize_t unique = sort_unique(join->data, join->size);
    uint64_t h = hash_members(join->data, unique);
    int64_t target = interned_find(states, join->data, unique, h); /* no edge: DEAD, {} */
    if (target < 0) {
        if (states->count + 1 > at->capacity) return STEP_NO_ROOM;
        target = new_state(self, join->data, unique, h, at);
        if (target < 0) return -1;
    }
    if (map_put(&self->steps, key, target) < 0) return -1;
    return target;
}

/* -- the state every plain byte leads to ----------------------------------------------
 *
 * A string's chain of plain bytes (formcast._trie_walk's visit) follows, from a state,
 * the one state every plain byte leads to, and on, as far as the vocabulary's longest
 * plain token (80 bytes in SmolLM2's). Inside a bounded string each link is a new state
 * whose row, built to read it off, adds the states inside its UTF-8 characters too (~9),
 * while only the chain's first links are walked below. plain_step reads the link off
 * the plain bytes' edges alone: nothing but the target is interned, and no row is
 * written. */


/* self->edges cut to the bytes `mask` (four words) marks, kept in place. 0, or -1 with
 * an exception set. */
static int edges_cut_to(Nfa *self, const uint64_t *mask) {
    int spans[256], count = 0;
    for (int a = 0; a < 256; a++) {
        if (!(mask[a >> 6] >> (a & 63) & 1)) continue;
        int b = a;
        while (b + 1 < 256 && (mask[(b + 1) >> 6] >> ((b + 1) & 63) & 1)) b++;
        spans[count++] = a;
        spans[count++] = b;
        a = b;
    }
    Vec *edges = &self->edges, *pieces = &self->clipped;
    pieces->size = 0;
    for (Py_ssize_t e = 0; e < edges->size; e += 3) {
        int64_t lo = edges->data[e], hi = edges->data[e + 1], to = edges->data[e + 2];
        for (int k = 0; k < count; k += 2) {
            int64_t a = lo > spans[k] ? lo : spans[k], b = hi < spans[k + 1] ? hi : spans[k + 1];
            if (a > b) continue;
            if (vec_reserve(pieces, 3) < 0) return -1;
            pieces->data[pieces->size++] = a;
            pieces->data[pieces->size++] = b;
            pieces->data[pieces->size++] = to;
        }
    }
    if (vec_reserve(edges, pieces->size) < 0) return -1;
    memcpy(edges->data, pieces->data, (size_t)pieces->size * sizeof(int64_t));
    edges->size = pieces->size;
    return 0;
}

/* The one state every byte of `plain` (four words of byte flags, not all clear) leads to
 * from DFA state `sid`, its row built or not: DEAD where none lives, PLAIN_PARTS where
 * they part ways (some dead, or to different states), registering the target when new
 * (as its row would: the same state, id and acceptance); STEP_NO_ROOM where the table
 * lacks room for it (nothing registered), -1 on error. Kept by state: a string's chain
 * is asked again at each of its first visits. */
static int64_t plain_step(Nfa *self, int32_t sid, const uint64_t *plain, const Target *at) {
    Interned *states = &self->states;
    if (held_state(self, sid, at) < 0) return -1;
    int64_t kept;
    if (map_get(&self->plain_steps, sid, &kept)) return kept;
    Py_ssize_t plains = 0;
    for (int w = 0; w < 4; w++) plains += __builtin_popcountll(plain[w]);
    const int32_t *row = at->table + (Py_ssize_t)sid * 256;
    int64_t target = DEAD;
    if (row[0] != UNBUILT) { /* read off the row */
        int first = 1;
        for (int byte = 0; byte < 256 && target != PLAIN_PARTS; byte++) {
            if (!(plain[byte >> 6] >> (byte & 63) & 1)) continue;
            if (first) target = row[byte];
            else if (row[byte] != target) target = PLAIN_PARTS;
            first = 0;
        }
    } else {
        if (state_edges(self, sid) < 0 || edges_cut_to(self, plain) < 0 ||
            compute_runs(self) < 0)
            return -1;
        Py_ssize_t runs = self->runs.size / 4, covered = 0;
        const int64_t *first = runs ? self->runs.data : NULL;
        for (Py_ssize_t r = 0; r < runs; r++) {
            const int64_t *run = self->runs.data + 4 * r;
            covered += run[1] - run[0] + 1;
            if (run[3] != first[3] ||
                memcmp(self->succ.data + run[2], self->succ.data + first[2],
                       (size_t)run[3] * sizeof(int64_t)))
                return map_put(&self->plain_steps, sid, PLAIN_PARTS) < 0 ? -1 : PLAIN_PARTS;
        }
        if (runs && covered != plains)
            return map_put(&self->plain_steps, sid, PLAIN_PARTS) < 0 ? -1 : PLAIN_PARTS;
        if (runs) {
            const int64_t *succ = self->succ.data + first[2];
            uint64_t h = hash_members(succ, first[3]);
            target = interned_find(states, succ, first[3], h);
            if (target < 0) {
                if (states->count + 1 > at->capacity) return STEP_NO_ROOM;
                target = new_state(self, succ, first[3], h, at);
                if (target < 0) return -1;
            }
        }
    }
    return map_put(&self->plain_steps, sid, target) < 0 ? -1 : target;
}

/* -- the bytes a state reads ------------------------------------------------------------
 *
 * formcast._pushdown reads what a machine state does (whether it reads a byte, and
 * which, and where its call marker leads) for every frame it makes, most of them never
 * a stack's top whose row is built. live_bytes answers the first without the row. */

/* The bytes on which DFA state `sid` leads to a live state, as four words into `out`:
 * read off its row where it is built, else off its members' edges whose targets'
 * closures hold a state (a byte leads to the union of those closures). Nothing is
 * interned or written. 0, or -1 with an exception set. */
static int live_bytes(Nfa *self, int32_t sid, const Target *at, uint64_t *out) {
    if (held_state(self, sid, at) < 0) return -1;
    memset(out, 0, 4 * sizeof(uint64_t));
    const int32_t *row = at->table + (Py_ssize_t)sid * 256;
    if (row[0] != UNBUILT) {
        for (int byte = 0; byte < 256; byte++)
            if (row[byte] != DEAD) out[byte >> 6] |= (uint64_t)1 << (byte & 63);
        return 0;
    }
    if (state_edges(self, sid) < 0) return -1;
    for (Py_ssize_t e = 0; e < self->edges.size; e += 3) {
        const int64_t *edge = self->edges.data + e;
        int64_t offset;
        if (closure_of(self, edge[2], &offset) < 0) return -1;
        if (self->pool.data[offset] == 0) continue; /* a dead end */
        for (int64_t byte = edge[0]; byte <= edge[1]; byte++)
            out[byte >> 6] |= (uint64_t)1 << (byte & 63);
    }
    return 0;
}

/* -- UTF-8 characters taken whole ----------------------------------------------------
 *
 * A string's state loops on every plain byte, and (most often) on every well-formed
 * non-ASCII character too. Where it does, the tokens made of such characters end where
 * they start, and a first visit need not walk them: it takes them as bits, without the
 * rows of the states inside a character (five to seven of a string's nine first rows).
 * utf8_steps decides it from the NFA, reading the states inside a character's bytes off
 * their members alone: nothing is interned, nothing written to the table. */

#define UTF8_CLASSES 7

/* The class of lead byte `lead` (the ranges its continuations take, utf8_ranges), or -1
 * where no well-formed character starts with it. */
static int utf8_class(int lead) {
    if (lead >= 0xC2 && lead <= 0xDF) return 0;
    if (lead == 0xE0) return 1;
    if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) return 2;
    if (lead == 0xED) return 3; /* its second byte stops before the surrogates */
    if (lead == 0xF0) return 4;
    if (lead >= 0xF1 && lead <= 0xF3) return 5;
    if (lead == 0xF4) return 6; /* its second byte stops at U+10FFFF */
    return -1;
}

/* The continuation bytes of a character of `class` (its lo and hi byte of each), their
 * count returned (Unicode's table of well-formed UTF-8). */
static int utf8_ranges(int class, uint8_t lo[3], uint8_t hi[3]) {
    static const uint8_t first_lo[UTF8_CLASSES] = {0x80, 0xA0, 0x80, 0x80, 0x90, 0x80, 0x80};
    static const uint8_t first_hi[UTF8_CLASSES] = {0xBF, 0xBF, 0xBF, 0x9F, 0xBF, 0xBF, 0x8F};
    static const int count[UTF8_CLASSES] = {1, 2, 2, 2, 3, 3, 3};
    for (int k = 0; k < count[class]; k++) {
        lo[k] = k ? 0x80 : first_lo[class];
        hi[k] = k ? 0xBF : first_hi[class];
    }
    return count[class];
}

/* A state inside a character, read once a check (utf8_steps): its one live run of bytes
 * and the state they lead to. */
typedef struct {
    int32_t state, next;
    int lo, hi;
} CharacterStep;

#define CHARACTER_STEPS 16

/* The one run of bytes `state` (interned here) keeps alive, and the interned state it
 * leads to, in *step: 1; 0 where it keeps more or none alive, or leads to a state not
 * interned yet; -1 on error. Read through `memo` (*known entries), a check's. */
static int character_step(Nfa *self, int32_t state, CharacterStep *memo, int *known,
                          CharacterStep *step) {
    for (int k = 0; k < *known; k++)
        if (memo[k].state == state) {
            *step = memo[k];
            return 1;
        }
    if (state_edges(self, state) < 0) return -1;
    if (compute_runs(self) < 0) return -1;
    if (self->runs.size != 4) return 0;
    const int64_t *run = self->runs.data, *succ = self->succ.data + run[2];
    int64_t next = interned_find(&self->states, succ, run[3], hash_members(succ, run[3]));
    if (next <= DEAD) return 0;
    *step = (CharacterStep){state, (int32_t)next, (int)run[0], (int)run[1]};
    if (*known < CHARACTER_STEPS) memo[(*known)++] = *step;
    return 1;
}

/* From `after` (the state a lead byte of `class` leads to), the continuation bytes: each
 * state on the way must keep exactly the next byte's range alive. The state after the
 * character (1), with steps[d] the state after d + 1 of its bytes (steps[0] = after); 0
 * where not so; -1 on error. */
static int32_t follow_character(Nfa *self, int32_t after, int class, int32_t steps[3],
                                CharacterStep *memo, int *known) {
    uint8_t lo[3], hi[3];
    int continuations = utf8_ranges(class, lo, hi);
    int32_t state = steps[0] = after;
    for (int d = 0; d < continuations; d++) {
        CharacterStep step;
        int found = character_step(self, state, memo, known, &step);
        if (found <= 0) return found;
        if (step.lo != lo[d] || step.hi != hi[d]) return 0;
        state = step.next;
        if (d + 1 < continuations) steps[d + 1] = state;
    }
    return state;
}

/* The DFA state every well-formed non-ASCII character leads to from `sid` (whose row
 * must be built), where all lead there and every byte that starts no character is dead:
 * then steps[d * UTF8_LEADS + lead - 0xC0] is the state after the first d + 1 bytes of a
 * character that starts with `lead` (DEAD past its bytes). 0 where that does not hold, or
 * where a state on the way is not interned yet (the row is not built, say); -1 on error.
 * Cost: the runs of the few states inside a character, each once (~0.5 us for a JSON
 * string's seven), the first time a state is asked; its answer is kept (utf8_known). */
static int32_t utf8_steps_of(Nfa *self, int32_t sid, const int32_t *row, int32_t *steps);

static int32_t utf8_steps(Nfa *self, int32_t sid, const int32_t *table, Py_ssize_t states,
                          int32_t *steps) {
    for (int k = 0; k < 3 * UTF8_LEADS; k++) steps[k] = DEAD;
    if (sid <= DEAD || sid >= states || sid >= self->states.count) return 0;
    const int32_t *row = table + (Py_ssize_t)sid * 256;
    if (row[0] == UNBUILT) return 0;
    int64_t kept;
    if (map_get(&self->utf8_known, sid, &kept)) {
        if (kept < 0) return 0;
        const int64_t *at = self->utf8_pool.data + kept;
        for (int k = 0; k < 3 * UTF8_LEADS; k++) steps[k] = (int32_t)at[1 + k];
        return (int32_t)at[0];
    }
    int32_t target = utf8_steps_of(self, sid, row, steps);
    if (target < 0) return -1;
    Vec *pool = &self->utf8_pool;
    if (target == 0) return map_put(&self->utf8_known, sid, -1) < 0 ? -1 : 0;
    if (vec_reserve(pool, 1 + 3 * UTF8_LEADS) < 0 ||
        map_put(&self->utf8_known, sid, pool->size) < 0)
        return -1;
    pool->data[pool->size++] = target;
    for (int k = 0; k < 3 * UTF8_LEADS; k++) pool->data[pool->size++] = steps[k];
    return target;
}

/* utf8_steps of a state whose row is built (`row`), computed: see utf8_steps. */
static int32_t utf8_steps_of(Nfa *self, int32_t sid, const int32_t *row, int32_t *steps) {
    for (int b = 0x80; b < 0x100; b++)
        if ((utf8_class(b) < 0) != (row[b] == DEAD)) return 0; /* a dead lead: no */
    CharacterStep memo[CHARACTER_STEPS];
    int known = 0;
    int32_t target = DEAD;
    for (int lead = 0xC2; lead <= 0xF4; lead++) {
        if (row[lead] >= self->states.count) return 0; /* not taken in here yet */
        int32_t by_depth[3] = {DEAD, DEAD, DEAD};
        int32_t reached = follow_character(self, row[lead], utf8_class(lead), by_depth, memo,
                                           &known);
        if (reached <= 0) return reached;
        if (target != DEAD && reached != target) return 0; /* characters part ways */
        target = reached;
        for (int d = 0; d < 3; d++) steps[d * UTF8_LEADS + lead - 0xC0] = by_depth[d];
    }
    return target;
}

static int build_row_of(PyObject *self, int32_t sid, const Target *at) {
    return build_state((Nfa *)self, sid, at);
}

/* build_rows(states, table, accepting, sets) -> next: see the module's docstring. */
static PyObject *Nfa_build_rows(Nfa *self, PyObject *args) {
    return build_rows_with((PyObject *)self, args, build_row_of);
}

/* plain_chain(chain, filled, plain, table, accepting, sets) -> (filled, parted): see
 * the module's docstring. */
static PyObject *Nfa_plain_chain(Nfa *self, PyObject *args) {
    PyObject *objects[4];
    Py_ssize_t filled;
    Target at;
    if (!PyArg_ParseTuple(args, "OnOOOO!:plain_chain", &objects[0], &filled, &objects[1],
                          &objects[2], &objects[3], &PyList_Type, &at.sets))
        return NULL;
    Py_buffer views[4];
    const Py_ssize_t itemsizes[4] = {4, 1, 4, 1};
    const int writable[4] = {1, 0, 1, 1};
    PyObject *result = NULL;
    int held = hold_buffers(objects, 4, itemsizes, writable, views,
                            "expected an int32 chain and table, uint8 plain bytes and flags");
    if (held < 4) goto done;
    int32_t *chain = views[0].buf;
    Py_ssize_t links = views[0].len / 4, plain = views[1].len;
    const uint8_t *plain_bytes = views[1].buf;
    at.table = views[2].buf;
    at.capacity = views[2].len / (4 * 256);
    at.accepting = views[3].buf;
    if (filled < 1 || filled > links || plain < 1 || views[3].len < at.capacity) {
        PyErr_SetString(PyExc_ValueError,
                        "expected a chain begun, plain bytes and a flag for every table row");
        goto done;
    }
    int parted = 0;
    for (; filled < links && !parted; filled++) {
        int32_t current = chain[filled - 1];
        if (current == DEAD || (filled > 1 && current == chain[filled - 2])) {
            chain[filled] = current; /* DEAD stays DEAD; a loop stays put */
            continue;
        }
        int status = build_state(self, current, &at);
        if (status < 0) goto done;
        if (status == 2) break; /* no room for its row's new states: the caller grows */
        const int32_t *row = at.table + (Py_ssize_t)current * 256;
        int32_t following = row[plain_bytes[0]];
        for (Py_ssize_t k = 1; k < plain && !parted; k++) parted = row[plain_bytes[k]] != following;
        if (parted) break;
        chain[filled] = following;
    }
    result = Py_BuildValue("(ni)", filled, parted);
done:
    for (int i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    return result;
}

/* The C API for formcast._trie_walk (a capsule named SUBSET_API): the walk builds the
 * rows it needs without going back to Python. Returns build_state's codes; `nfa` must be
 * an Nfa. Its signature is BuildState (_row_api.h). */
static PyTypeObject NfaType;

/* Whether the C API's callers passed an Nfa and a list of states (else TypeError). */
static int api_arguments(PyObject *nfa, PyObject *sets) {
    if (PyObject_TypeCheck(nfa, &NfaType) && PyList_Check(sets)) return 1;
    PyErr_SetString(PyExc_TypeError, "expected an Nfa and a list of states");
    return 0;
}

static int build_state_api(PyObject *nfa, int32_t sid, int32_t *table, Py_ssize_t capacity,
                           uint8_t *accepting, PyObject *sets) {
    Target at = {table, accepting, capacity, sets};
    if (!api_arguments(nfa, sets)) return -1;
    return build_state((Nfa *)nfa, sid, &at);
}

/* The C API for formcast._trie_walk (a capsule named PLAIN_API): plain_step's codes,
 * where `nfa` is an Nfa. */
static int64_t plain_step_api(PyObject *nfa, int32_t sid, const uint64_t *plain,
                              int32_t *table, Py_ssize_t capacity, uint8_t *accepting,
                              PyObject *sets) {
    Target at = {table, accepting, capacity, sets};
    if (!api_arguments(nfa, sets)) return -1;
    return plain_step((Nfa *)nfa, sid, plain, &at);
}

/* The C API for formcast._trie_walk (a capsule named STEP_API): step_state's codes, where
 * `nfa` is an Nfa. */
static int64_t step_state_api(PyObject *nfa, int32_t sid, int byte, int32_t *table,
                              Py_ssize_t capacity, uint8_t *accepting, PyObject *sets) {
    Target at = {table, accepting, capacity, sets};
    if (!api_arguments(nfa, sets)) return -1;
    return step_state((Nfa *)nfa, sid, byte, &at);
}

/* The C API for formcast._pushdown (a capsule named LIVE_API): live_bytes, where `nfa`
 * is an Nfa. */
static int live_bytes_api(PyObject *nfa, int32_t sid, int32_t *table, Py_ssize_t capacity,
                          uint8_t *accepting, PyObject *sets, uint64_t *out) {
    Target at = {table, accepting, capacity, sets};
    if (!api_arguments(nfa, sets)) return -1;
    return live_bytes((Nfa *)nfa, sid, &at, out);
}

static int64_t step_of(PyObject *self, int32_t sid, int byte, const Target *at) {
    return step_state((Nfa *)self, sid, byte, at);
}

static int64_t plain_step_of(PyObject *self, int32_t sid, const uint64_t *plain,
                             const Target *at) {
    return plain_step((Nfa *)self, sid, plain, at);
}

/* step(state, byte, table, accepting, sets) -> target: see step_state (-2: no room). */
static PyObject *Nfa_step(Nfa *self, PyObject *args) {
    return step_with((PyObject *)self, args, step_of);
}

/* plain_step(state, plain, table, accepting, sets) -> target: see plain_step (plain: 32
 * bytes of byte flags; -3 where the plain bytes part ways, -2 no room). */
static PyObject *Nfa_plain_step(Nfa *self, PyObject *args) {
    return plain_step_with((PyObject *)self, args, plain_step_of);
}

/* live_bytes(state, table, accepting, sets) -> bytes: see live_bytes (32 bytes of flags,
 * bit b & 7 of byte b >> 3). */
static PyObject *Nfa_live_bytes(Nfa *self, PyObject *args) {
    int state;
    PyObject *objects[2];
    Target at;
    if (!PyArg_ParseTuple(args, "iOOO!:live_bytes", &state, &objects[0], &objects[1],
                          &PyList_Type, &at.sets))
        return NULL;
    Py_buffer views[2];
    if (!hold_target(objects, views, &at)) return NULL;
    uint64_t live[4];
    int status = live_bytes(self, state, &at, live);
    release_target(views);
    if (status < 0) return NULL;
    uint8_t flags[32];
    for (int byte = 0; byte < 256; byte++)
        if (!(byte & 7)) flags[byte >> 3] = (uint8_t)(live[byte >> 6] >> (byte & 63) & 0xff);
    return PyBytes_FromStringAndSize((const char *)flags, 32);
}

/* kept_step(state, byte) -> target: the entry step_state computed there and keeps, or -1
 * (none computed: nothing is computed here). */
static PyObject *Nfa_kept_step(Nfa *self, PyObject *args) {
    int state, byte;
    if (!PyArg_ParseTuple(args, "ii:kept_step", &state, &byte)) return NULL;
    int64_t kept = -1;
    if (state >= 0 && byte >= 0 && byte <= 255)
        map_get(&self->steps, (int64_t)state << 8 | byte, &kept);
    return PyLong_FromLongLong(kept);
}

/* The C API for formcast._trie_walk (a capsule named UTF8_API): utf8_steps of the DFA
 * state `sid` of `nfa` over the automaton's table (`states` rows). */
static int32_t utf8_steps_api(PyObject *nfa, int32_t sid, const int32_t *table,
                              Py_ssize_t states, int32_t *steps) {
    if (!PyObject_TypeCheck(nfa, &NfaType)) {
        PyErr_SetString(PyExc_TypeError, "expected an Nfa");
        return -1;
    }
    return utf8_steps((Nfa *)nfa, sid, table, states, steps);
}

/* utf8_steps(state, table) -> (target, steps): see utf8_steps; steps as 3 x 64 int32. */
static PyObject *Nfa_utf8_steps(Nfa *self, PyObject *args) {
    Py_ssize_t state;
    PyObject *table;
    if (!PyArg_ParseTuple(args, "nO:utf8_steps", &state, &table)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(table, &view, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    PyObject *result = NULL;
    if (view.itemsize != 4 || view.len % (256 * 4)) {
        PyErr_SetString(PyExc_ValueError, "expected an int32 table of rows of 256");
    } else if (state < 0 || state >= view.len / (256 * 4)) {
        PyErr_Format(PyExc_ValueError, "expected a DFA state id, found %zd", state);
    } else {
        int32_t steps[3 * UTF8_LEADS];
        int32_t target = utf8_steps(self, (int32_t)state, view.buf, view.len / (256 * 4), steps);
        if (target >= 0) result = Py_BuildValue("(iy#)", target, (const char *)steps,
                                                (Py_ssize_t)sizeof(steps));
    }
    PyBuffer_Release(&view);
    return result;
}

static PyObject *Nfa_closure(Nfa *self, PyObject *arg) {
    long long state = PyLong_AsLongLong(arg);
    if (state == -1 && PyErr_Occurred()) return NULL;
    int64_t offset;
    if (closure_of(self, state, &offset) < 0) return NULL;
    return frozenset_of(self->pool.data + offset + 1, self->pool.data[offset]);
}

static PyObject *Nfa_members_of(Nfa *self, PyObject *arg) {
    return interned_members_of(&self->states, arg);
}

static PyObject *Nfa_find(Nfa *self, PyObject *arg) {
    Vec *found = &self->found;
    if (read_sorted_ids(found, arg, 0, INT64_MAX) < 0) return NULL;
    return PyLong_FromLongLong(interned_find(&self->states, found->data, found->size,
                                             hash_members(found->data, found->size)));
}

static void Nfa_dealloc(Nfa *self) {
    for (int i = 0; i < self->held; i++) PyBuffer_Release(&self->views[i]);
    map_free(&self->closures);
    vec_free(&self->pool);
    map_free(&self->utf8_known);
    map_free(&self->steps);
    map_free(&self->plain_steps);
    vec_free(&self->utf8_pool);
    PyMem_Free(self->bases);
    PyMem_Free(self->extra_first);
    PyMem_Free(self->extra_stop);
    PyMem_Free(self->concrete_closures);
    PyMem_Free(self->concrete_seen);
    PyMem_Free(self->seen.keys);
    PyMem_Free(self->seen.stamps);
    vec_free(&self->stack);
    vec_free(&self->found);
    vec_free(&self->eps);
    vec_free(&self->edges);
    vec_free(&self->chain);
    vec_free(&self->join);
    vec_free(&self->runs);
    vec_free(&self->clipped);
    vec_free(&self->succ);
    vec_free(&self->targets);
    vec_free(&self->order);
    vec_free(&self->active);
    vec_free(&self->covering);
    vec_free(&self->before);
    interned_free(&self->states);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Hold `object`'s buffer as int64 items; their count in *count. */
static const int64_t *hold(Nfa *self, PyObject *object, Py_ssize_t *count, const char *name) {
    Py_buffer *view = &self->views[self->held];
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    self->held++;
    const char *format = view->format ? view->format : "B";
    if (format[0] == '<' || format[0] == '=' || format[0] == '@') format++;
    if (view->itemsize != 8 || (strcmp(format, "q") && strcmp(format, "l"))) {
        PyErr_Format(PyExc_ValueError, "expected %s as int64 items", name);
        return NULL;
    }
    *count = view->len / 8;
    return (const int64_t *)view->buf;
}

static int offsets_valid(const int64_t *offsets, Py_ssize_t n, Py_ssize_t size) {
    if (offsets[0] != 0) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (offsets[i + 1] < offsets[i]) return 0;
    return offsets[n] <= size;
}


/* Each block's range of extras (extra_first, extra_stop): O(blocks log extras) once, so
 * that a closure's step searches the few of its block, not all of them. */
static int index_extras_by_block(Nfa *self) {
    size_t size = (size_t)(self->nblocks ? self->nblocks : 1) * sizeof(Py_ssize_t);
    self->extra_first = PyMem_Malloc(size);
    self->extra_stop = PyMem_Malloc(size);
    if (!self->extra_first || !self->extra_stop) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < self->nblocks; i++) {
        const Block *block = &self->blocks[i];
        int64_t end = block->base + block->copies * block->span;
        self->extra_first[i] = first_extra_from(self, block->base, 0, self->nextras);
        self->extra_stop[i] = first_extra_from(self, end, 0, self->nextras);
    }
    return 0;
}

static int Nfa_init(Nfa *self, PyObject *args, PyObject *kwargs) {
    static const char *names[] = {"byte_offsets", "byte_lo", "byte_hi", "byte_dst",
                                  "eps_offsets", "eps_dst", "reads", "blocks",
                                  "extra_sources", "extra_offsets", "extra_targets"};
    PyObject *objects[BUFFERS];
    long long final;
    if (kwargs && PyDict_Size(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Nfa() takes positional arguments only");
        return -1;
    }
    if (self->held) {
        PyErr_SetString(PyExc_TypeError, "Nfa() is initialised once");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOL:Nfa", &objects[0], &objects[1], &objects[2],
                          &objects[3], &objects[4], &objects[5], &objects[6], &objects[7],
                          &objects[8], &objects[9], &objects[10], &final))
        return -1;
    const int64_t *data[BUFFERS];
    Py_ssize_t counts[BUFFERS];
    for (int i = 0; i < BUFFERS; i++) {
        data[i] = hold(self, objects[i], &counts[i], names[i]);
        if (!data[i]) return -1;
    }
    Py_ssize_t n = counts[0] - 1;
    Py_ssize_t byte_edges = counts[1];
    if (n < 0 || counts[2] != byte_edges || counts[3] != byte_edges || counts[4] != n + 1 ||
        counts[6] != n || counts[7] % BLOCK_FIELDS || counts[9] != counts[8] + 1 ||
        !offsets_valid(data[0], n, byte_edges) || !offsets_valid(data[4], n, counts[5]) ||
        !offsets_valid(data[9], counts[8], counts[10])) {
        PyErr_SetString(PyExc_ValueError, "expected consistent NFA edge arrays");
        return -1;
    }
    self->boff = data[0];
    self->blo = data[1];
    self->bhi = data[2];
    self->bdst = data[3];
    self->eoff = data[4];
    self->edst = data[5];
    self->reads = data[6];
    self->blocks = (const Block *)data[7];
    self->nblocks = counts[7] / BLOCK_FIELDS;
    self->bases = PyMem_Malloc((size_t)(self->nblocks ? self->nblocks : 1) * sizeof(int64_t));
    if (!self->bases) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < self->nblocks; i++) self->bases[i] = self->blocks[i].base;
    self->extra_src = data[8];
    self->extra_off = data[9];
    self->extra_dst = data[10];
    self->nextras = counts[8];
    self->n = n;
    self->byte_edges = byte_edges;
    self->eps_edges = counts[5];
    self->final = final;
    if (index_extras_by_block(self) < 0) return -1;
    size_t states = (size_t)(n ? n : 1);
    self->concrete_closures = PyMem_Malloc(states * sizeof(int64_t));
    self->concrete_seen = PyMem_Calloc(states, sizeof(uint32_t));
    if (!self->concrete_closures || !self->concrete_seen) {
        PyErr_NoMemory();
        return -1;
    }
    memset(self->concrete_closures, 0xff, states * sizeof(int64_t)); /* -1: none yet */
    return 0;
}

static PyMethodDef Nfa_methods[] = {
    {"segments", (PyCFunction)Nfa_segments, METH_O,
     "segments(members) -> [(lo, hi, frozenset)]: the row of the DFA state of `members`."},
    {"build_rows", (PyCFunction)Nfa_build_rows, METH_VARARGS,
     "build_rows(states, table, accepting, sets) -> next: the rows of the states not built"
     " yet, in order, into the table; see the module."},
    {"plain_chain", (PyCFunction)Nfa_plain_chain, METH_VARARGS,
     "plain_chain(chain, filled, plain, table, accepting, sets) -> (filled, parted): the"
     " states the plain bytes lead to, one after another; see the module."},
    {"members", (PyCFunction)Nfa_members_of, METH_O,
     "members(state) -> frozenset: the NFA members of a DFA state held here."},
    {"find", (PyCFunction)Nfa_find, METH_O,
     "find(members) -> state: the DFA state held here with these NFA members, or -1."},
    {"utf8_steps", (PyCFunction)Nfa_utf8_steps, METH_VARARGS,
     "utf8_steps(state, table) -> (target, steps): the state every well-formed non-ASCII"
     " character leads to from `state` (0: none does alike), and the states inside one"
     " (3 x 64 int32, by depth then lead byte - 0xC0); see utf8_steps in the source."},
    {"step", (PyCFunction)Nfa_step, METH_VARARGS,
     "step(state, byte, table, accepting, sets) -> target: the entry of `state`'s row at"
     " `byte`, computed alone where the row is not built (the table is left as it is; a"
     " new state is registered as a row registers it); -2 where the table lacks room."},
    {"live_bytes", (PyCFunction)Nfa_live_bytes, METH_VARARGS,
     "live_bytes(state, table, accepting, sets) -> bytes: 32 bytes of flags, the bytes on "
     "which `state` leads to a live state."},
    {"plain_step", (PyCFunction)Nfa_plain_step, METH_VARARGS,
     "plain_step(state, plain, table, accepting, sets) -> target: the one state every byte "
     "`plain` flags (32 bytes) leads to, its row built or not (-3: they part ways; -2: no "
     "room)"},
    {"kept_step", (PyCFunction)Nfa_kept_step, METH_VARARGS,
     "kept_step(state, byte) -> target: the entry step() computed and keeps there, or -1."},
    {"closure", (PyCFunction)Nfa_closure, METH_O,
     "closure(state) -> frozenset: the important states epsilon-reachable from `state`."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Nfa_members[] = {
    {"rows_computed", T_PYSSIZET, offsetof(Nfa, rows_computed), READONLY,
     "Rows computed so far, including those computed and dropped for want of room in the"
     " table (a measure of wasted work: the tests bound it)."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject NfaType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "formcast._subset.Nfa",
    .tp_basicsize = sizeof(Nfa),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An NFA's edges, for the subset construction of DFA rows (see the module).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Nfa_init,
    .tp_dealloc = (destructor)Nfa_dealloc,
    .tp_methods = Nfa_methods,
    .tp_members = Nfa_members,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "formcast._subset",
    "The subset construction of a lazy byte DFA's rows, in C (see formcast.automaton.lazy).",
    -1, NULL,
};

PyMODINIT_FUNC PyInit__subset(void) {
    PyObject *module =
        module_with_rows(&module_def, &NfaType, "Nfa", (void *)build_state_api, SUBSET_API);
    if (!module) return NULL;
    if (add_capsule(module, (void *)utf8_steps_api, UTF8_API, "_utf8_steps") < 0 ||
        add_capsule(module, (void *)step_state_api, STEP_API, "_step_state") < 0 ||
        add_capsule(module, (void *)plain_step_api, PLAIN_API, "_plain_step") < 0 ||
        add_capsule(module, (void *)live_bytes_api, LIVE_API, "_live_bytes") < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
