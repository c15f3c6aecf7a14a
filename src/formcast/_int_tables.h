/* Growable int64 vectors, an int64 -> int64 map, a set cleared in O(1), and sorting of
 * ids: what formcast._subset (_subset.c) and formcast._pushdown (_pushdown.c) both use.
 * Each extension compiles its own copy (static functions). */
#ifndef FORMCAST_INT_TABLES_H
#define FORMCAST_INT_TABLES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* -- growable int64 vectors ------------------------------------------------------------ */
typedef struct {
    int64_t *data;
    Py_ssize_t size, capacity;
} Vec;

static int vec_reserve(Vec *v, Py_ssize_t extra) {
    if (v->size + extra <= v->capacity) return 0;
    Py_ssize_t capacity = v->capacity ? v->capacity : 64;
    while (capacity < v->size + extra) capacity *= 2;
    int64_t *data = PyMem_Realloc(v->data, (size_t)capacity * sizeof(int64_t));
    if (!data) {
        PyErr_NoMemory();
        return -1;
    }
    v->data = data;
    v->capacity = capacity;
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

#endif
