/* formcast._pushdown: the rows of a pushdown automaton's sets of stacks, in C.
 *
 * formcast.automaton.pushdown builds the row of a state (a set of stacks of frames
 * (machine, machine state, frame below)) the first time a walk reaches it: every stack's
 * top steps in its machine's row, and each distinct column of targets (one a stack) leads
 * to the union of the stepped stacks' closures (the calls and returns made without
 * reading a byte). In Python that costs ~40 us for a state of one stack, ~150 us for one
 * of several, and a first visit to an object key in a recursive schema builds dozens.
 * This module does the same work, with the same meaning and the same state numbering, in
 * C, and exports it to formcast._trie_walk as the capsule `_build_state` (the signature
 * of formcast._subset's), so that a walk builds the rows it reaches without leaving C.
 *
 * It is optional: pushdown.py keeps its Python rows where this module was not built, and
 * the tests compare both (tests/automaton/test_native_pushdown.py).
 *
 * Stacks(info_of, initials, max_stacks, too_many, automata, (call_byte, digits, width))
 *   What a machine state reads, calls and ends (formcast.automaton.machines.FrameInfo)
 *   is read once per machine state and kept here: from its machine's automaton
 *   (automata: the machines' LazyAutomaton objects) through formcast._subset, under
 *   that automaton's lock (taken once a call into this module, see machine_use): the
 *   bytes it reads off its edges, the calls read after the call byte through `width`
 *   digit bytes (`digits`, a digit's value its index), and its row built and copied only
 *   when a stack it tops steps (most frames are made for a row's successors, never a
 *   top whose row is built); or, where that construction is not there, from
 *   info_of(machine, state) -> (row,
 *   reads, accepting, calls, ends_only) (row an int32 buffer of 256 targets, calls
 *   (callee, return state) pairs). initials: each machine's initial state.
 *   too_many(count) -> exception: raised when a state would hold more than max_stacks
 *   stacks.
 * .frame(machine, state, below) -> frame: the frame's id, interned (frame 0 is BOTTOM).
 * .frame_of(frame) -> (machine, state, below); .frames() -> [(machine, state, below)]
 *   of every frame, in id order; .take_frames(frames): append frames read back (each
 *   new, in the order given, after those held).
 * .closure(frame) -> frozenset: the stacks the frame stands for once every call and
 *   return that reads nothing is made (memoised per frame).
 * .accepts(members) -> bool: whether a state of these stacks may end (one of them is a
 *   lone frame whose machine may end).
 * .members(state) -> frozenset; .find(members) -> state or -1: the states held here.
 * .step(state, byte, table, accepting, sets) -> target, .plain_step(state, plain, table,
 *   accepting, sets) -> target: as formcast._subset.Nfa's, one entry of a row, and the
 *   one state every plain byte leads to, computed without the row; exported to
 *   formcast._trie_walk as the capsules `_step_state` and `_plain_step`.
 * .build_rows(states, table, accepting, sets) -> next: as formcast._subset.Nfa's: the
 *   rows of `states` (int32) into `table`, new states appended to `sets` as None with
 *   their acceptance flags; states Python registered in `sets` (frozensets of frames)
 *   are taken in first; stops before a row whose new states might not fit.
 *
 * The caller serialises calls (pushdown.py builds rows under the automaton's lock). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_int_tables.h"

#define BOTTOM 0

/* A machine state's info, INFO_FIELDS int64 each in Stacks.infos. Its row (INFO_ROW, an
 * offset in Stacks.rows) is copied the first time a stack it tops steps (-1 until then):
 * most frames made are never a top whose row is built. */
enum { INFO_FLAGS, INFO_ROW, INFO_CALLS, INFO_CALL_COUNT, INFO_MACHINE, INFO_STATE, INFO_FIELDS };
enum { READS = 1, ACCEPTING = 2, ENDS_ONLY = 4 };

/* A frame, FRAME_FIELDS int64 each in Stacks.frames. */
enum {
    FRAME_MACHINE,
    FRAME_STATE,
    FRAME_BELOW,
    FRAME_NEXT_SAME, /* the frame before it with the same hash, or -1 */
    FRAME_CLOSURE,   /* offset of its closure in Stacks.pool, or -1 */
    FRAME_INFO,      /* its machine state's info number */
    FRAME_FIELDS
};

typedef struct {
    int32_t *data;
    Py_ssize_t size, capacity;
} Rows;

static int rows_reserve(Rows *r, Py_ssize_t extra) {
    void *data = r->data;
    if (reserve_items(&data, r->size, &r->capacity, extra, sizeof(int32_t), 64 * 256) < 0)
        return -1;
    r->data = data;
    return 0;
}

#define MACHINE_ROOM 512 /* free rows a machine's table is given when a row lacks room */

/* A machine's LazyAutomaton held for formcast._subset's calls (see machine_use). */
typedef struct {
    PyObject *automaton, *nfa, *lock;
    Py_buffer views[2]; /* its table and acceptance flags */
    int took;           /* views held */
    int locked;
    Py_ssize_t states;  /* len(sets) when opened: more on close means _took_in */
    Target at;          /* its table, flags and list of states */
} Machine;

typedef struct {
    PyObject_HEAD
    PyObject *info_of, *too_many;
    /* the machines' LazyAutomaton objects, whose rows are built here by formcast._subset
     * (NULL where that module is not there: info_of answers then) */
    PyObject *automata;
    /* per machine, its Nfa, lock and list of states (the same objects for its life),
     * read the first time its rows are asked for: NULL until then, the Nfa None where
     * formcast._subset does not build its rows */
    PyObject **machine_parts;
    /* formcast._subset's row, entry and live bytes, for the machines' rows (all NULL
     * where that module is not there) */
    BuildState subset;
    StepState subset_step;
    LiveBytes subset_live;
    int call_byte, width;
    uint8_t digits[16], is_marker[256];
    int digit_count;
    Py_ssize_t max_stacks;
    Vec initials;
    Map info_index; /* (machine << 32 | state) -> info number */
    Vec infos;
    Rows rows;      /* 256 targets an info, marker bytes DEAD */
    Vec calls;      /* (callee, return state) pairs */
    Vec frames;
    Map frame_heads; /* a frame hash -> the last frame with it */
    Vec pool;        /* closures: a count, then sorted frames */
    Interned states; /* the sets of stacks, by their top frames (see _int_tables.h) */
    Map steps;       /* (state << 8 | byte) -> step_state's answer there */
    Map plain_steps; /* state -> plain_step's answer there */
    /* scratch */
    Vec stack, kept, found, row_members, successors, frontier, following, top_offsets;
    Rows columns;
    Seen seen;
    Py_ssize_t rows_computed;
    /* the machine held (its lock taken) since the first of this call's machine reads,
     * let go when the call returns (machines_let_go); -1: none */
    int64_t held_machine;
    Machine held;
} Stacks;

/* -- machine states ----------------------------------------------------------------------- */

static int read_int(PyObject *object, int64_t *value) {
    long long read = PyLong_AsLongLong(object);
    if (read == -1 && PyErr_Occurred()) return -1;
    *value = read;
    return 0;
}

/* Keep a machine state's info as the next info number: its flags, its calls
 * (self->calls[first ..], `count` pairs) and its row where `row` is given (marker bytes
 * DEAD; else it is copied when first read, top_row). */
