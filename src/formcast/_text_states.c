/* formcast._text_states: the states of a FromText slot's text automaton, in C.
 *
 * formcast.automaton.text determinizes a text's NFA lazily: a state is a set of NFA nodes
 * (ascending) and the characters read so far (capped); its row groups the byte edges of
 * its nodes by byte, and each byte's target nodes are interned as a state. A request
 * builds a few hundred such states for its first masks; in Python each costs a few
 * microseconds (a tuple, a dict entry, a loop over the nodes). This module keeps the
 * states and builds their rows in C, with the same meaning and the same numbering (a
 * row's new states are interned in ascending byte order, as the Python build does).
 *
 * It is optional: text.py keeps its Python states where this module was not built, and
 * the tests compare both on random texts and options (tests/test_from_text.py).
 *
 * TextStates(offsets, read, to, first, ends, cap, limit, minimum)
 *   offsets (int64, nodes + 1): the CSR of the byte edges by source node; read (uint8),
 *   to (int32) and first (uint8, 1 where the edge starts a character) per edge; ends
 *   (uint8, per node: a value may end there); cap: the largest count kept; limit: the
 *   most characters a value may have (-1: no bound); minimum: the fewest. The buffers are
 *   copied. State 0 is the dead state (no nodes).
 * .intern(nodes, count) -> int: the state of `nodes` (an int32 buffer, ascending, each a
 *   node id) having read `count` characters; 0 when `nodes` is empty.
 * .sparse_row(state) -> tuple of (byte, state): the live transitions, bytes ascending;
 *   a byte's count is that of its edge to the lowest target node. Built once per state.
 * .is_accepting(state) -> bool, .count(state) -> int, .nodes(state) -> bytes (int32).
 * len(...): the states interned so far, the dead one included.
 *
 * The caller serialises calls (the GIL is held throughout). Out-of-range ids raise
 * ValueError. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t byte;
    int32_t target;
    int32_t count;
    int32_t order;
} Move;

typedef struct {
    PyObject_HEAD
    int64_t *offsets;
    uint8_t *read;
    int32_t *to;
    uint8_t *first;
    uint8_t *ends;
    Py_ssize_t nodes, edges;
    int32_t cap, limit, minimum;
    /* the states: node lists in one pool */
    int32_t *pool;
    Py_ssize_t pool_size, pool_capacity;
    Py_ssize_t *start;
    int32_t *length, *count;
    uint8_t *accepting;
    PyObject **rows; /* sparse rows built so far (NULL: not yet) */
    Py_ssize_t states, state_capacity;
    /* open addressing over state ids (-1: empty) */
    int64_t *slots;
    Py_ssize_t slot_capacity;
    /* scratch for a row's moves */
    Move *moves;
    Py_ssize_t move_capacity;
} TextStates;

static uint64_t hash_state(const int32_t *nodes, Py_ssize_t length, int32_t count) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)count;
    for (Py_ssize_t i = 0; i < length; i++) {
        h ^= (uint64_t)(uint32_t)nodes[i];
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    return h;
}

static int same_state(const TextStates *self, Py_ssize_t sid, const int32_t *nodes,
                      Py_ssize_t length, int32_t count) {
    return self->length[sid] == length && self->count[sid] == count &&
           memcmp(self->pool + self->start[sid], nodes, (size_t)length * sizeof(int32_t)) == 0;
}

/* Room for `needed` items of `itemsize` bytes in the array whose pointer is at `field`
 * (read and written by memcpy: any pointer type) and whose room is *capacity: doubled
 * (from `initial`) until it fits; -1 on error. */
static int reserve(void *field, Py_ssize_t *capacity, Py_ssize_t needed, size_t itemsize,
                   Py_ssize_t initial) {
    if (needed <= *capacity) return 0;
    Py_ssize_t grown = *capacity ? 2 * *capacity : initial;
    while (grown < needed) grown *= 2;
    void *data;
    memcpy(&data, field, sizeof data);
    void *moved = PyMem_Realloc(data, (size_t)grown * itemsize);
    if (!moved) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(field, &moved, sizeof moved);
    *capacity = grown;
    return 0;
}

static int grow_slots(TextStates *self) {
    Py_ssize_t capacity = self->slot_capacity ? 2 * self->slot_capacity : 1024;
    int64_t *slots = PyMem_Malloc((size_t)capacity * sizeof(int64_t));
    if (!slots) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < capacity; i++) slots[i] = -1;
    for (Py_ssize_t sid = 1; sid < self->states; sid++) {
        uint64_t h = hash_state(self->pool + self->start[sid], self->length[sid], self->count[sid]);
        Py_ssize_t i = (Py_ssize_t)(h & (uint64_t)(capacity - 1));
        while (slots[i] >= 0) i = (i + 1) & (capacity - 1);
        slots[i] = sid;
    }
    PyMem_Free(self->slots);
    self->slots = slots;
    self->slot_capacity = capacity;
    return 0;
}

