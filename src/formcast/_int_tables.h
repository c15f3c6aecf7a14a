/* Growable int64 vectors, an int64 -> int64 map, a set cleared in O(1), the sorting of
 * ids, an automaton's states interned by content and the building of its rows: what
 * formcast._subset (_subset.c) and formcast._pushdown (_pushdown.c) both use. Each
 * extension compiles its own copy (static functions). */
#ifndef FORMCAST_INT_TABLES_H
#define FORMCAST_INT_TABLES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_row_api.h"

/* -- growable int64 vectors ------------------------------------------------------------ */
typedef struct {
    int64_t *data;
    Py_ssize_t size, capacity;
} Vec;

/* Room in a growable buffer of `item`-byte items (*data, `size` used of *capacity) for
 * `extra` more, doubling from `initial`: 0, or -1 (MemoryError). */
static int reserve_items(void **data, Py_ssize_t size, Py_ssize_t *capacity, Py_ssize_t extra,
                         size_t item, Py_ssize_t initial) {
    if (size + extra <= *capacity) return 0;
    Py_ssize_t grown = *capacity ? *capacity : initial;
    while (grown < size + extra) grown *= 2;
    void *moved = PyMem_Realloc(*data, (size_t)grown * item);
    if (!moved) {
        PyErr_NoMemory();
        return -1;
    }
    *data = moved;
    *capacity = grown;
    return 0;
}

static int vec_reserve(Vec *v, Py_ssize_t extra) {
    void *data = v->data;
    if (reserve_items(&data, v->size, &v->capacity, extra, sizeof(int64_t), 64) < 0) return -1;
    v->data = data;
    return 0;
}

static int vec_push(Vec *v, int64_t x) {
    if (v->size >= v->capacity && vec_reserve(v, 1) < 0) return -1;
    v->data[v->size++] = x;
    return 0;
}

static void vec_free(Vec *v) {
    PyMem_Free(v->data);
    v->data = NULL;
    v->size = v->capacity = 0;
}

/* -- an int64 -> int64 map, and a set cleared in O(1) (open addressing) ------------------ */
static inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

typedef struct {
    int64_t *keys; /* -1: empty (ids are >= 0) */
    int64_t *values;
    Py_ssize_t capacity, size; /* capacity: a power of two */
} Map;

static int map_grow(Map *m) {
    Py_ssize_t capacity = m->capacity ? 2 * m->capacity : 1024;
    int64_t *keys = PyMem_Malloc((size_t)capacity * sizeof(int64_t));
    int64_t *values = PyMem_Malloc((size_t)capacity * sizeof(int64_t));
    if (!keys || !values) {
        PyMem_Free(keys);
        PyMem_Free(values);
        PyErr_NoMemory();
        return -1;
    }
    memset(keys, 0xff, (size_t)capacity * sizeof(int64_t));
    for (Py_ssize_t i = 0; i < m->capacity; i++) {
        if (m->keys[i] < 0) continue;
        Py_ssize_t slot = (Py_ssize_t)(mix((uint64_t)m->keys[i]) & (uint64_t)(capacity - 1));
        while (keys[slot] >= 0) slot = (slot + 1) & (capacity - 1);
        keys[slot] = m->keys[i];
        values[slot] = m->values[i];
    }
    PyMem_Free(m->keys);
    PyMem_Free(m->values);
    m->keys = keys;
    m->values = values;
    m->capacity = capacity;
    return 0;
}

static int64_t *map_slot(Map *m, int64_t key) { /* the value of `key`, or NULL */
    if (!m->capacity) return NULL;
    Py_ssize_t mask = m->capacity - 1;
    Py_ssize_t slot = (Py_ssize_t)(mix((uint64_t)key) & (uint64_t)mask);
    while (m->keys[slot] >= 0) {
        if (m->keys[slot] == key) return &m->values[slot];
        slot = (slot + 1) & mask;
    }
    return NULL;
}

static int map_get(Map *m, int64_t key, int64_t *value) {
    const int64_t *found = map_slot(m, key);
    if (found) *value = *found;
    return found != NULL;
}