static int store_info(Stacks *self, const int32_t *row, int64_t flags, Py_ssize_t first,
                      Py_ssize_t count, int64_t machine, int64_t state) {
    if (vec_reserve(&self->infos, INFO_FIELDS) < 0) return -1;
    int64_t offset = -1;
    if (row) {
        if (rows_reserve(&self->rows, 256) < 0) return -1;
        offset = self->rows.size;
        memcpy(self->rows.data + offset, row, 256 * sizeof(int32_t));
        self->rows.size += 256;
    }
    int64_t *info = self->infos.data + self->infos.size;
    info[INFO_FLAGS] = flags;
    info[INFO_ROW] = offset;
    info[INFO_CALLS] = first;
    info[INFO_CALL_COUNT] = count;
    info[INFO_MACHINE] = machine;
    info[INFO_STATE] = state;
    self->infos.size += INFO_FIELDS;
    return 0;
}

/* Keep what info_of answered, (row, reads, accepting, calls, ends_only). */
static int keep_answer(Stacks *self, PyObject *answer, int64_t machine, int64_t state) {
    if (!PyTuple_Check(answer) || PyTuple_GET_SIZE(answer) != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "expected info_of to answer (row, reads, accepting, calls, ends_only)");
        return -1;
    }
    int64_t flags = 0;
    const int bits[3] = {READS, ACCEPTING, ENDS_ONLY}, at[3] = {1, 2, 4};
    for (int k = 0; k < 3; k++) {
        int truth = PyObject_IsTrue(PyTuple_GET_ITEM(answer, at[k]));
        if (truth < 0) return -1;
        if (truth) flags |= bits[k];
    }
    PyObject *calls = PySequence_Fast(PyTuple_GET_ITEM(answer, 3), "expected calls as pairs");
    if (!calls) return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(calls), first = self->calls.size;
    for (Py_ssize_t k = 0; k < count && !PyErr_Occurred(); k++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(calls, k);
        int64_t callee, returned;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "expected each call as (callee, return state)");
            break;
        }
        if (read_int(PyTuple_GET_ITEM(pair, 0), &callee) < 0 ||
            read_int(PyTuple_GET_ITEM(pair, 1), &returned) < 0)
            break;
        if (callee < 0 || callee >= self->initials.size || returned <= DEAD) {
            PyErr_Format(PyExc_ValueError, "expected a call of a known machine, found %lld",
                         (long long)callee);
            break;
        }
        if (vec_push(&self->calls, callee) < 0 || vec_push(&self->calls, returned) < 0) break;
    }
    Py_DECREF(calls);
    Py_buffer view;
    if (!PyErr_Occurred() &&
        PyObject_GetBuffer(PyTuple_GET_ITEM(answer, 0), &view, PyBUF_C_CONTIGUOUS) == 0) {
        if (view.itemsize != 4 || view.len != 256 * 4)
            PyErr_SetString(PyExc_ValueError, "expected a machine row of 256 int32 targets");
        else
            store_info(self, view.buf, flags, first, count, machine, state);
        PyBuffer_Release(&view);
    }
    if (PyErr_Occurred()) {
        self->calls.size = first;
        return -1;
    }
    return 0;
}

/* -- a machine's automaton, read through formcast._subset ------------------------------
 *
 * A machine's rows are its LazyAutomaton's, built (or an entry or its live bytes read)
 * by formcast._subset's C functions under that automaton's lock, into its table. The
 * lock is taken and the buffers held from a call's first read of the machine to the
 * call's end (machine_use, machines_let_go). */

/* Hold the machine's current table and flags in m->at: 0, or -1 with an exception. */
static int machine_hold(Machine *m) {
    PyObject *table = PyObject_GetAttrString(m->automaton, "_table");
    PyObject *flags = PyObject_GetAttrString(m->automaton, "_accepting");
    int status = -1;
    if (table && flags &&
        PyObject_GetBuffer(table, &m->views[0], PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) == 0 &&
        ++m->took &&
        PyObject_GetBuffer(flags, &m->views[1], PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) == 0 &&
        ++m->took) {
        m->at.table = m->views[0].buf;
        m->at.capacity = m->views[0].len / (4 * 256);
        m->at.accepting = m->views[1].buf;
        if (m->views[0].itemsize == 4 && m->views[1].itemsize == 1 &&
            m->views[1].len >= m->at.capacity)
            status = 0;
        else
            PyErr_SetString(PyExc_ValueError, "expected a machine's int32 table and flags");
    }
    Py_XDECREF(table);
    Py_XDECREF(flags);
    return status;
}

static void machine_drop(Machine *m) {
    for (int k = 0; k < m->took; k++) PyBuffer_Release(&m->views[k]);
    m->took = 0;
}

/* MACHINE_ROOM more free rows in the machine's table, held again: 0, or -1. */
static int machine_grow(Machine *m) {
    machine_drop(m);
    PyObject *grown = PyObject_CallMethod(m->automaton, "_reserve", "i", MACHINE_ROOM);
    if (!grown) return -1;
    Py_DECREF(grown);
    return machine_hold(m);
}

/* The machine's Nfa, lock and list of states into self->machine_parts, read once: 0, or
 * -1 with an exception set. */
static int machine_parts(Stacks *self, int64_t machine, PyObject *automaton) {
    PyObject **parts = self->machine_parts + 3 * machine;
    if (parts[0]) return 0;
    PyObject *nfa = PyObject_CallMethod(automaton, "_native_nfa", NULL);
    PyObject *lock = nfa ? PyObject_GetAttrString(automaton, "_lock") : NULL;
    PyObject *sets = lock ? PyObject_GetAttrString(automaton, "_sets") : NULL;
    if (sets && !PyList_Check(sets))
        PyErr_SetString(PyExc_TypeError, "expected a machine's list of states");
    if (PyErr_Occurred()) {
        Py_XDECREF(nfa);
        Py_XDECREF(lock);
        Py_XDECREF(sets);
        return -1;
    }
    parts[0] = nfa;
    parts[1] = lock;
    parts[2] = sets;
    return 0;
}

/* Let the machine go (the states its rows and entries added noted by its _took_in, its
 * lock released): `status`, or -1 where that fails. The first exception set stays. */
static int machine_close(Machine *m, int status) {
    machine_drop(m);
    int noting = m->at.sets && PyList_GET_SIZE(m->at.sets) > m->states;
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    const char *calls[2] = {noting ? "_took_in" : NULL, m->locked ? "release" : NULL};
    PyObject *targets[2] = {m->automaton, m->lock};
    for (int k = 0; k < 2; k++) {
        if (!calls[k]) continue;
        PyObject *done = PyObject_CallMethod(targets[k], calls[k], NULL);
        if (done) {
            Py_DECREF(done);
        } else if (type) {
            PyErr_Clear();
        } else {
            PyErr_Fetch(&type, &value, &trace);
        }
    }
    if (type) {
        PyErr_Restore(type, value, trace);
        status = -1;
    }
    Py_XDECREF(m->at.sets);
    Py_XDECREF(m->lock);
    Py_XDECREF(m->nfa);
    return status;
}

/* Open `machine`'s automaton: 1 held (close it), 0 where formcast._subset does not build
 * its rows (nothing held: info_of answers), -1 on error (nothing held). */