static int grow_states(TextStates *self) {
    Py_ssize_t capacity = self->state_capacity ? 2 * self->state_capacity : 256;
    Py_ssize_t *start = PyMem_Realloc(self->start, (size_t)capacity * sizeof(Py_ssize_t));
    if (!start) goto fail;
    self->start = start;
    int32_t *length = PyMem_Realloc(self->length, (size_t)capacity * sizeof(int32_t));
    if (!length) goto fail;
    self->length = length;
    int32_t *count = PyMem_Realloc(self->count, (size_t)capacity * sizeof(int32_t));
    if (!count) goto fail;
    self->count = count;
    uint8_t *accepting = PyMem_Realloc(self->accepting, (size_t)capacity);
    if (!accepting) goto fail;
    self->accepting = accepting;
    PyObject **rows = PyMem_Realloc(self->rows, (size_t)capacity * sizeof(PyObject *));
    if (!rows) goto fail;
    self->rows = rows;
    self->state_capacity = capacity;
    return 0;
fail:
    PyErr_NoMemory();
    return -1;
}

/* The id of the state (nodes, count), interned if new; -1 on error. */
static Py_ssize_t intern_state(TextStates *self, const int32_t *nodes, Py_ssize_t length,
                               int32_t count) {
    if (length == 0) return 0;
    if (2 * (self->states + 1) > self->slot_capacity && grow_slots(self) < 0) return -1;
    uint64_t h = hash_state(nodes, length, count);
    Py_ssize_t mask = self->slot_capacity - 1;
    Py_ssize_t i = (Py_ssize_t)(h & (uint64_t)mask);
    for (; self->slots[i] >= 0; i = (i + 1) & mask) {
        if (same_state(self, (Py_ssize_t)self->slots[i], nodes, length, count))
            return (Py_ssize_t)self->slots[i];
    }
    if (self->states == self->state_capacity && grow_states(self) < 0) return -1;
    if (reserve(&self->pool, &self->pool_capacity, self->pool_size + length,
                sizeof(int32_t), 4096) < 0)
        return -1;
    Py_ssize_t sid = self->states++;
    memcpy(self->pool + self->pool_size, nodes, (size_t)length * sizeof(int32_t));
    self->start[sid] = self->pool_size;
    self->pool_size += length;
    self->length[sid] = (int32_t)length;
    self->count[sid] = count;
    int ends = count == 0;
    for (Py_ssize_t k = 0; k < length && !ends; k++) ends = self->ends[nodes[k]] != 0;
    self->accepting[sid] = count >= self->minimum && ends;
    self->rows[sid] = NULL;
    self->slots[i] = sid;
    return sid;
}

static int compare_moves(const void *a, const void *b) {
    const Move *x = a, *y = b;
    if (x->byte != y->byte) return x->byte < y->byte ? -1 : 1;
    if (x->target != y->target) return x->target < y->target ? -1 : 1;
    return x->order < y->order ? -1 : (x->order > y->order);
}

static void sort_moves(Move *moves, Py_ssize_t size) {
    if (size > 32) {
        qsort(moves, (size_t)size, sizeof(Move), compare_moves);
        return;
    }
    for (Py_ssize_t i = 1; i < size; i++) { /* insertion: rows of a few nodes */
        Move held = moves[i];
        Py_ssize_t j = i;
        while (j > 0 && compare_moves(&moves[j - 1], &held) > 0) {
            moves[j] = moves[j - 1];
            j--;
        }
        moves[j] = held;
    }
}

static int check_state(const TextStates *self, Py_ssize_t state) {
    if (state < 0 || state >= self->states) {
        PyErr_Format(PyExc_ValueError, "expected a state in [0, %zd), found %zd", self->states,
                     state);
        return -1;
    }
    return 0;
}

/* The moves of `state`'s nodes, sorted by (byte, target, edge order); -1 on error. */
static Py_ssize_t gather_moves(TextStates *self, Py_ssize_t state) {
    const int32_t *nodes = self->pool + self->start[state];
    Py_ssize_t size = 0, length = self->length[state];
    int32_t base = self->count[state];
    for (Py_ssize_t k = 0; k < length; k++) {
        int64_t lo = self->offsets[nodes[k]], hi = self->offsets[nodes[k] + 1];
        if (reserve(&self->moves, &self->move_capacity, size + (Py_ssize_t)(hi - lo),
                    sizeof(Move), 256) < 0)
            return -1;
        for (int64_t e = lo; e < hi; e++) {
            int32_t counted = base + self->first[e];
            if (self->limit >= 0 && counted > self->limit) continue;
            Move *move = &self->moves[size];
            move->byte = self->read[e];
            move->target = self->to[e];
            move->count = counted;
            move->order = (int32_t)size;
            size++;
        }
    }
    sort_moves(self->moves, size);
    return size;
}