static int map_put(Map *m, int64_t key, int64_t value) { /* key not present */
    if (2 * (m->size + 1) > m->capacity && map_grow(m) < 0) return -1;
    Py_ssize_t mask = m->capacity - 1;
    Py_ssize_t slot = (Py_ssize_t)(mix((uint64_t)key) & (uint64_t)mask);
    while (m->keys[slot] >= 0) slot = (slot + 1) & mask;
    m->keys[slot] = key;
    m->values[slot] = value;
    m->size++;
    return 0;
}

static void map_free(Map *m) {
    PyMem_Free(m->keys);
    PyMem_Free(m->values);
    m->keys = m->values = NULL;
    m->capacity = m->size = 0;
}

typedef struct {
    int64_t *keys;
    uint32_t *stamps; /* a slot holds a key of this search iff its stamp is `stamp` */
    Py_ssize_t capacity, size;
    uint32_t stamp;
} Seen;

static void seen_clear(Seen *s) {
    s->size = 0;
    if (++s->stamp == 0) { /* wrapped: forget every old stamp */
        if (s->stamps) memset(s->stamps, 0, (size_t)s->capacity * sizeof(uint32_t));
        s->stamp = 1;
    }
}

static int seen_insert(Seen *s, int64_t key); /* 1: added, 0: there already, -1: error */

static int seen_grow(Seen *s) {
    Py_ssize_t old_capacity = s->capacity;
    int64_t *old_keys = s->keys;
    uint32_t *old_stamps = s->stamps;
    uint32_t stamp = s->stamp;
    Py_ssize_t capacity = old_capacity ? 2 * old_capacity : 1024;
    s->keys = PyMem_Malloc((size_t)capacity * sizeof(int64_t));
    s->stamps = PyMem_Calloc((size_t)capacity, sizeof(uint32_t));
    if (!s->keys || !s->stamps) {
        PyMem_Free(s->keys);
        PyMem_Free(s->stamps);
        s->keys = old_keys;
        s->stamps = old_stamps;
        PyErr_NoMemory();
        return -1;
    }
    s->capacity = capacity;
    s->size = 0;
    s->stamp = 1;
    for (Py_ssize_t i = 0; i < old_capacity; i++)
        if (old_stamps[i] == stamp) seen_insert(s, old_keys[i]); /* room: cannot fail */
    PyMem_Free(old_keys);
    PyMem_Free(old_stamps);
    return 0;
}

static int seen_insert(Seen *s, int64_t key) {
    if (2 * (s->size + 1) > s->capacity && seen_grow(s) < 0) return -1;
    Py_ssize_t mask = s->capacity - 1;
    Py_ssize_t slot = (Py_ssize_t)(mix((uint64_t)key) & (uint64_t)mask);
    while (s->stamps[slot] == s->stamp) {
        if (s->keys[slot] == key) return 0;
        slot = (slot + 1) & mask;
    }
    s->keys[slot] = key;
    s->stamps[slot] = s->stamp;
    s->size++;
    return 1;
}

/* Sort ids ascending in place: an insertion sort of short runs, a quicksort (median of
 * three, the smaller side first, so the stack stays logarithmic) above them. The C
 * library's qsort calls a comparison through a pointer for every pair, and a row's
 * successor sets (the union of many closures) made that most of a large state's row. */