static int machine_open(Stacks *self, int64_t machine, Machine *m) {
    memset(m, 0, sizeof(*m));
    if (!self->subset) return 0;
    m->automaton = PyList_GET_ITEM(self->automata, machine);
    if (machine_parts(self, machine, m->automaton) < 0) return -1;
    PyObject **parts = self->machine_parts + 3 * machine;
    if (parts[0] == Py_None) return 0;
    m->nfa = Py_NewRef(parts[0]);
    m->lock = Py_NewRef(parts[1]);
    m->at.sets = Py_NewRef(parts[2]);
    m->states = PyList_GET_SIZE(m->at.sets);
    PyObject *held = PyObject_CallMethod(m->lock, "acquire", NULL);
    m->locked = held != NULL;
    Py_XDECREF(held);
    if (m->locked && machine_hold(m) == 0) return 1;
    return machine_close(m, -1); /* what was taken let go */
}

/* `machine` held for this call (machine_open the first time; another held before is let
 * go): 1 with *m set, 0 where formcast._subset does not build its rows, -1 on error.
 * Held until the call into this module returns (machines_let_go): a row of sets of
 * stacks reads its tops' rows and makes its successors' frames, each a read of one
 * machine, where each read's own lock and buffers were ~1 us. */
static int machine_use(Stacks *self, int64_t machine, Machine **m) {
    if (self->held_machine == machine) {
        *m = &self->held;
        return 1;
    }
    if (self->held_machine >= 0) {
        self->held_machine = -1;
        if (machine_close(&self->held, 0) < 0) return -1;
    }
    int opened = machine_open(self, machine, &self->held);
    if (opened <= 0) return opened;
    self->held_machine = machine;
    *m = &self->held;
    return 1;
}

/* Let go the machine held for this call, if any: `status`, or -1 where that fails (an
 * exception set before stays set). */
static int machines_let_go(Stacks *self, int status) {
    if (self->held_machine < 0) return status;
    self->held_machine = -1;
    return machine_close(&self->held, status);
}

static int check_machine_state(const Machine *m, int64_t state) {
    if (state >= m->at.capacity || state >= PyList_GET_SIZE(m->at.sets)) {
        PyErr_SetString(PyExc_ValueError, "expected a machine state in its table");
        return -1;
    }
    return 0;
}

/* The row of `state` (built if it is not) into `out`. 0, or -1. */
static int machine_row(Stacks *self, Machine *m, int64_t state, int32_t *out) {
    for (;;) {
        if (check_machine_state(m, state) < 0) return -1;
        int built = self->subset(m->nfa, (int32_t)state, m->at.table, m->at.capacity,
                                 m->at.accepting, m->at.sets);
        if (built < 0) return -1;
        if (built < 2) break;
        if (machine_grow(m) < 0) return -1; /* no room for its new states */
    }
    memcpy(out, m->at.table + state * 256, 256 * sizeof(int32_t));
    return 0;
}

/* The entry of `state`'s row at `byte` (computed alone where the row is not built). */
static int64_t machine_step(Stacks *self, Machine *m, int64_t state, int byte) {
    for (;;) {
        if (check_machine_state(m, state) < 0) return -1;
        int64_t target = self->subset_step(m->nfa, (int32_t)state, byte, m->at.table,
                                           m->at.capacity, m->at.accepting, m->at.sets);
        if (target != STEP_NO_ROOM) return target;
        if (machine_grow(m) < 0) return -1;
    }
}

/* The info of (machine, state) as FrameInfo reads it (formcast.automaton.machines), its
 * row left for top_row: whether it reads a byte and may end (its live bytes, its flag),
 * its calls after the call byte, one digit at a time (the rows of the states inside the
 * marker); ends_only where it accepts and no byte (marker or not) leads on. */
static int machine_info(Stacks *self, Machine *m, int64_t machine, int64_t state) {
    uint64_t live[4];
    if (check_machine_state(m, state) < 0 ||
        self->subset_live(m->nfa, (int32_t)state, m->at.table, m->at.capacity, m->at.accepting,
                          m->at.sets, live) < 0)
        return -1;
    int accepting = m->at.accepting[state] != 0, any = 0, reads = 0;
    for (int byte = 0; byte < 256; byte++) {
        int lives = (int)(live[byte >> 6] >> (byte & 63) & 1);
        any |= lives;
        reads |= lives && !self->is_marker[byte];
    }
    /* the frontier of (machine state, number so far) pairs (own vectors: this runs
     * inside closures and rows, which hold the others) */
    Vec *frontier = &self->frontier, *following = &self->following;
    frontier->size = following->size = 0;
    if (live[self->call_byte >> 6] >> (self->call_byte & 63) & 1) {
        int64_t called = machine_step(self, m, state, self->call_byte);
        if (called < 0 || vec_push(frontier, called) < 0 || vec_push(frontier, 0) < 0) return -1;
    }
    int32_t digit_row[256];
    for (int level = 0; level < self->width && frontier->size; level++) {
        following->size = 0;
        for (Py_ssize_t k = 0; k < frontier->size; k += 2) {
            if (machine_row(self, m, frontier->data[k], digit_row) < 0) return -1;
            for (int value = 0; value < self->digit_count; value++) {
                int32_t target = digit_row[self->digits[value]];
                if (target == DEAD) continue;
                int64_t number = frontier->data[k + 1] * self->digit_count + value;
                if (vec_push(following, target) < 0 || vec_push(following, number) < 0)
                    return -1;
            }
        }
        Vec swap = *frontier;
        *frontier = *following;
        *following = swap;
    }
    Py_ssize_t first = self->calls.size, count = frontier->size / 2;
    for (Py_ssize_t k = 0; k < frontier->size; k += 2)
        if (vec_push(&self->calls, frontier->data[k + 1] + 1) < 0 ||
            vec_push(&self->calls, frontier->data[k]) < 0)
            return -1;
    int64_t flags = (reads ? READS : 0) | (accepting ? ACCEPTING : 0) |
                    (accepting && !any ? ENDS_ONLY : 0);
    return store_info(self, NULL, flags, first, count, machine, state);
}

/* machine_info where formcast._subset builds the machine's rows: 1 kept, 0 where it does
 * not (info_of answers), -1 on error. */
static int native_info(Stacks *self, int64_t machine, int64_t state) {
    Machine *m;
    int used = machine_use(self, machine, &m);
    if (used <= 0) return used;
    return machine_info(self, m, machine, state) < 0 ? -1 : 1;
}

/* The info number of (machine, state), asked of info_of the first time. */
static int info_number(Stacks *self, int64_t machine, int64_t state, int64_t *number) {
    if (machine < 0 || machine >= self->initials.size || state <= DEAD || state > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "expected a state of a known machine, found (%lld, %lld)",
                     (long long)machine, (long long)state);
        return -1;
    }
    int64_t key = (machine << 32) | state;
    if (map_get(&self->info_index, key, number)) return 0;
    int kept = native_info(self, machine, state);
    if (kept == 0) { /* no C construction for its rows: asked of Python */
        PyObject *answer = PyObject_CallFunction(self->info_of, "LL", (long long)machine,
                                                 (long long)state);
        if (!answer) return -1;
        kept = keep_answer(self, answer, machine, state);
        Py_DECREF(answer);
    }
    if (kept < 0) return -1;
    *number = self->infos.size / INFO_FIELDS - 1;
    return map_put(&self->info_index, key, *number);
}