static PyObject *build_row(TextStates *self, Py_ssize_t state) {
    Py_ssize_t size = gather_moves(self, state);
    if (size < 0) return NULL;
    PyObject *pairs = PyList_New(0);
    int32_t *targets = size ? PyMem_Malloc((size_t)size * sizeof(int32_t)) : NULL;
    if (!pairs || (size && !targets)) goto fail;
    for (Py_ssize_t a = 0; a < size;) {
        Py_ssize_t b = a, distinct = 0;
        while (b < size && self->moves[b].byte == self->moves[a].byte) {
            int32_t target = self->moves[b].target;
            if (!distinct || targets[distinct - 1] != target) targets[distinct++] = target;
            b++;
        }
        int32_t counted = self->moves[a].count; /* the lowest target's, first in edge order */
        if (counted > self->cap) counted = self->cap;
        Py_ssize_t found = intern_state(self, targets, distinct, counted);
        if (found < 0) goto fail;
        PyObject *pair = Py_BuildValue("(in)", (int)self->moves[a].byte, found);
        if (!pair || PyList_Append(pairs, pair) < 0) {
            Py_XDECREF(pair);
            goto fail;
        }
        Py_DECREF(pair);
        a = b;
    }
    PyMem_Free(targets);
    PyObject *row = PyList_AsTuple(pairs);
    Py_DECREF(pairs);
    return row;
fail:
    PyMem_Free(targets);
    Py_XDECREF(pairs);
    return NULL;
}

static PyObject *TextStates_sparse_row(TextStates *self, PyObject *arg) {
    Py_ssize_t state = PyLong_AsSsize_t(arg);
    if (state == -1 && PyErr_Occurred()) return NULL;
    if (check_state(self, state) < 0) return NULL;
    if (!self->rows[state]) {
        PyObject *row = build_row(self, state);
        if (!row) return NULL;
        self->rows[state] = row; /* after the build, which may move the arrays */
    }
    Py_INCREF(self->rows[state]);
    return self->rows[state];
}

static PyObject *TextStates_intern(TextStates *self, PyObject *args) {
    Py_buffer view;
    int count;
    if (!PyArg_ParseTuple(args, "y*i", &view, &count)) return NULL;
    Py_ssize_t length = view.len / (Py_ssize_t)sizeof(int32_t);
    const int32_t *nodes = view.buf;
    for (Py_ssize_t k = 0; k < length; k++) {
        if (nodes[k] < 0 || nodes[k] >= self->nodes || (k && nodes[k] <= nodes[k - 1])) {
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_ValueError,
                            "expected ascending distinct node ids within the automaton");
            return NULL;
        }
    }
    Py_ssize_t found = intern_state(self, nodes, length, count);
    PyBuffer_Release(&view);
    return found < 0 ? NULL : PyLong_FromSsize_t(found);
}

static PyObject *TextStates_is_accepting(TextStates *self, PyObject *arg) {
    Py_ssize_t state = PyLong_AsSsize_t(arg);
    if (state == -1 && PyErr_Occurred()) return NULL;
    if (check_state(self, state) < 0) return NULL;
    return PyBool_FromLong(state != 0 && self->accepting[state]);
}

static PyObject *TextStates_count(TextStates *self, PyObject *arg) {
    Py_ssize_t state = PyLong_AsSsize_t(arg);
    if (state == -1 && PyErr_Occurred()) return NULL;
    if (check_state(self, state) < 0) return NULL;
    return PyLong_FromLong(self->count[state]);
}

static PyObject *TextStates_nodes(TextStates *self, PyObject *arg) {
    Py_ssize_t state = PyLong_AsSsize_t(arg);
    if (state == -1 && PyErr_Occurred()) return NULL;
    if (check_state(self, state) < 0) return NULL;
    return PyBytes_FromStringAndSize((const char *)(self->pool + self->start[state]),
                                     (Py_ssize_t)self->length[state] * (Py_ssize_t)sizeof(int32_t));
}

static Py_ssize_t TextStates_len(TextStates *self) { return self->states; }