static void sort_ids(int64_t *ids, Py_ssize_t count) {
    Py_ssize_t lows[64], highs[64];
    int depth = 0;
    Py_ssize_t lo = 0, hi = count - 1;
    for (;;) {
        while (hi - lo >= 16) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            int64_t a = ids[lo], b = ids[mid], c = ids[hi]; /* the median of three */
            int64_t pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
            Py_ssize_t i = lo, j = hi;
            while (i <= j) {
                while (ids[i] < pivot) i++;
                while (ids[j] > pivot) j--;
                if (i <= j) {
                    int64_t swap = ids[i];
                    ids[i++] = ids[j];
                    ids[j--] = swap;
                }
            }
            /* [lo, j] and [i, hi]: the larger waits on the stack */
            if (j - lo < hi - i) {
                if (i < hi) lows[depth] = i, highs[depth++] = hi;
                hi = j;
            } else {
                if (lo < j) lows[depth] = lo, highs[depth++] = j;
                lo = i;
            }
        }
        for (Py_ssize_t k = lo + 1; k <= hi; k++) {
            int64_t id = ids[k];
            Py_ssize_t at = k;
            for (; at > lo && ids[at - 1] > id; at--) ids[at] = ids[at - 1];
            ids[at] = id;
        }
        if (!depth) return;
        depth--;
        lo = lows[depth];
        hi = highs[depth];
    }
}

/* Sort ids ascending in place and drop the repeats; their number left. */
static Py_ssize_t sort_unique(int64_t *ids, Py_ssize_t count) {
    sort_ids(ids, count);
    Py_ssize_t unique = 0;
    for (Py_ssize_t k = 0; k < count; k++)
        if (!unique || ids[k] != ids[unique - 1]) ids[unique++] = ids[k];
    return unique;
}

/* A hash of `count` sorted ids (a state's members). */
static uint64_t hash_members(const int64_t *ids, Py_ssize_t count) {
    uint64_t h = mix((uint64_t)count + 0x9e3779b97f4a7c15ULL);
    for (Py_ssize_t k = 0; k < count; k++) h = mix(h ^ (uint64_t)ids[k]) + (uint64_t)k;
    return h;
}

/* -- an automaton's states: sets of ids interned by content -------------------------------
 * State k's sorted ids lie at members[member_at[k]] (their count, then the ids); heads
 * maps a hash of ids (63 bits: keys are >= 0) to the last state with it, next_same[k] to
 * the one before (-1: none), so equal ids are one state whatever the collisions. The
 * automaton's list `sets` has one entry a state: the frozenset of a state registered
 * from Python, None for one made in C (no Python object a state; the automaton asks
 * members() for it when it needs one). A state registered from Python is taken in
 * (interned_sync) before any state is made in C. */

typedef struct {
    Vec member_at, members, next_same;
    Map heads;
    Py_ssize_t count; /* states held: ids 0 .. count - 1 */
} Interned;

/* State k's ids: their count, then the ids. */
static inline const int64_t *interned_members(const Interned *t, int64_t k) {
    return t->members.data + t->member_at.data[k];
}

/* The state of these sorted ids (hash `h`), or -1. */
static int64_t interned_find(const Interned *t, const int64_t *ids, Py_ssize_t count,
                             uint64_t h) {
    int64_t sid;
    if (!map_get((Map *)&t->heads, (int64_t)(h >> 1), &sid)) return -1;
    for (; sid >= 0; sid = t->next_same.data[sid]) {
        const int64_t *known = interned_members(t, sid);
        if (known[0] == count && !memcmp(known + 1, ids, (size_t)count * sizeof(int64_t)))
            return sid;
    }
    return -1;
}

/* Room to intern one more state of `count` ids (0), or -1 (MemoryError). */
static int interned_reserve(Interned *t, Py_ssize_t count) {
    if (vec_reserve(&t->members, count + 1) < 0 || vec_reserve(&t->member_at, 1) < 0 ||
        vec_reserve(&t->next_same, 1) < 0)
        return -1;
    return 2 * (t->heads.size + 1) > t->heads.capacity ? map_grow(&t->heads) : 0;
}

/* Keep `count` sorted ids, whose hash is `h`, as the next state (id t->count) and intern
 * it; interned_reserve made room, so nothing fails. */
static void interned_add(Interned *t, const int64_t *ids, Py_ssize_t count, uint64_t h) {
    int64_t sid = t->count++;
    t->member_at.data[t->member_at.size++] = t->members.size;
    t->members.data[t->members.size++] = count;
    memcpy(t->members.data + t->members.size, ids, (size_t)count * sizeof(int64_t));
    t->members.size += count;
    int64_t *head = map_slot(&t->heads, (int64_t)(h >> 1));
    t->next_same.data[t->next_same.size++] = head ? *head : -1;
    if (head)
        *head = sid;
    else
        map_put(&t->heads, (int64_t)(h >> 1), sid); /* room was made */
}