static inline const int64_t *info_at(const Stacks *self, int64_t number) {
    return self->infos.data + number * INFO_FIELDS;
}

/* -- frames --------------------------------------------------------------------------- */

static inline uint64_t hash_frame(int64_t machine, int64_t state, int64_t below) {
    return mix(mix(mix((uint64_t)machine) ^ (uint64_t)state) ^ (uint64_t)below) >> 1;
}

static inline const int64_t *frame_at(const Stacks *self, int64_t frame) {
    return self->frames.data + frame * FRAME_FIELDS;
}

static int64_t frame_count(const Stacks *self) { return self->frames.size / FRAME_FIELDS; }

/* The frame (machine, state, below), or -1. */
static int64_t frame_find(Stacks *self, int64_t machine, int64_t state, int64_t below) {
    int64_t frame;
    if (!map_get(&self->frame_heads, (int64_t)hash_frame(machine, state, below), &frame))
        return -1;
    for (; frame >= 0; frame = frame_at(self, frame)[FRAME_NEXT_SAME]) {
        const int64_t *f = frame_at(self, frame);
        if (f[FRAME_MACHINE] == machine && f[FRAME_STATE] == state && f[FRAME_BELOW] == below)
            return frame;
    }
    return -1;
}

/* The id of frame (machine, state, below), made if new; -1 on error. */
static int64_t frame_of(Stacks *self, int64_t machine, int64_t state, int64_t below) {
    int64_t found = frame_find(self, machine, state, below);
    if (found >= 0) return found;
    if (below < 0 || below >= frame_count(self)) {
        PyErr_Format(PyExc_ValueError, "expected a frame below among %lld, found %lld",
                     (long long)frame_count(self), (long long)below);
        return -1;
    }
    int64_t info;
    if (info_number(self, machine, state, &info) < 0) return -1; /* may run Python */
    if (vec_reserve(&self->frames, FRAME_FIELDS) < 0) return -1;
    int64_t frame = frame_count(self), key = (int64_t)hash_frame(machine, state, below);
    int64_t *head = map_slot(&self->frame_heads, key);
    int64_t *f = self->frames.data + self->frames.size;
    f[FRAME_MACHINE] = machine;
    f[FRAME_STATE] = state;
    f[FRAME_BELOW] = below;
    f[FRAME_NEXT_SAME] = head ? *head : -1;
    f[FRAME_CLOSURE] = -1;
    f[FRAME_INFO] = info;
    self->frames.size += FRAME_FIELDS;
    if (head) {
        *head = frame;
        return frame;
    }
    return map_put(&self->frame_heads, key, frame) < 0 ? -1 : frame;
}

/* Whether a stack topped by `frame` may end there: a lone frame whose machine may end. */
static int lone_end(const Stacks *self, int64_t frame) {
    const int64_t *f = frame_at(self, frame);
    return f[FRAME_BELOW] == BOTTOM && (info_at(self, f[FRAME_INFO])[INFO_FLAGS] & ACCEPTING);
}

/* -- the rows of stacks' tops ------------------------------------------------------ */

/* The offset in self->rows of info `number`'s row (its machine state's targets, marker
 * bytes DEAD), copied from its machine `m` (open) where it is not yet; -1 on error. */
static int64_t top_row(Stacks *self, Machine *m, int64_t number) {
    int32_t row[256];
    if (machine_row(self, m, info_at(self, number)[INFO_STATE], row) < 0) return -1;
    for (int byte = 0; byte < 256; byte++)
        if (self->is_marker[byte]) row[byte] = DEAD;
    if (rows_reserve(&self->rows, 256) < 0) return -1;
    int64_t offset = self->rows.size;
    memcpy(self->rows.data + offset, row, sizeof(row));
    self->rows.size += 256;
    self->infos.data[number * INFO_FIELDS + INFO_ROW] = offset;
    return offset;
}

/* The offsets in self->rows of the rows of the tops of `members` (`count` frames), into
 * `offsets`, those not copied yet copied (top_row). Offsets stay valid where pointers
 * into self->rows do not: a copy may move them. 0, or -1. */
static int top_rows(Stacks *self, const int64_t *members, Py_ssize_t count, int64_t *offsets) {
    for (Py_ssize_t k = 0; k < count; k++) {
        int64_t number = frame_at(self, members[k])[FRAME_INFO];
        const int64_t *info = info_at(self, number);
        offsets[k] = info[INFO_ROW];
        if (offsets[k] >= 0) continue;
        Machine *m;
        int used = machine_use(self, info[INFO_MACHINE], &m);
        if (used == 0)
            PyErr_SetString(PyExc_RuntimeError, "expected a machine whose rows are built in C");
        if (used <= 0 || (offsets[k] = top_row(self, m, number)) < 0) return -1;
    }
    return 0;
}

/* -- closures ------------------------------------------------------------------------- */

/* Push the frames a stack topped by `current` becomes without reading a byte (a return,
 * then each call) onto the search, those not seen yet. */
static int push_following(Stacks *self, int64_t current) {
    const int64_t *f = frame_at(self, current);
    int64_t machine = f[FRAME_MACHINE], below = f[FRAME_BELOW];
    const int64_t *info = info_at(self, f[FRAME_INFO]);
    int64_t first = info[INFO_CALLS], count = info[INFO_CALL_COUNT];
    if ((info[INFO_FLAGS] & ACCEPTING) && below != BOTTOM) { /* a return */
        int added = seen_insert(&self->seen, below);
        if (added < 0 || (added && vec_push(&self->stack, below) < 0)) return -1;
    }
    for (int64_t k = 0; k < count; k++) {
        int64_t callee = self->calls.data[first + 2 * k];
        int64_t returned = self->calls.data[first + 2 * k + 1];
        int64_t back;
        if (info_number(self, machine, returned, &back) < 0) return -1;
        int64_t caller = below; /* a tail call: nothing is left to do on return */
        if (!(info_at(self, back)[INFO_FLAGS] & ENDS_ONLY)) {
            caller = frame_of(self, machine, returned, below);
            if (caller < 0) return -1;
        }
        int64_t called = frame_of(self, callee, self->initials.data[callee], caller);
        if (called < 0) return -1;
        int added = seen_insert(&self->seen, called);
        if (added < 0 || (added && vec_push(&self->stack, called) < 0)) return -1;
    }
    return 0;
}

/* The offset in self->pool of the closure of `frame` (computed once): the frames reached
 * by calls and returns whose top reads a byte, and lone frames that may end. */
static int closure_at(Stacks *self, int64_t frame, int64_t *offset) {
    int64_t known = frame_at(self, frame)[FRAME_CLOSURE];
    if (known >= 0) {
        *offset = known;
        return 0;
    }
    Vec *kept = &self->kept, *stack = &self->stack;
    kept->size = stack->size = 0;
    seen_clear(&self->seen);
    if (seen_insert(&self->seen, frame) < 0 || vec_push(stack, frame) < 0) return -1;
    while (stack->size) {
        int64_t current = stack->data[--stack->size];
        int64_t done = frame_at(self, current)[FRAME_CLOSURE];
        if (done >= 0 && current != frame) { /* its closure is known: take it whole */
            const int64_t *members = self->pool.data + done;
            if (vec_reserve(kept, members[0]) < 0) return -1;
            memcpy(kept->data + kept->size, members + 1, (size_t)members[0] * sizeof(int64_t));
            kept->size += members[0];
            continue;
        }
        const int64_t *f = frame_at(self, current);
        int64_t flags = info_at(self, f[FRAME_INFO])[INFO_FLAGS];
        if ((flags & READS) || ((flags & ACCEPTING) && f[FRAME_BELOW] == BOTTOM))
            if (vec_push(kept, current) < 0) return -1;
        if (push_following(self, current) < 0) return -1;
    }
    Py_ssize_t count = sort_unique(kept->data, kept->size);
    if (vec_reserve(&self->pool, count + 1) < 0) return -1;
    *offset = self->pool.size;
    self->pool.data[self->pool.size++] = count;
    memcpy(self->pool.data + self->pool.size, kept->data, (size_t)count * sizeof(int64_t));
    self->pool.size += count;
    self->frames.data[frame * FRAME_FIELDS + FRAME_CLOSURE] = *offset;
    return 0;
}