/* A copy of a buffer of `itemsize`-byte items; its item count in *count. */
static void *copy_buffer(PyObject *object, Py_ssize_t itemsize, Py_ssize_t *count) {
    Py_buffer view;
    if (PyObject_GetBuffer(object, &view, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (view.itemsize != itemsize) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "expected items of %zd bytes, found %zd", itemsize,
                     view.itemsize);
        return NULL;
    }
    void *data = PyMem_Malloc(view.len ? (size_t)view.len : 1);
    if (!data) {
        PyBuffer_Release(&view);
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(data, view.buf, (size_t)view.len);
    *count = view.len / itemsize;
    PyBuffer_Release(&view);
    return data;
}

static int TextStates_init(TextStates *self, PyObject *args, PyObject *kwargs) {
    PyObject *offsets, *read, *to, *first, *ends;
    int cap, limit, minimum;
    static char *names[] = {"offsets", "read", "to", "first", "ends", "cap", "limit", "minimum", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOiii", names, &offsets, &read, &to,
                                     &first, &ends, &cap, &limit, &minimum))
        return -1;
    if (self->offsets) {
        PyErr_SetString(PyExc_RuntimeError, "TextStates is initialised once");
        return -1;
    }
    Py_ssize_t offset_count, read_count, to_count, first_count, end_count;
    self->offsets = copy_buffer(offsets, 8, &offset_count);
    if (!self->offsets) return -1;
    self->read = copy_buffer(read, 1, &read_count);
    if (!self->read) return -1;
    self->to = copy_buffer(to, 4, &to_count);
    if (!self->to) return -1;
    self->first = copy_buffer(first, 1, &first_count);
    if (!self->first) return -1;
    self->ends = copy_buffer(ends, 1, &end_count);
    if (!self->ends) return -1;
    self->nodes = offset_count - 1;
    self->edges = read_count;
    if (self->nodes < 0 || end_count != self->nodes || to_count != read_count ||
        first_count != read_count || self->offsets[0] != 0 ||
        self->offsets[self->nodes] != read_count) {
        PyErr_SetString(PyExc_ValueError,
                        "expected a CSR of edges: offsets of nodes + 1, one ends flag a node, "
                        "read, to and first of one length");
        return -1;
    }
    for (Py_ssize_t n = 0; n < self->nodes; n++) {
        if (self->offsets[n] > self->offsets[n + 1]) {
            PyErr_SetString(PyExc_ValueError, "expected non-decreasing offsets");
            return -1;
        }
    }
    for (Py_ssize_t e = 0; e < self->edges; e++) {
        if (self->to[e] < 0 || self->to[e] >= self->nodes) {
            PyErr_SetString(PyExc_ValueError, "expected edge targets within the nodes");
            return -1;
        }
    }
    self->cap = cap;
    self->limit = limit;
    self->minimum = minimum;
    if (grow_states(self) < 0 || grow_slots(self) < 0) return -1;
    self->start[0] = 0; /* the dead state */
    self->length[0] = 0;
    self->count[0] = 0;
    self->accepting[0] = 0;
    self->rows[0] = PyTuple_New(0);
    if (!self->rows[0]) return -1;
    self->states = 1;
    return 0;
}

static void TextStates_dealloc(TextStates *self) {
    for (Py_ssize_t sid = 0; sid < self->states; sid++) Py_XDECREF(self->rows[sid]);
    PyMem_Free(self->offsets);
    PyMem_Free(self->read);
    PyMem_Free(self->to);
    PyMem_Free(self->first);
    PyMem_Free(self->ends);
    PyMem_Free(self->pool);
    PyMem_Free(self->start);
    PyMem_Free(self->length);
    PyMem_Free(self->count);
    PyMem_Free(self->accepting);
    PyMem_Free(self->rows);
    PyMem_Free(self->slots);
    PyMem_Free(self->moves);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef TextStates_methods[] = {
    {"intern", (PyCFunction)TextStates_intern, METH_VARARGS,
     "intern(nodes, count) -> the state of these nodes (int32, ascending), count read"},
    {"sparse_row", (PyCFunction)TextStates_sparse_row, METH_O,
     "sparse_row(state) -> ((byte, state), ...): the live transitions, bytes ascending"},
    {"is_accepting", (PyCFunction)TextStates_is_accepting, METH_O,
     "is_accepting(state) -> whether a value may end there"},
    {"count", (PyCFunction)TextStates_count, METH_O, "count(state) -> characters read (capped)"},
    {"nodes", (PyCFunction)TextStates_nodes, METH_O, "nodes(state) -> its nodes (int32 bytes)"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods TextStates_sequence = {.sq_length = (lenfunc)TextStates_len};

static PyTypeObject TextStatesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "formcast._text_states.TextStates",
    .tp_basicsize = sizeof(TextStates),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The states of a text automaton and their rows (see the module).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)TextStates_init,
    .tp_dealloc = (destructor)TextStates_dealloc,
    .tp_methods = TextStates_methods,
    .tp_as_sequence = &TextStates_sequence,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "formcast._text_states",
    .m_doc = "The states of a FromText slot's text automaton, in C (see text_states.py).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__text_states(void) {
    if (PyType_Ready(&TextStatesType) < 0) return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (!module) return NULL;
    Py_INCREF(&TextStatesType);
    if (PyModule_AddObject(module, "TextStates", (PyObject *)&TextStatesType) < 0) {
        Py_DECREF(&TextStatesType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