static void interned_free(Interned *t) {
    vec_free(&t->member_at);
    vec_free(&t->members);
    vec_free(&t->next_same);
    map_free(&t->heads);
}

/* The ids `iterable` yields, each in [low, high), sorted and without repeats, into
 * `found`. 0, or -1 with an exception set. */
static int read_sorted_ids(Vec *found, PyObject *iterable, int64_t low, int64_t high) {
    found->size = 0;
    PyObject *iterator = PyObject_GetIter(iterable), *item;
    if (!iterator) return -1;
    while ((item = PyIter_Next(iterator))) {
        long long id = PyLong_AsLongLong(item);
        Py_DECREF(item);
        if (id == -1 && PyErr_Occurred()) break;
        if (id < low || id >= high) {
            PyErr_Format(PyExc_ValueError, "expected ids in [%lld, %lld), found %lld",
                         (long long)low, (long long)high, id);
            break;
        }
        if (vec_push(found, id) < 0) break;
    }
    Py_DECREF(iterator);
    if (PyErr_Occurred()) return -1;
    found->size = sort_unique(found->data, found->size);
    return 0;
}

/* Take in the states Python registered since the last call: sets[t->count:], each a
 * frozenset of ids in [low, high) (read through `found`). 0, or -1 with an exception
 * set. */
static int interned_sync(Interned *t, Vec *found, PyObject *sets, int64_t low, int64_t high) {
    while (t->count < PyList_GET_SIZE(sets)) {
        PyObject *set = PyList_GET_ITEM(sets, t->count);
        if (!PyAnySet_Check(set)) {
            PyErr_Format(PyExc_TypeError, "expected state %zd as a frozenset, found %.80s",
                         t->count, Py_TYPE(set)->tp_name);
            return -1;
        }
        if (read_sorted_ids(found, set, low, high) < 0) return -1;
        uint64_t h = hash_members(found->data, found->size);
        if (interned_find(t, found->data, found->size, h) >= 0) {
            PyErr_Format(PyExc_ValueError, "expected state %zd's members in no other state",
                         t->count);
            return -1;
        }
        if (interned_reserve(t, found->size) < 0) return -1;
        interned_add(t, found->data, found->size, h);
    }
    return 0;
}

static PyObject *frozenset_of(const int64_t *ids, Py_ssize_t count) {
    PyObject *items = PyTuple_New(count);
    if (!items) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *id = PyLong_FromLongLong(ids[i]);
        if (!id) {
            Py_DECREF(items);
            return NULL;
        }
        PyTuple_SET_ITEM(items, i, id);
    }
    PyObject *set = PyFrozenSet_New(items);
    Py_DECREF(items);
    /* A set of ints holds no container, so it can be in no reference cycle: out of the
     * collector's sight, as CPython does by itself for tuples of ints. An automaton keeps
     * one such set a DFA state, hundreds of thousands in a large schema, and each full
     * collection traversed them all (~0.2 s pauses in the middle of a mask). */
    if (set) PyObject_GC_UnTrack(set);
    return set;
}

/* members(state) of an automaton's states held in `t`: a frozenset of its ids. */
static PyObject *interned_members_of(const Interned *t, PyObject *arg) {
    Py_ssize_t sid = PyLong_AsSsize_t(arg);
    if (sid == -1 && PyErr_Occurred()) return NULL;
    if (sid < 0 || sid >= t->count) {
        PyErr_Format(PyExc_ValueError, "expected a state held here, below %zd, found %zd",
                     t->count, sid);
        return NULL;
    }
    const int64_t *members = interned_members(t, sid);
    return frozenset_of(members + 1, members[0]);
}

/* -- building rows into an automaton's table ---------------------------------------------- */