/* -- states --------------------------------------------------------------------------- */

/* The union of the closures of the stacks of `members` stepped to the column `targets`
 * (one a member; DEAD: it dies), sorted, into self->found. */
static int step_column(Stacks *self, const int64_t *members, Py_ssize_t count,
                       const int32_t *targets) {
    self->found.size = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        if (targets[k] == DEAD) continue;
        const int64_t *f = frame_at(self, members[k]);
        int64_t machine = f[FRAME_MACHINE], below = f[FRAME_BELOW], offset;
        int64_t stepped = frame_of(self, machine, targets[k], below);
        if (stepped < 0 || closure_at(self, stepped, &offset) < 0) return -1;
        const int64_t *closure = self->pool.data + offset;
        if (vec_reserve(&self->found, closure[0]) < 0) return -1;
        memcpy(self->found.data + self->found.size, closure + 1,
               (size_t)closure[0] * sizeof(int64_t));
        self->found.size += closure[0];
    }
    if (count > 1) self->found.size = sort_unique(self->found.data, self->found.size);
    return 0;
}

/* Part the bytes by their column, the targets of the members' tops on a byte (one a
 * member): the distinct columns go to self->columns in order of first appearance,
 * `count` int32 each, and column_of[byte] is a byte's column, -1 where every stack dies.
 * Returns the number of distinct columns, or -1. */
static int part_bytes(Stacks *self, const int64_t *members, Py_ssize_t count,
                      int16_t *column_of) {
    if (rows_reserve(&self->columns, 257 * count) < 0) return -1;
    const int32_t **tops = PyMem_Malloc((size_t)count * (sizeof(int32_t *) + sizeof(int64_t)));
    if (!tops) {
        PyErr_NoMemory();
        return -1;
    }
    int64_t *offsets = (int64_t *)(tops + count);
    if (top_rows(self, members, count, offsets) < 0) {
        PyMem_Free(tops);
        return -1;
    }
    for (Py_ssize_t k = 0; k < count; k++) tops[k] = self->rows.data + offsets[k];
    int32_t *columns = self->columns.data;
    int16_t slots[512]; /* distinct columns by hash (at most 256 of them) */
    memset(slots, 0xff, sizeof(slots));
    int distinct = 0;
    for (int byte = 0; byte < 256; byte++) {
        int32_t *column = columns + (Py_ssize_t)distinct * count; /* a candidate */
        int live = 0;
        uint64_t h = 0x9e3779b97f4a7c15ULL;
        for (Py_ssize_t k = 0; k < count; k++) {
            column[k] = tops[k][byte];
            live |= column[k] != DEAD;
            h = mix(h ^ (uint64_t)(uint32_t)column[k]) + (uint64_t)k;
        }
        if (!live) {
            column_of[byte] = -1;
            continue;
        }
        int slot = (int)(h & 511);
        while (slots[slot] >= 0 &&
               memcmp(columns + (Py_ssize_t)slots[slot] * count, column,
                      (size_t)count * sizeof(int32_t)))
            slot = (slot + 1) & 511;
        if (slots[slot] < 0) slots[slot] = (int16_t)distinct++;
        column_of[byte] = slots[slot];
    }
    PyMem_Free(tops);
    return distinct;
}

/* The exception too_many(count) makes, set; -1. */
static int refuse_stacks(Stacks *self, Py_ssize_t count) {
    PyObject *error = PyObject_CallFunction(self->too_many, "n", count);
    if (error) {
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
        Py_DECREF(error);
    }
    return -1;
}

/* A new state of the sorted frames `members` (hash `h`): interned_new_state, accepting
 * where one of its stacks is a lone frame that may end. */
static int64_t new_state(Stacks *self, const int64_t *members, Py_ssize_t count, uint64_t h,
                         const Target *at) {
    int64_t sid = interned_new_state(&self->states, members, count, h, at);
    if (sid < 0) return -1;
    uint8_t accepts = 0;
    for (Py_ssize_t k = 0; k < count && !accepts; k++) accepts = (uint8_t)lone_end(self, members[k]);
    at->accepting[sid] = accepts;
    return sid;
}

/* The states Python registered taken in, and `sid` checked: 0, or -1 with an exception. */
static int held_state(Stacks *self, int32_t sid, const Target *at) {
    Interned *states = &self->states;
    if (states->count < PyList_GET_SIZE(at->sets) &&
        interned_sync(states, &self->found, at->sets, 1, frame_count(self)) < 0)
        return -1;
    if (sid <= DEAD || sid >= at->capacity || sid >= states->count) {
        PyErr_Format(PyExc_ValueError, "expected a live state id, found %d", sid);
        return -1;
    }
    return 0;
}

/* Build the row of state `sid` into the table: 1 when built, 0 when built already, 2 when
 * the table may lack room for the states it adds (nothing registered then), -1 on error.
 * New states are numbered in the order of the bytes that first reach them, as in
 * pushdown.py. */
static int build_state_in(Stacks *self, int32_t sid, const Target *at) {
    Interned *states = &self->states;
    if (held_state(self, sid, at) < 0) return -1;
    int32_t *target = at->table + (Py_ssize_t)sid * 256;
    if (target[0] != UNBUILT) return 0;
    /* the members, aside: interning moves them */
    const int64_t *held = interned_members(states, sid);
    Py_ssize_t count = held[0];
    Vec *own = &self->row_members;
    own->size = 0;
    if (vec_reserve(own, count) < 0) return -1;
    memcpy(own->data, held + 1, (size_t)count * sizeof(int64_t));
    int16_t column_of[256];
    int columns = part_bytes(self, own->data, count, column_of);
    if (columns < 0) return -1;
    self->rows_computed++;
    /* each column's successor (a count, then frames, in self->successors), found where
     * it is interned already */
    int64_t offsets[256], found[256];
    uint64_t hashes[256];
    Vec *successors = &self->successors;
    successors->size = 0;
    Py_ssize_t unknown = 0;
    for (int c = 0; c < columns; c++) {
        /* the closures may run Python (info_of), which does not touch this object */
        const int32_t *targets = self->columns.data + (Py_ssize_t)c * count;
        if (step_column(self, own->data, count, targets) < 0) return -1;
        const Vec *next = &self->found;
        if (next->size > self->max_stacks) return refuse_stacks(self, next->size);
        if (vec_reserve(successors, next->size + 1) < 0) return -1;
        offsets[c] = successors->size;
        successors->data[successors->size++] = next->size;
        memcpy(successors->data + successors->size, next->data,
               (size_t)next->size * sizeof(int64_t));
        successors->size += next->size;
        hashes[c] = hash_members(next->data, next->size);
        found[c] = interned_find(states, next->data, next->size, hashes[c]);
        unknown += found[c] < 0;
    }
    if (states->count + unknown > at->capacity) return 2;
    for (int c = 0; c < columns; c++) {
        if (found[c] >= 0) continue;
        const int64_t *members = successors->data + offsets[c];
        found[c] = interned_find(states, members + 1, members[0], hashes[c]); /* an earlier's? */
        if (found[c] < 0) found[c] = new_state(self, members + 1, members[0], hashes[c], at);
        if (found[c] < 0) return -1;
    }
    int32_t row[256];
    for (int byte = 0; byte < 256; byte++)
        row[byte] = column_of[byte] < 0 ? DEAD : (int32_t)found[column_of[byte]];
    memcpy(target, row, sizeof(row));
    return 1;
}

/* -- one entry of a row, and the state every plain byte leads to -----------------------
 *
 * As formcast._subset's step_state and plain_step, for sets of stacks: a walk below an
 * object key's declared names reads the one to three entries the trie has below a name's
 * prefix, where a row costs a column of closures for every distinct byte (an object
 * key's first visit in a recursive schema built ~20 such rows); and a string's chain
 * reads its next link off the plain bytes alone. Each target is interned as the row
 * would intern it (the same members and acceptance) and kept; the table is left as it
 * is: a row is built whole or not at all. */

/* The state the column `targets` of the members of `sid` leads to (DEAD where all die),
 * registered when new: >= 0, STEP_NO_ROOM, or -1 with an exception set. */
static int64_t column_state(Stacks *self, int32_t sid, const int32_t *targets,
                            const Target *at) {
    Interned *states = &self->states;
    const int64_t *held = interned_members(states, sid);
    Py_ssize_t count = held[0];
    Vec *own = &self->row_members; /* aside: a closure may run Python (info_of) */
    own->size = 0;
    if (vec_reserve(own, count) < 0) return -1;
    memcpy(own->data, held + 1, (size_t)count * sizeof(int64_t));
    if (step_column(self, own->data, count, targets) < 0) return -1;
    const Vec *next = &self->found;
    if (next->size > self->max_stacks) return refuse_stacks(self, next->size);
    uint64_t h = hash_members(next->data, next->size);
    int64_t target = interned_find(states, next->data, next->size, h); /* none live: DEAD */
    if (target >= 0) return target;
    if (states->count + 1 > at->capacity) return STEP_NO_ROOM;
    return new_state(self, next->data, next->size, h, at);
}

/* The targets of the tops of state `sid`'s members on `byte`, into self->columns. */
static int top_targets(Stacks *self, int32_t sid, int byte, int32_t **targets) {
    const int64_t *held = interned_members(&self->states, sid);
    Py_ssize_t count = held[0];
    Vec *offsets = &self->top_offsets;
    if (rows_reserve(&self->columns, count) < 0 || vec_reserve(offsets, count) < 0 ||
        top_rows(self, held + 1, count, offsets->data) < 0)
        return -1;
    for (Py_ssize_t k = 0; k < count; k++)
        self->columns.data[k] = self->rows.data[offsets->data[k] + byte];
    *targets = self->columns.data;
    return 0;
}

/* The state `byte` leads to from state `sid` (its row built or not), registering it when
 * new: >= 0, STEP_NO_ROOM (nothing registered), or -1 with an exception set. Kept by
 * (state, byte). */
static int64_t step_state_in(Stacks *self, int32_t sid, int byte, const Target *at) {
    if (held_state(self, sid, at) < 0) return -1;
    if (byte < 0 || byte > 255) {
        PyErr_Format(PyExc_ValueError, "expected a byte, found %d", byte);
        return -1;
    }
    int32_t built = at->table[(Py_ssize_t)sid * 256 + byte];
    if (built != UNBUILT) return built;
    int64_t key = (int64_t)sid << 8 | byte, kept;
    if (map_get(&self->steps, key, &kept)) return kept;
    int32_t *targets;
    if (top_targets(self, sid, byte, &targets) < 0) return -1;
    int64_t target = column_state(self, sid, targets, at);
    if (target < 0) return target;
    return map_put(&self->steps, key, target) < 0 ? -1 : target;
}

/* The one state every byte of `plain` (four words of byte flags, not all clear) leads to
 * from state `sid`, its row built or not: DEAD where none lives, PLAIN_PARTS where they
 * part ways (a top's target differs between two plain bytes), registering the target
 * when new; STEP_NO_ROOM (nothing registered), -1 on error. Kept by state. */
static int64_t plain_step_in(Stacks *self, int32_t sid, const uint64_t *plain,
                             const Target *at) {
    if (held_state(self, sid, at) < 0) return -1;
    int64_t kept;
    if (map_get(&self->plain_steps, sid, &kept)) return kept;
    int bytes[256], plains = 0;
    for (int byte = 0; byte < 256; byte++)
        if (plain[byte >> 6] >> (byte & 63) & 1) bytes[plains++] = byte;
    const int32_t *row = at->table + (Py_ssize_t)sid * 256;
    int64_t target = DEAD;
    if (row[0] != UNBUILT) { /* read off the row */
        target = row[bytes[0]];
        for (int k = 1; k < plains && target != PLAIN_PARTS; k++)
            if (row[bytes[k]] != target) target = PLAIN_PARTS;
    } else {
        int32_t *targets;
        if (top_targets(self, sid, bytes[0], &targets) < 0) return -1;
        Py_ssize_t count = interned_members(&self->states, sid)[0];
        for (Py_ssize_t m = 0; m < count && target != PLAIN_PARTS; m++) {
            const int32_t *top = self->rows.data + self->top_offsets.data[m]; /* top_targets' */
            for (int k = 1; k < plains; k++)
                if (top[bytes[k]] != targets[m]) {
                    target = PLAIN_PARTS;
                    break;
                }
        }
        if (target != PLAIN_PARTS) target = column_state(self, sid, targets, at);
        if (target < 0 && target != PLAIN_PARTS) return target;
    }
    return map_put(&self->plain_steps, sid, target) < 0 ? -1 : target;
}

/* The three above, the machine they held let go before they return. */
static int build_state(Stacks *self, int32_t sid, const Target *at) {
    int status = build_state_in(self, sid, at);
    return machines_let_go(self, status);
}

static int64_t step_state(Stacks *self, int32_t sid, int byte, const Target *at) {
    int64_t target = step_state_in(self, sid, byte, at);
    return machines_let_go(self, target == -1 ? -1 : 0) < 0 ? -1 : target;
}

static int64_t plain_step(Stacks *self, int32_t sid, const uint64_t *plain, const Target *at) {
    int64_t target = plain_step_in(self, sid, plain, at);
    return machines_let_go(self, target == -1 ? -1 : 0) < 0 ? -1 : target;
}

/* -- the type ------------------------------------------------------------------------- */

static PyTypeObject StacksType;

/* Whether the C API's callers passed Stacks and a list of states (else TypeError). */
static int api_arguments(PyObject *stacks, PyObject *sets) {
    if (PyObject_TypeCheck(stacks, &StacksType) && PyList_Check(sets)) return 1;
    PyErr_SetString(PyExc_TypeError, "expected Stacks and a list of states");
    return 0;
}