/* Where a row construction writes: the automaton's table (capacity rows of 256 int32
 * entries), its acceptance flags (capacity bytes), and its list of states. */
typedef struct {
    int32_t *table;
    uint8_t *accepting;
    Py_ssize_t capacity;
    PyObject *sets;
} Target;

/* A new state of these sorted ids (hash `h`), interned nowhere yet: None is appended to
 * the list for it and its row made UNBUILT (before any row leads to it); the caller sets
 * its acceptance flag. Its id, or -1 on error. */
static int64_t interned_new_state(Interned *t, const int64_t *ids, Py_ssize_t count,
                                  uint64_t h, const Target *at) {
    int64_t sid = t->count;
    if (sid >= at->capacity || sid >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "expected room in the table for a new state");
        return -1;
    }
    if (interned_reserve(t, count) < 0 || PyList_Append(at->sets, Py_None) < 0) return -1;
    interned_add(t, ids, count, h);
    int32_t *row = at->table + sid * 256;
    for (int byte = 0; byte < 256; byte++) row[byte] = UNBUILT;
    return sid;
}

/* Take the C-contiguous buffers of `count` objects, each of its item size and writable
 * where asked; returns how many were taken (all of them, or an exception set with
 * `expected` as the message of a wrong item size). The caller releases those taken. */
static int hold_buffers(PyObject *const *objects, int count, const Py_ssize_t *itemsizes,
                        const int *writable, Py_buffer *views, const char *expected) {
    for (int held = 0; held < count; held++) {
        int flags = PyBUF_C_CONTIGUOUS | (writable[held] ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(objects[held], &views[held], flags) < 0) return held;
        if (views[held].itemsize != itemsizes[held]) {
            PyBuffer_Release(&views[held]);
            PyErr_SetString(PyExc_ValueError, expected);
            return held;
        }
    }
    return count;
}

/* The table and flags a Python call passes (`objects`: the int32 table, uint8 flags a
 * row), held in `views` as the Target's (its sets the caller's): 1, or 0 with an
 * exception set and nothing held. release_target lets them go after a 1. */