/* The capsule PUSHDOWN_API: build_state for formcast._trie_walk's walks (the signature of
 * formcast._subset's; `stacks` must be a Stacks). */
static int build_state_api(PyObject *stacks, int32_t sid, int32_t *table, Py_ssize_t capacity,
                           uint8_t *accepting, PyObject *sets) {
    Target at = {table, accepting, capacity, sets};
    if (!api_arguments(stacks, sets)) return -1;
    return build_state((Stacks *)stacks, sid, &at);
}

/* The capsules PUSHDOWN_STEP_API and PUSHDOWN_PLAIN_API: step_state's and plain_step's
 * codes. */
static int64_t step_state_api(PyObject *stacks, int32_t sid, int byte, int32_t *table,
                              Py_ssize_t capacity, uint8_t *accepting, PyObject *sets) {
    Target at = {table, accepting, capacity, sets};
    if (!api_arguments(stacks, sets)) return -1;
    return step_state((Stacks *)stacks, sid, byte, &at);
}

static int64_t plain_step_api(PyObject *stacks, int32_t sid, const uint64_t *plain,
                              int32_t *table, Py_ssize_t capacity, uint8_t *accepting,
                              PyObject *sets) {
    Target at = {table, accepting, capacity, sets};
    if (!api_arguments(stacks, sets)) return -1;
    return plain_step((Stacks *)stacks, sid, plain, &at);
}

static int64_t step_of(PyObject *self, int32_t sid, int byte, const Target *at) {
    return step_state((Stacks *)self, sid, byte, at);
}

static int64_t plain_step_of(PyObject *self, int32_t sid, const uint64_t *plain,
                             const Target *at) {
    return plain_step((Stacks *)self, sid, plain, at);
}

/* step(state, byte, table, accepting, sets) -> target: see step_state (-2: no room). */
static PyObject *Stacks_step(Stacks *self, PyObject *args) {
    return step_with((PyObject *)self, args, step_of);
}

/* plain_step(state, plain, table, accepting, sets) -> target: see plain_step (plain: 32
 * bytes of byte flags; -3 where the plain bytes part ways, -2 no room). */
static PyObject *Stacks_plain_step(Stacks *self, PyObject *args) {
    return plain_step_with((PyObject *)self, args, plain_step_of);
}

static int read_frame_id(Stacks *self, PyObject *arg, int64_t *frame) {
    if (read_int(arg, frame) < 0) return -1;
    if (*frame < 0 || *frame >= frame_count(self)) {
        PyErr_Format(PyExc_ValueError, "expected a frame below %lld, found %lld",
                     (long long)frame_count(self), (long long)*frame);
        return -1;
    }
    return 0;
}

static PyObject *Stacks_frame(Stacks *self, PyObject *args) {
    long long machine, state, below;
    if (!PyArg_ParseTuple(args, "LLL:frame", &machine, &state, &below)) return NULL;
    int64_t frame = frame_of(self, machine, state, below);
    if (machines_let_go(self, frame < 0 ? -1 : 0) < 0) return NULL;
    return PyLong_FromLongLong(frame);
}

static PyObject *frame_tuple(const Stacks *self, int64_t frame) {
    const int64_t *f = frame_at(self, frame);
    return Py_BuildValue("(LLL)", (long long)f[FRAME_MACHINE], (long long)f[FRAME_STATE],
                         (long long)f[FRAME_BELOW]);
}

static PyObject *Stacks_frame_of(Stacks *self, PyObject *arg) {
    int64_t frame;
    return read_frame_id(self, arg, &frame) < 0 ? NULL : frame_tuple(self, frame);
}

static PyObject *Stacks_frames(Stacks *self, PyObject *unused) {
    (void)unused;
    PyObject *list = PyList_New(frame_count(self));
    for (int64_t frame = 0; list && frame < frame_count(self); frame++) {
        PyObject *item = frame_tuple(self, frame);
        if (!item) Py_CLEAR(list);
        else PyList_SET_ITEM(list, frame, item);
    }
    return list;
}

static PyObject *Stacks_take_frames(Stacks *self, PyObject *arg) {
    PyObject *frames = PySequence_Fast(arg, "expected a sequence of frames");
    if (!frames) return NULL;
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(frames); k++) {
        long long machine, state, below;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(frames, k), "LLL:frame", &machine,
                              &state, &below))
            break;
        int64_t again = frame_find(self, machine, state, below);
        if (again >= 0) {
            PyErr_Format(PyExc_ValueError, "expected new frames, found frame %lld again",
                         (long long)again);
            break;
        }
        if (frame_of(self, machine, state, below) < 0) break;
    }
    Py_DECREF(frames);
    if (machines_let_go(self, PyErr_Occurred() ? -1 : 0) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Stacks_closure(Stacks *self, PyObject *arg) {
    int64_t frame, offset;
    if (read_frame_id(self, arg, &frame) < 0) return NULL;
    if (frame == BOTTOM) {
        PyErr_SetString(PyExc_ValueError, "expected a frame, found the empty stack");
        return NULL;
    }
    if (machines_let_go(self, closure_at(self, frame, &offset)) < 0) return NULL;
    return frozenset_of(self->pool.data + offset + 1, self->pool.data[offset]);
}

/* The frames `iterable` yields, sorted, into self->found (each a frame held here). */
static int read_frames(Stacks *self, PyObject *iterable) {
    return read_sorted_ids(&self->found, iterable, 1, frame_count(self));
}

static PyObject *Stacks_accepts(Stacks *self, PyObject *arg) {
    if (read_frames(self, arg) < 0) return NULL;
    for (Py_ssize_t k = 0; k < self->found.size; k++)
        if (lone_end(self, self->found.data[k])) Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

static PyObject *Stacks_members(Stacks *self, PyObject *arg) {
    return interned_members_of(&self->states, arg);
}

static PyObject *Stacks_find(Stacks *self, PyObject *arg) {
    if (read_frames(self, arg) < 0) return NULL;
    const Vec *found = &self->found;
    return PyLong_FromLongLong(interned_find(&self->states, found->data, found->size,
                                             hash_members(found->data, found->size)));
}

static int build_row_of(PyObject *self, int32_t sid, const Target *at) {
    return build_state((Stacks *)self, sid, at);
}

/* build_rows(states, table, accepting, sets) -> next: see the module's docstring. */
static PyObject *Stacks_build_rows(Stacks *self, PyObject *args) {
    return build_rows_with((PyObject *)self, args, build_row_of);
}

static int Stacks_init(Stacks *self, PyObject *args, PyObject *kwargs) {
    PyObject *info_of, *initials, *too_many, *automata;
    Py_ssize_t max_stacks;
    int call_byte, width;
    Py_buffer digits;
    if (kwargs && PyDict_Size(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Stacks() takes positional arguments only");
        return -1;
    }
    if (self->info_of) {
        PyErr_SetString(PyExc_TypeError, "Stacks() is initialised once");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OOnOO!(iy*i):Stacks", &info_of, &initials, &max_stacks,
                          &too_many, &PyList_Type, &automata, &call_byte, &digits, &width))
        return -1;
    int fits = digits.len > 0 && digits.len <= 16 && call_byte >= 0 && call_byte < 256 &&
               width > 0;
    if (fits) {
        memcpy(self->digits, digits.buf, (size_t)digits.len);
        self->digit_count = (int)digits.len;
    }
    PyBuffer_Release(&digits);
    if (!fits) {
        PyErr_SetString(PyExc_ValueError,
                        "expected markers as (call byte, 1 to 16 digit bytes, width >= 1)");
        return -1;
    }
    self->call_byte = call_byte;
    self->width = width;
    self->is_marker[call_byte] = 1;
    for (int k = 0; k < self->digit_count; k++) self->is_marker[self->digits[k]] = 1;
    if (!PyCallable_Check(info_of) || !PyCallable_Check(too_many)) {
        PyErr_SetString(PyExc_TypeError, "expected info_of and too_many callable");
        return -1;
    }
    PyObject *fast = PySequence_Fast(initials, "expected the machines' initial states");
    if (!fast) return -1;
    if (PySequence_Fast_GET_SIZE(fast) != PyList_GET_SIZE(automata)) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "expected one initial state an automaton");
        return -1;
    }
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(fast); k++) {
        int64_t initial;
        if (read_int(PySequence_Fast_GET_ITEM(fast, k), &initial) < 0 ||
            vec_push(&self->initials, initial) < 0)
            break;
    }
    Py_DECREF(fast);
    if (PyErr_Occurred()) return -1;
    self->held_machine = -1;
    self->machine_parts = PyMem_Calloc((size_t)(3 * PyList_GET_SIZE(automata) + 1),
                                       sizeof(PyObject *));
    if (!self->machine_parts) {
        PyErr_NoMemory();
        return -1;
    }
    /* frame 0: BOTTOM, the empty stack, under every stack's last frame */
    if (vec_reserve(&self->frames, FRAME_FIELDS) < 0) return -1;
    const int64_t bottom[FRAME_FIELDS] = {-1, -1, -1, -1, -1, -1};
    memcpy(self->frames.data, bottom, sizeof(bottom));
    self->frames.size = FRAME_FIELDS;
    self->max_stacks = max_stacks;
    /* formcast._subset builds the machines' rows here where it is there */
    self->subset = (BuildState)PyCapsule_Import(SUBSET_API, 0);
    if (self->subset) self->subset_step = (StepState)PyCapsule_Import(STEP_API, 0);
    if (self->subset_step) self->subset_live = (LiveBytes)PyCapsule_Import(LIVE_API, 0);
    if (!self->subset_live) { /* all three, or the machines' rows are asked of info_of */
        PyErr_Clear();
        self->subset = NULL;
        self->subset_step = NULL;
    }
    Py_INCREF(info_of);
    Py_INCREF(too_many);
    Py_INCREF(automata);
    self->info_of = info_of;
    self->too_many = too_many;
    self->automata = automata;
    return 0;
}

static void Stacks_dealloc(Stacks *self) {
    Py_CLEAR(self->info_of);
    Py_CLEAR(self->too_many);
    if (self->machine_parts && self->automata)
        for (Py_ssize_t k = 0; k < 3 * PyList_GET_SIZE(self->automata); k++)
            Py_CLEAR(self->machine_parts[k]);
    PyMem_Free(self->machine_parts);
    Py_CLEAR(self->automata);
    Vec *vecs[] = {&self->initials, &self->infos, &self->calls, &self->frames, &self->pool,
                   &self->stack,
                   &self->kept, &self->found, &self->row_members, &self->successors,
                   &self->frontier, &self->following, &self->top_offsets};
    for (size_t k = 0; k < sizeof(vecs) / sizeof(vecs[0]); k++) vec_free(vecs[k]);
    map_free(&self->info_index);
    map_free(&self->frame_heads);
    map_free(&self->steps);
    map_free(&self->plain_steps);
    interned_free(&self->states);
    PyMem_Free(self->rows.data);
    PyMem_Free(self->columns.data);
    PyMem_Free(self->seen.keys);
    PyMem_Free(self->seen.stamps);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Stacks_frame_count(Stacks *self, void *unused) {
    (void)unused;
    return PyLong_FromLongLong(frame_count(self));
}

static PyObject *Stacks_rows_computed(Stacks *self, void *unused) {
    (void)unused;
    return PyLong_FromSsize_t(self->rows_computed);
}

static PyGetSetDef Stacks_getset[] = {
    {"frame_count", (getter)Stacks_frame_count, NULL, "Frames held, BOTTOM included.", NULL},
    {"rows_computed", (getter)Stacks_rows_computed, NULL,
     "Rows computed so far, those dropped for want of room in the table included.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Stacks_methods[] = {
    {"frame", (PyCFunction)Stacks_frame, METH_VARARGS,
     "frame(machine, state, below) -> frame: the frame's id, made if new."},
    {"frame_of", (PyCFunction)Stacks_frame_of, METH_O,
     "frame_of(frame) -> (machine, state, below)."},
    {"frames", (PyCFunction)Stacks_frames, METH_NOARGS,
     "frames() -> [(machine, state, below)]: every frame, in id order."},
    {"take_frames", (PyCFunction)Stacks_take_frames, METH_O,
     "take_frames(frames): append frames read back, each new, in order."},
    {"closure", (PyCFunction)Stacks_closure, METH_O,
     "closure(frame) -> frozenset: the stacks the frame stands for (see the module)."},
    {"accepts", (PyCFunction)Stacks_accepts, METH_O,
     "accepts(members) -> bool: whether a state of these stacks may end."},
    {"members", (PyCFunction)Stacks_members, METH_O,
     "members(state) -> frozenset: the stacks of a state held here."},
    {"find", (PyCFunction)Stacks_find, METH_O,
     "find(members) -> state: the state held here with these stacks, or -1."},
    {"step", (PyCFunction)Stacks_step, METH_VARARGS,
     "step(state, byte, table, accepting, sets) -> target: the entry of `state`'s row at"
     " `byte`, computed alone where the row is not built (-2: no room for a new state)."},
    {"plain_step", (PyCFunction)Stacks_plain_step, METH_VARARGS,
     "plain_step(state, plain, table, accepting, sets) -> target: the one state every byte "
     "flagged in `plain` (32 bytes) leads to; 0 none lives, -3 they part ways, -2 no room."},
    {"build_rows", (PyCFunction)Stacks_build_rows, METH_VARARGS,
     "build_rows(states, table, accepting, sets) -> next: the rows of the states not built"
     " yet, in order, into the table; see the module."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StacksType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "formcast._pushdown.Stacks",
    .tp_basicsize = sizeof(Stacks),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A pushdown automaton's frames and sets of stacks, and their rows (see the"
              " module).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Stacks_init,
    .tp_dealloc = (destructor)Stacks_dealloc,
    .tp_methods = Stacks_methods,
    .tp_getset = Stacks_getset,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "formcast._pushdown",
    "The rows of a pushdown automaton's sets of stacks, in C (see"
    " formcast.automaton.pushdown).",
    -1, NULL,
};

PyMODINIT_FUNC PyInit__pushdown(void) {
    PyObject *module = module_with_rows(&module_def, &StacksType, "Stacks",
                                        (void *)build_state_api, PUSHDOWN_API);
    if (!module) return NULL;
    if (add_capsule(module, (void *)step_state_api, PUSHDOWN_STEP_API, "_step_state") < 0 ||
        add_capsule(module, (void *)plain_step_api, PUSHDOWN_PLAIN_API, "_plain_step") < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