static int hold_target(PyObject *const *objects, Py_buffer *views, Target *at) {
    const Py_ssize_t itemsizes[2] = {4, 1};
    const int writable[2] = {1, 1};
    int held = hold_buffers(objects, 2, itemsizes, writable, views,
                            "expected an int32 table and uint8 flags");
    if (held == 2) {
        at->table = views[0].buf;
        at->capacity = views[0].len / (4 * 256);
        at->accepting = views[1].buf;
        if (views[1].len >= at->capacity) return 1;
        PyErr_SetString(PyExc_ValueError, "expected a flag for every table row");
    }
    for (int i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    return 0;
}

static void release_target(Py_buffer *views) {
    PyBuffer_Release(&views[0]);
    PyBuffer_Release(&views[1]);
}

/* A construction's entry of `sid`'s row at `byte`, computed alone (-2: no room), and the
 * one state every byte flagged in `plain` (four words) leads to (-3: they part ways). */
typedef int64_t (*StepAt)(PyObject *self, int32_t sid, int byte, const Target *at);
typedef int64_t (*PlainStepAt)(PyObject *self, int32_t sid, const uint64_t *plain,
                               const Target *at);

/* step(state, byte, table, accepting, sets) -> target, for any construction. */
static PyObject *step_with(PyObject *self, PyObject *args, StepAt step) {
    int state, byte;
    PyObject *objects[2];
    Target at;
    if (!PyArg_ParseTuple(args, "iiOOO!:step", &state, &byte, &objects[0], &objects[1],
                          &PyList_Type, &at.sets))
        return NULL;
    Py_buffer views[2];
    if (!hold_target(objects, views, &at)) return NULL;
    int64_t target = step(self, state, byte, &at);
    release_target(views);
    return target == -1 ? NULL : PyLong_FromLongLong(target);
}

/* plain_step(state, plain, table, accepting, sets) -> target, for any construction
 * (plain: 32 bytes of byte flags, some set). */
static PyObject *plain_step_with(PyObject *self, PyObject *args, PlainStepAt plain_step) {
    int state;
    Py_buffer plain;
    PyObject *objects[2];
    Target at;
    if (!PyArg_ParseTuple(args, "iy*OOO!:plain_step", &state, &plain, &objects[0], &objects[1],
                          &PyList_Type, &at.sets))
        return NULL;
    uint64_t mask[4] = {0, 0, 0, 0};
    int good = plain.len == 32;
    if (good) memcpy(mask, plain.buf, 32);
    PyBuffer_Release(&plain);
    if (!good || !(mask[0] | mask[1] | mask[2] | mask[3])) {
        PyErr_SetString(PyExc_ValueError, "expected 32 bytes of byte flags, some set");
        return NULL;
    }
    Py_buffer views[2];
    if (!hold_target(objects, views, &at)) return NULL;
    int64_t target = plain_step(self, state, mask, &at);
    release_target(views);
    return target == -1 ? NULL : PyLong_FromLongLong(target);
}

/* A construction's row of `sid` into the target: 1 built, 0 built already, 2 the table
 * may lack room for the states it adds (nothing registered then), -1 error. */
typedef int (*BuildRow)(PyObject *self, int32_t sid, const Target *at);

/* build_rows(states, table, accepting, sets) -> next, for any construction: the rows of
 * `states` (int32) in order, until one may lack room (its index returned; len(states)
 * when all are built). */
static PyObject *build_rows_with(PyObject *self, PyObject *args, BuildRow build) {
    PyObject *objects[3];
    Target at;
    if (!PyArg_ParseTuple(args, "OOOO!:build_rows", &objects[0], &objects[1], &objects[2],
                          &PyList_Type, &at.sets))
        return NULL;
    Py_buffer views[3];
    const Py_ssize_t itemsizes[3] = {4, 4, 1};
    const int writable[3] = {0, 1, 1};
    PyObject *result = NULL;
    int held = hold_buffers(objects, 3, itemsizes, writable, views,
                            "expected int32 states and table, and one byte a flag");
    if (held < 3) goto done;
    const int32_t *states = views[0].buf;
    Py_ssize_t count = views[0].len / 4;
    at.table = views[1].buf;
    at.capacity = views[1].len / (4 * 256);
    at.accepting = views[2].buf;
    if (views[2].len < at.capacity) {
        PyErr_SetString(PyExc_ValueError, "expected an acceptance flag for every table row");
        goto done;
    }
    Py_ssize_t next = 0;
    for (; next < count; next++) {
        int status = build(self, states[next], &at);
        if (status < 0) goto done;
        if (status == 2) break;
    }
    result = PyLong_FromSsize_t(next);
done:
    for (int i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    return result;
}

/* The module of `def`, holding `type` as `type_name` and, as the capsule `_build_state`
 * named `api`, the construction of one row (`build`): formcast._subset's and
 * formcast._pushdown's, whose rows formcast._trie_walk builds through that capsule.
 * NULL with an exception set. */
/* Add a capsule of `pointer` named `api` to `module` as attribute `name`: 0, or -1 with an
 * exception set (nothing added). */
static int add_capsule(PyObject *module, void *pointer, const char *api, const char *name) {
    PyObject *capsule = PyCapsule_New(pointer, api, NULL);
    if (!capsule || PyModule_AddObject(module, name, capsule) < 0) {
        Py_XDECREF(capsule);
        return -1;
    }
    return 0;
}

static PyObject *module_with_rows(PyModuleDef *def, PyTypeObject *type, const char *type_name,
                                  void *build, const char *api) {
    if (PyType_Ready(type) < 0) return NULL;
    PyObject *module = PyModule_Create(def);
    if (!module) return NULL;
    Py_INCREF(type);
    if (PyModule_AddObject(module, type_name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        Py_DECREF(module);
        return NULL;
    }
    if (add_capsule(module, build, api, "_build_state") < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}

#endif
