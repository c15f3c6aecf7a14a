/* formcast._regex_parse: the loop of formcast.automaton.parse._Builder.parse_body, in C,
 * and the scans of the regex dialect the translation repeats.
 *
 * Parsing a schema's regex into its byte NFA cost ~1-2 us per pattern character in Python
 * (a 200,000-character Kubernetes pattern: ~56 ms), almost all of it in the loop's
 * dispatch and in appending the edges of literal runs, classes, sequences, alternations
 * and quantifiers. This module runs that loop in C on the same builder, appending the
 * edges to its Int64List arrays, so the NFA is the very one the Python loop builds (the
 * tests compare both, tests/automaton/test_native_parse.py). Group copies, remembered
 * groups, calls to definitions (copies or virtual blocks) and the common escapes are done
 * here; the rarer constructs call the builder's Python methods: other escapes, classes not
 * seen before in the pattern (their text is then cached), counted quantifiers other than
 * the trivial ones, named groups and flags, definitions, alternations of many literals,
 * and every error (builder.fail raises the SchemaError).
 *
 * parse_body(builder, pos, size, dotall, context) -> fragment
 *   context = parse.py's _NATIVE_CONTEXT (class_template, ANY, ANY_BUT_NEWLINE,
 *   CHOICE_MIN_WORDS, Block, the shorthand classes); the builder's counters n and vn are
 *   written back before each call into Python and read again after.
 * Int64List: the builder's edge lists (below).
 * group_spans_all, call_names, choice_span: the scans of formcast.regex.dialect._is_atom,
 *   formcast.regex.dialect.calls and formcast.automaton.choices.choice_characters.
 *
 * It is optional (pyproject.toml): each caller keeps its Python code where this module
 * was not built. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef long long ll;

#define VIRTUAL_BASE ((ll)1 << 40) /* formcast.automaton.nfa.VIRTUAL_BASE */
#define VIRTUAL_LIMIT ((ll)1 << 62)

/* `data` (an array of `*cap` items of `item` bytes) with room for `needed` items, its
 * capacity doubled as often as that takes; NULL with MemoryError set when it cannot be */
static void *with_room(void *data, Py_ssize_t *cap, Py_ssize_t needed, size_t item) {
    if (data && needed <= *cap) return data;
    Py_ssize_t grown = *cap > 0 ? *cap : 8;
    while (grown < needed) grown *= 2;
    void *moved = realloc(data, (size_t)grown * item);
    if (!moved) {
        PyErr_NoMemory();
        return NULL;
    }
    *cap = grown;
    return moved;
}

/* ------------------------------------------------------------------ Int64List
 * A growable array of int64 that reads like a list (len, [i], [a:b] as a list, iteration,
 * append, extend) and exports its items as a read-only int64 buffer (numpy reads it
 * without a copy): the builder's edge lists, appended to here without making an int
 * object per item. It cannot grow while a buffer is exported. */

typedef struct {
    PyObject_HEAD
    int64_t *data;
    Py_ssize_t len, cap, exports;
} Int64List;

static PyTypeObject Int64ListType;

static int grow(Int64List *self, Py_ssize_t extra) {
    if (self->exports > 0) {
        PyErr_SetString(PyExc_BufferError, "an Int64List cannot grow while its buffer is exported");
        return -1;
    }
    int64_t *data = with_room(self->data, &self->cap, self->len + extra, sizeof(int64_t));
    if (!data) return -1;
    self->data = data;
    return 0;
}

static inline int push_value(Int64List *self, int64_t value) {
    if (self->len == self->cap || self->exports > 0) {
        if (grow(self, 1) < 0) return -1;
    }
    self->data[self->len++] = value;
    return 0;
}

static void Int64List_dealloc(Int64List *self) {
    free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t Int64List_length(Int64List *self) { return self->len; }

static PyObject *Int64List_item(Int64List *self, Py_ssize_t i) {
    if (i < 0 || i >= self->len) {
        PyErr_SetString(PyExc_IndexError, "Int64List index out of range");
        return NULL;
    }
    return PyLong_FromLongLong(self->data[i]);
}

static PyObject *Int64List_subscript(Int64List *self, PyObject *key) {
    if (PySlice_Check(key)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(key, &start, &stop, &step) < 0) return NULL;
        Py_ssize_t count = PySlice_AdjustIndices(self->len, &start, &stop, step);
        PyObject *list = PyList_New(count);
        if (!list) return NULL;
        for (Py_ssize_t k = 0, i = start; k < count; k++, i += step) {
            PyObject *item = PyLong_FromLongLong(self->data[i]);
            if (!item) {
                Py_DECREF(list);
                return NULL;
            }
            PyList_SET_ITEM(list, k, item);
        }
        return list;
    }
    Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0) i += self->len;
    return Int64List_item(self, i);
}

static PyObject *Int64List_append(Int64List *self, PyObject *value) {
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (push_value(self, v) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Int64List_extend(Int64List *self, PyObject *values) {
    if (Py_IS_TYPE(values, &Int64ListType)) {
        Int64List *other = (Int64List *)values;
        Py_ssize_t count = other->len;
        if (grow(self, count) < 0) return NULL;
        memmove(self->data + self->len, other->data, (size_t)count * sizeof(int64_t));
        self->len += count;
        Py_RETURN_NONE;
    }
    if (PyBytes_Check(values)) {
        Py_ssize_t count = PyBytes_GET_SIZE(values);
        const unsigned char *bytes = (const unsigned char *)PyBytes_AS_STRING(values);
        if (grow(self, count) < 0) return NULL;
        for (Py_ssize_t i = 0; i < count; i++) self->data[self->len++] = bytes[i];
        Py_RETURN_NONE;
    }
    PyObject *iterator = PyObject_GetIter(values);
    if (!iterator) return NULL;
    PyObject *item;
    while ((item = PyIter_Next(iterator))) {
        long long v = PyLong_AsLongLong(item);
        Py_DECREF(item);
        if ((v == -1 && PyErr_Occurred()) || push_value(self, v) < 0) {
            Py_DECREF(iterator);
            return NULL;
        }
    }
    Py_DECREF(iterator);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static int Int64List_getbuffer(Int64List *self, Py_buffer *view, int flags) {
    if (flags & PyBUF_WRITABLE) {
        PyErr_SetString(PyExc_BufferError, "an Int64List exports a read-only buffer");
        view->obj = NULL;
        return -1;
    }
    static Py_ssize_t itemsize = sizeof(int64_t);
    view->obj = Py_NewRef((PyObject *)self);
    view->buf = self->data ? (void *)self->data : (void *)&itemsize; /* never read when empty */
    view->len = self->len * (Py_ssize_t)sizeof(int64_t);
    view->readonly = 1;
    view->itemsize = sizeof(int64_t);
    view->format = (flags & PyBUF_FORMAT) ? "q" : NULL;
    view->ndim = 1;
    view->shape = (flags & PyBUF_ND) ? &self->len : NULL;
    view->strides = (flags & PyBUF_STRIDES) ? &view->itemsize : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    self->exports++;
    return 0;
}

static void Int64List_releasebuffer(Int64List *self, Py_buffer *view) {
    (void)view;
    self->exports--;
}

static PyObject *Int64List_repr(Int64List *self) {
    return PyUnicode_FromFormat("Int64List(<%zd items>)", self->len);
}

static PySequenceMethods Int64List_sequence = {
    .sq_length = (lenfunc)Int64List_length,
    .sq_item = (ssizeargfunc)Int64List_item,
};

static PyMappingMethods Int64List_mapping = {
    .mp_length = (lenfunc)Int64List_length,
    .mp_subscript = (binaryfunc)Int64List_subscript,
};

static PyBufferProcs Int64List_buffer = {
    .bf_getbuffer = (getbufferproc)Int64List_getbuffer,
    .bf_releasebuffer = (releasebufferproc)Int64List_releasebuffer,
};

static PyMethodDef Int64List_methods[] = {
    {"append", (PyCFunction)Int64List_append, METH_O, "append(value): one int64 at the end."},
    {"extend", (PyCFunction)Int64List_extend, METH_O,
     "extend(values): the ints of an iterable (an Int64List or bytes: copied at C speed)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Int64ListType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "formcast._regex_parse.Int64List",
    .tp_basicsize = sizeof(Int64List),
    .tp_dealloc = (destructor)Int64List_dealloc,
    .tp_repr = (reprfunc)Int64List_repr,
    .tp_as_sequence = &Int64List_sequence,
    .tp_as_mapping = &Int64List_mapping,
    .tp_as_buffer = &Int64List_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A growable int64 array read like a list, with a read-only buffer.",
    .tp_methods = Int64List_methods,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------ the parser */

/* A fragment as parse.py's 6-tuple: start (-1: empty language), end, first concrete
 * state, first byte edge, first epsilon edge, first virtual state. */
typedef struct {
    ll start, end, s0, b0, e0, v0;
} Frag;

typedef struct {
    Frag *data;
    Py_ssize_t len, cap;
} FragVec;

typedef struct {
    FragVec items, branches;
    Py_ssize_t open_pos;
    int dotall;
} Level;

typedef struct {
    PyObject *builder;
    PyObject *pattern;
    int kind;
    const void *text;
    Py_ssize_t length;
    Int64List *bsrc, *blo, *bhi, *bdst, *esrc, *edst;
    PyObject *class_cache, *group_memo, *definitions;
    PyObject *class_template, *any, *any_but_newline, *block_type, *shorthands, *blocks;
    PyObject *recursive;
    Py_ssize_t choice_min_words, memo_min_group;
    ll call_copy_limit, concrete_budget;
    ll n, vn;
    Py_ssize_t define_level;
    Py_UCS4 *run; /* a literal run, unescaped */
    Py_ssize_t run_cap;
    unsigned char *bytes; /* its UTF-8 encoding */
    Py_ssize_t bytes_cap;
} Parser;

#define CH(p, i) PyUnicode_READ((p)->kind, (p)->text, (i))

static int push(FragVec *v, Frag f) {
    Frag *data = with_room(v->data, &v->cap, v->len + 1, sizeof(Frag));
    if (!data) return -1;
    v->data = data;
    v->data[v->len++] = f;
    return 0;
}

static inline int append(Int64List *list, ll value) { return push_value(list, value); }

/* builder.n/vn <- the counters here (before a call into Python) */
static int sync_out(Parser *p) {
    PyObject *n = PyLong_FromLongLong(p->n), *vn = PyLong_FromLongLong(p->vn);
    int rc = (!n || !vn) ? -1 : 0;
    if (rc == 0) rc = PyObject_SetAttrString(p->builder, "n", n);
    if (rc == 0) rc = PyObject_SetAttrString(p->builder, "vn", vn);
    Py_XDECREF(n);
    Py_XDECREF(vn);
    return rc;
}

static int read_ll(PyObject *obj, const char *name, ll *out) {
    PyObject *value = PyObject_GetAttrString(obj, name);
    if (!value) return -1;
    *out = PyLong_AsLongLong(value);
    Py_DECREF(value);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* the counters here <- builder.n/vn (after a call into Python) */
static int sync_in(Parser *p) {
    if (read_ll(p->builder, "n", &p->n) < 0) return -1;
    return read_ll(p->builder, "vn", &p->vn);
}

static PyObject *frag_tuple(Frag f) {
    return Py_BuildValue("(LLLLLL)", f.start, f.end, f.s0, f.b0, f.e0, f.v0);
}

static int tuple_frag(PyObject *obj, Frag *f) {
    ll *fields[6] = {&f->start, &f->end, &f->s0, &f->b0, &f->e0, &f->v0};
    if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 6) {
        PyErr_SetString(PyExc_TypeError, "expected a fragment (a tuple of 6 ints)");
        return -1;
    }
    for (int i = 0; i < 6; i++) {
        *fields[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(obj, i));
        if (*fields[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* builder.fail(reason, position): always raises */
static int fail(Parser *p, const char *reason, Py_ssize_t position) {
    PyObject *result = PyObject_CallMethod(p->builder, "fail", "sn", reason, position);
    Py_XDECREF(result);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "builder.fail returned");
    return -1;
}

/* a call into the builder: counters synced both ways */
static PyObject *call_builder(Parser *p, const char *method, const char *format, ...) {
    if (sync_out(p) < 0) return NULL;
    PyObject *callable = PyObject_GetAttrString(p->builder, method);
    if (!callable) return NULL;
    va_list args;
    va_start(args, format);
    PyObject *arguments = Py_VaBuildValue(format, args);
    va_end(args);
    PyObject *result = NULL;
    if (arguments) {
        result = PyObject_CallObject(callable, arguments);
        Py_DECREF(arguments);
    }
    Py_DECREF(callable);
    if (result && sync_in(p) < 0) Py_CLEAR(result);
    return result;
}

static Frag empty_at(Parser *p, ll s) {
    Frag f = {-1, -1, s, p->bsrc->len, p->esrc->len, p->vn};
    return f;
}

static int eps(Parser *p, ll a, ll b) {
    if (append(p->esrc, a) < 0) return -1;
    return append(p->edst, b);
}

static Frag epsilon_fragment(Parser *p) {
    ll s = p->n++;
    Frag f = {s, s, s, p->bsrc->len, p->esrc->len, p->vn};
    return f;
}

/* a chain reading data[0..k) (k >= 1) */
static int byte_chain(Parser *p, const unsigned char *data, Py_ssize_t k, Frag *out) {
    ll s = p->n;
    Py_ssize_t b0 = p->bsrc->len;
    if (grow(p->bsrc, k) < 0 || grow(p->blo, k) < 0 || grow(p->bhi, k) < 0 ||
        grow(p->bdst, k) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < k; i++) {
        p->bsrc->data[p->bsrc->len++] = s + i;
        p->blo->data[p->blo->len++] = data[i];
        p->bhi->data[p->bhi->len++] = data[i];
        p->bdst->data[p->bdst->len++] = s + i + 1;
    }
    p->n = s + k + 1;
    Frag f = {s, s + k, s, b0, p->esrc->len, p->vn};
    *out = f;
    return 0;
}

/* the UTF-8 chain of code points cps[0..count); a lone surrogate makes the language empty */
static int literal(Parser *p, const Py_UCS4 *cps, Py_ssize_t count, Frag *out) {
    unsigned char *bytes = with_room(p->bytes, &p->bytes_cap, 4 * count, 1);
    if (!bytes) return -1;
    p->bytes = bytes;
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_UCS4 c = cps[i];
        if (c >= 0xD800 && c <= 0xDFFF) {
            *out = empty_at(p, p->n++);
            return 0;
        }
        if (c < 0x80) {
            p->bytes[k++] = (unsigned char)c;
        } else if (c < 0x800) {
            p->bytes[k++] = (unsigned char)(0xC0 | (c >> 6));
            p->bytes[k++] = (unsigned char)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            p->bytes[k++] = (unsigned char)(0xE0 | (c >> 12));
            p->bytes[k++] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            p->bytes[k++] = (unsigned char)(0x80 | (c & 0x3F));
        } else {
            p->bytes[k++] = (unsigned char)(0xF0 | (c >> 18));
            p->bytes[k++] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
            p->bytes[k++] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            p->bytes[k++] = (unsigned char)(0x80 | (c & 0x3F));
        }
    }
    return byte_chain(p, p->bytes, k, out);
}

static int extend_shifted(Int64List *list, PyObject *values, ll shift) {
    Py_ssize_t count = PyTuple_GET_SIZE(values);
    for (Py_ssize_t i = 0; i < count; i++) {
        ll value = PyLong_AsLongLong(PyTuple_GET_ITEM(values, i));
        if (value == -1 && PyErr_Occurred()) return -1;
        if (append(list, value + shift) < 0) return -1;
    }
    return 0;
}

/* one character of `ranges` (normalized): parse.py's _Builder.char_set */
static int char_set(Parser *p, PyObject *ranges, Frag *out) {
    if (!PyTuple_Check(ranges)) {
        PyErr_SetString(PyExc_TypeError, "expected the ranges of a class as a tuple");
        return -1;
    }
    if (PyTuple_GET_SIZE(ranges) == 1) {
        PyObject *range = PyTuple_GET_ITEM(ranges, 0);
        if (PyTuple_Check(range) && PyTuple_GET_SIZE(range) == 2) {
            long lo = PyLong_AsLong(PyTuple_GET_ITEM(range, 0));
            long hi = PyLong_AsLong(PyTuple_GET_ITEM(range, 1));
            if (PyErr_Occurred()) return -1;
            if (lo == hi) {
                Py_UCS4 c = (Py_UCS4)lo;
                return literal(p, &c, 1, out);
            }
        }
    }
    PyObject *template = PyObject_CallOneArg(p->class_template, ranges);
    if (!template) return -1;
    ll s = p->n;
    Py_ssize_t b0 = p->bsrc->len;
    int rc = 0;
    if (template == Py_None) {
        p->n += 1;
        *out = empty_at(p, s); /* nothing was appended: its edges start at b0 */
    } else if (!PyTuple_Check(template) || PyTuple_GET_SIZE(template) != 5) {
        PyErr_SetString(PyExc_TypeError, "expected a class template (a tuple of 5)");
        rc = -1;
    } else {
        ll count = PyLong_AsLongLong(PyTuple_GET_ITEM(template, 0));
        rc = (count == -1 && PyErr_Occurred()) ? -1 : 0;
        if (rc == 0) rc = extend_shifted(p->bsrc, PyTuple_GET_ITEM(template, 1), s);
        if (rc == 0) rc = extend_shifted(p->blo, PyTuple_GET_ITEM(template, 2), 0);
        if (rc == 0) rc = extend_shifted(p->bhi, PyTuple_GET_ITEM(template, 3), 0);
        if (rc == 0) rc = extend_shifted(p->bdst, PyTuple_GET_ITEM(template, 4), s);
        if (rc == 0) {
            p->n = s + count;
            Frag f = {s, s + 1, s, b0, p->esrc->len, p->vn};
            *out = f;
        }
    }
    Py_DECREF(template);
    return rc;
}

static int sequence(Parser *p, FragVec *items, Frag *out) {
    if (items->len == 0) {
        *out = epsilon_fragment(p);
        return 0;
    }
    Frag first = items->data[0];
    if (items->len == 1) {
        *out = first;
        return 0;
    }
    for (Py_ssize_t i = 0; i < items->len; i++) {
        if (items->data[i].start < 0) {
            Frag f = {-1, -1, first.s0, first.b0, first.e0, first.v0};
            *out = f;
            return 0;
        }
    }
    ll previous = first.end;
    for (Py_ssize_t i = 1; i < items->len; i++) {
        if (eps(p, previous, items->data[i].start) < 0) return -1;
        previous = items->data[i].end;
    }
    Frag f = {first.start, previous, first.s0, first.b0, first.e0, first.v0};
    *out = f;
    return 0;
}

static int alternation(Parser *p, FragVec *branches, Frag *out) {
    Frag first = branches->data[0];
    if (branches->len == 1) {
        *out = first;
        return 0;
    }
    Py_ssize_t live = 0, last_live = -1;
    for (Py_ssize_t i = 0; i < branches->len; i++) {
        if (branches->data[i].start >= 0) {
            live++;
            last_live = i;
        }
    }
    if (live == 0) {
        Frag f = {-1, -1, first.s0, first.b0, first.e0, first.v0};
        *out = f;
        return 0;
    }
    if (live == 1) {
        Frag only = branches->data[last_live];
        Frag f = {only.start, only.end, first.s0, first.b0, first.e0, first.v0};
        *out = f;
        return 0;
    }
    ll start = p->n++;
    ll end = p->n++;
    for (Py_ssize_t i = 0; i < branches->len; i++) {
        Frag b = branches->data[i];
        if (b.start < 0) continue;
        if (eps(p, start, b.start) < 0 || eps(p, b.end, end) < 0) return -1;
    }
    Frag f = {start, end, first.s0, first.b0, first.e0, first.v0};
    *out = f;
    return 0;
}

/* frag{low,high} for the cases that copy nothing (high < 0: unbounded); else 1 */
static int simple_repeat(Parser *p, Frag frag, ll low, ll high, Frag *out) {
    if (frag.start < 0) {
        *out = low == 0 ? epsilon_fragment(p) : frag;
        return 0;
    }
    if (high == 0) {
        *out = epsilon_fragment(p);
        return 0;
    }
    if (low == 1 && high == 1) {
        *out = frag;
        return 0;
    }
    if (low == 0 && high == 1) {
        if (eps(p, frag.start, frag.end) < 0) return -1;
        *out = frag;
        return 0;
    }
    if (high < 0 && low <= 1) {
        ll s = p->n++;
        ll t = p->n++;
        if (eps(p, s, frag.start) < 0 || eps(p, frag.end, frag.start) < 0 ||
            eps(p, frag.end, t) < 0)
            return -1;
        if (low == 0 && eps(p, s, t) < 0) return -1;
        Frag f = {s, t, frag.s0, frag.b0, frag.e0, frag.v0};
        *out = f;
        return 0;
    }
    return 1;
}

/* builder.repeat(frag, low, high, position) for counted copies */
static int python_repeat(Parser *p, Frag frag, PyObject *low, PyObject *high, Py_ssize_t pos,
                         Frag *out) {
    PyObject *tuple = frag_tuple(frag);
    if (!tuple) return -1;
    PyObject *result = call_builder(p, "repeat", "(OOOn)", tuple, low, high, pos);
    Py_DECREF(tuple);
    if (!result) return -1;
    int rc = tuple_frag(result, out);
    Py_DECREF(result);
    return rc;
}

static int is_ascii_alnum(Py_UCS4 c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_special(Py_UCS4 c) {
    return c == '\\' || c == '^' || c == '$' || c == '.' || c == '|' || c == '?' || c == '*' ||
           c == '+' || c == '(' || c == ')' || c == '[' || c == '{';
}

static int starts_with(Parser *p, Py_ssize_t pos, const char *prefix) {
    for (Py_ssize_t i = 0; prefix[i]; i++) {
        if (pos + i >= p->length || CH(p, pos + i) != (Py_UCS4)(unsigned char)prefix[i])
            return 0;
    }
    return 1;
}

/* the literal run at pos: plain characters and escaped punctuation (parse.py's
 * _LITERAL_RUN), unescaped into p->run; returns its end, or -1 when nothing matched */
static Py_ssize_t literal_run(Parser *p, Py_ssize_t pos, Py_ssize_t size, Py_ssize_t *count) {
    Py_UCS4 *run = with_room(p->run, &p->run_cap, size - pos, sizeof(Py_UCS4));
    if (!run) return -2;
    p->run = run;
    Py_ssize_t i = pos, k = 0;
    while (i < size) {
        Py_UCS4 c = CH(p, i);
        if (c == '\\') {
            if (i + 1 >= size || is_ascii_alnum(CH(p, i + 1))) break;
            p->run[k++] = CH(p, i + 1);
            i += 2;
        } else if (is_special(c)) {
            break;
        } else {
            p->run[k++] = c;
            i += 1;
        }
    }
    *count = k;
    return i == pos ? -1 : i;
}

/* the end of the class opening at pos as parse.py's _CLASS_SPAN reads it, or -1 */
static Py_ssize_t class_span(Parser *p, Py_ssize_t pos, Py_ssize_t size) {
    Py_ssize_t i = pos + 1;
    if (i < size && CH(p, i) == '^') i++;
    if (i < size && CH(p, i) == ']') i++;
    while (i < size) {
        Py_UCS4 c = CH(p, i);
        if (c == ']') return i + 1;
        if (c == '\\') {
            if (i + 1 >= size) return -1;
            i += 2;
        } else {
            i++;
        }
    }
    return -1;
}

/* the value of the hex digit c, or -1 */
static int hex_value(Py_UCS4 c) {
    if (c >= '0' && c <= '9') return (int)(c - '0');
    if (c >= 'a' && c <= 'f') return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return (int)(c - 'A' + 10);
    return -1;
}

/* the end (past its ')') of the alternation of literals whose "(?:" is at i, as
 * formcast.automaton.choices.LITERAL_ALTERNATION reads one (plain characters, escapes of
 * punctuation, \xHH and bars), with the bars of its text counted (escaped ones too, as
 * choice_characters counts them); -1 when the group is not one */
static Py_ssize_t literal_group_end(int kind, const void *text, Py_ssize_t length, Py_ssize_t i,
                                    Py_ssize_t *bars) {
    *bars = 0;
    for (Py_ssize_t j = i + 3; j < length;) {
        Py_UCS4 c = PyUnicode_READ(kind, text, j);
        if (c == ')') return j + 1;
        if (c == '\\') {
            if (j + 1 >= length) return -1;
            Py_UCS4 d = PyUnicode_READ(kind, text, j + 1);
            if (d == 'x' && j + 3 < length && hex_value(PyUnicode_READ(kind, text, j + 2)) >= 0 &&
                hex_value(PyUnicode_READ(kind, text, j + 3)) >= 0) {
                j += 4;
            } else if (!is_ascii_alnum(d)) {
                if (d == '|') (*bars)++; /* the scan counts every bar of the body */
                j += 2;
            } else {
                return -1;
            }
        } else if (c == '^' || c == '$' || c == '.' || c == '?' || c == '*' || c == '+' ||
                   c == '(' || c == '[' || c == '{') {
            return -1;
        } else {
            if (c == '|') (*bars)++;
            j++;
        }
    }
    return -1;
}

/* whether the group at pos is an alternation of at least CHOICE_MIN_WORDS literals, as
 * builder.literal_choice tells (it builds it) */
static int may_be_choice(Parser *p, Py_ssize_t pos, Py_ssize_t size) {
    if (!starts_with(p, pos, "(?:")) return 0;
    Py_ssize_t bars;
    return literal_group_end(p->kind, p->text, size, pos, &bars) >= 0 &&
           bars >= p->choice_min_words - 1;
}

/* a (fragment, end) pair from the builder, or None: 1 found, 0 None, -1 error */
static int found_group(PyObject *result, Frag *group, Py_ssize_t *end) {
    if (result == Py_None) return 0;
    if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2) {
        PyErr_SetString(PyExc_TypeError, "expected (fragment, end) or None");
        return -1;
    }
    if (tuple_frag(PyTuple_GET_ITEM(result, 0), group) < 0) return -1;
    *end = PyLong_AsSsize_t(PyTuple_GET_ITEM(result, 1));
    return (*end == -1 && PyErr_Occurred()) ? -1 : 1;
}

/* a copy of the concrete states [s0, s1) with their byte edges [b0, b1) and epsilon edges
 * [e0, e1), past the last state (parse.py's copy_range, one copy); returns the id shift */
static ll copy_range(Parser *p, ll s0, ll s1, Py_ssize_t b0, Py_ssize_t b1, Py_ssize_t e0,
                     Py_ssize_t e1) {
    ll shift = p->n - s0;
    Int64List *shifted[4] = {p->bsrc, p->bdst, p->esrc, p->edst};
    Int64List *same[2] = {p->blo, p->bhi};
    for (int k = 0; k < 6; k++) {
        Int64List *list = k < 4 ? shifted[k] : same[k - 4];
        Py_ssize_t lo = (k < 2 || k >= 4) ? b0 : e0, hi = (k < 2 || k >= 4) ? b1 : e1;
        if (lo < 0 || hi > list->len || lo > hi) {
            PyErr_SetString(PyExc_ValueError, "expected an edge range of the builder");
            return -1;
        }
        if (grow(list, hi - lo) < 0) return -1;
        ll add = k < 4 ? shift : 0;
        for (Py_ssize_t i = lo; i < hi; i++) list->data[list->len++] = list->data[i] + add;
    }
    p->n += s1 - s0;
    return shift;
}

/* a fresh copy of an all-concrete fragment ((fragment, state end, byte-edge end,
 * epsilon-edge end), parse.py's _MemoEntry), past the last state */
static int copy_group(Parser *p, Frag frag, ll n_end, Py_ssize_t b_end, Py_ssize_t e_end,
                      Frag *out) {
    ll new_s0 = p->n;
    Py_ssize_t new_b0 = p->bsrc->len, new_e0 = p->esrc->len;
    ll shift = copy_range(p, frag.s0, n_end, (Py_ssize_t)frag.b0, b_end, (Py_ssize_t)frag.e0, e_end);
    if (shift == -1 && PyErr_Occurred()) return -1;
    Frag f = {frag.start + shift, frag.end + shift, new_s0, new_b0, new_e0, p->vn};
    *out = f;
    return 0;
}

/* the memo key of the group at pos: its first memo_min_group characters */
static PyObject *memo_key(Parser *p, Py_ssize_t pos) {
    Py_ssize_t stop = pos + p->memo_min_group;
    return PyUnicode_Substring(p->pattern, pos, stop < p->length ? stop : p->length);
}

/* parse.py's reuse_group: a copy of the group at pos if the same text was built before
 * under the same dotall setting: 1 found (its fragment and end), 0 not, -1 error */
static int reuse_group(Parser *p, Py_ssize_t pos, int dotall, Frag *group, Py_ssize_t *end) {
    PyObject *key = memo_key(p, pos);
    if (!key) return -1;
    PyObject *known = PyDict_GetItemWithError(p->group_memo, key);
    Py_DECREF(key);
    if (!known) return PyErr_Occurred() ? -1 : 0;
    if (!PyList_Check(known)) {
        PyErr_SetString(PyExc_TypeError, "expected a list of remembered groups");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(known); i++) {
        PyObject *entry = PyList_GET_ITEM(known, i), *text, *entry_dotall, *memo;
        Frag frag;
        ll n_end;
        Py_ssize_t b_end, e_end;
        if (!PyArg_ParseTuple(entry, "UOO", &text, &entry_dotall, &memo)) return -1;
        if (PyObject_IsTrue(entry_dotall) != dotall) continue;
        Py_ssize_t match = PyUnicode_Tailmatch(p->pattern, text, pos, PY_SSIZE_T_MAX, -1);
        if (match < 0) return -1;
        if (!match) continue;
        if (!PyArg_ParseTuple(memo, "(LLLLLL)Lnn", &frag.start, &frag.end, &frag.s0, &frag.b0,
                              &frag.e0, &frag.v0, &n_end, &b_end, &e_end))
            return -1;
        if (copy_group(p, frag, n_end, b_end, e_end, group) < 0) return -1;
        *end = pos + PyUnicode_GET_LENGTH(text);
        return 1;
    }
    return 0;
}

/* whether pattern[lo:hi) holds the text "(?P<" (a named group) */
static int holds_named_group(Parser *p, Py_ssize_t lo, Py_ssize_t hi) {
    for (Py_ssize_t i = lo; i + 4 <= hi; i++) {
        if (CH(p, i) == '(' && CH(p, i + 1) == '?' && CH(p, i + 2) == 'P' && CH(p, i + 3) == '<')
            return 1;
    }
    return 0;
}

/* parse.py's remember_group: keep the group just closed at close_pos for reuse_group
 * (long, all-concrete groups with no named group inside). A group remembered already is
 * found by comparing the pattern in place; only a new one has its text copied. */
static int remember_group(Parser *p, Py_ssize_t open_pos, Py_ssize_t close_pos, int dotall,
                          Frag group) {
    Py_ssize_t length = close_pos + 1 - open_pos;
    if (close_pos - open_pos < p->memo_min_group || group.start < 0 || group.v0 != p->vn)
        return 0;
    PyObject *key = memo_key(p, open_pos);
    if (!key) return -1;
    int rc = -1;
    PyObject *text = NULL, *entry = NULL;
    PyObject *known = PyDict_GetItemWithError(p->group_memo, key);
    if (!known && PyErr_Occurred()) goto done;
    for (Py_ssize_t i = 0; known && i < PyList_GET_SIZE(known); i++) {
        PyObject *other = PyList_GET_ITEM(known, i);
        if (!PyTuple_Check(other) || PyTuple_GET_SIZE(other) != 3) continue;
        PyObject *other_text = PyTuple_GET_ITEM(other, 0);
        if (!PyUnicode_Check(other_text) || PyUnicode_GET_LENGTH(other_text) != length) continue;
        Py_ssize_t same =
            PyUnicode_Tailmatch(p->pattern, other_text, open_pos, close_pos + 1, -1);
        if (same < 0) goto done;
        if (same && PyObject_IsTrue(PyTuple_GET_ITEM(other, 1)) == dotall) {
            rc = 0;
            goto done;
        }
    }
    if (holds_named_group(p, open_pos, close_pos + 1)) {
        rc = 0;
        goto done;
    }
    if (!known) {
        PyObject *fresh = PyList_New(0);
        if (!fresh || PyDict_SetItem(p->group_memo, key, fresh) < 0) {
            Py_XDECREF(fresh);
            goto done;
        }
        Py_DECREF(fresh);
        known = fresh; /* held by the dict */
    }
    text = PyUnicode_Substring(p->pattern, open_pos, close_pos + 1);
    if (!text) goto done;
    entry = Py_BuildValue("(OO((LLLLLL)Lnn))", text, dotall ? Py_True : Py_False, group.start,
                          group.end, group.s0, group.b0, group.e0, group.v0, p->n,
                          p->bsrc->len, p->esrc->len);
    if (entry) rc = PyList_Append(known, entry);
done:
    Py_XDECREF(entry);
    Py_XDECREF(text);
    Py_DECREF(key);
    return rc;
}

/* reuse_group, then builder.literal_choice where a cheap scan says it may answer */
static int reused_group(Parser *p, Py_ssize_t pos, Py_ssize_t size, int dotall, Frag *group,
                        Py_ssize_t *end) {
    int found = reuse_group(p, pos, dotall, group, end);
    if (found != 0) return found;
    if (!may_be_choice(p, pos, size)) return 0;
    PyObject *result =
        call_builder(p, "literal_choice", "(nnO)", pos, size, dotall ? Py_True : Py_False);
    if (!result) return -1;
    int rc = found_group(result, group, end);
    Py_DECREF(result);
    return rc;
}

/* a call to a definition too large to copy: a virtual block of one copy of it
 * (parse.py's call), O(1) whatever the definition's size */
static int call_block(Parser *p, Frag frag, ll size_c, ll span, Frag *out) {
    ll base = p->vn;
    PyObject *block = PyObject_CallFunction(p->block_type, "LLiLLLLLiOi", base, span, 1, frag.s0,
                                            size_c, frag.v0, frag.start, frag.end, 1, Py_True, -1);
    if (!block) return -1;
    int rc = PyList_Append(p->blocks, block);
    Py_DECREF(block);
    if (rc < 0) return -1;
    p->vn += span;
    ll concrete_shift = base - frag.s0, virtual_shift = base + size_c - frag.v0;
    Frag f = {
        frag.start + (frag.start < VIRTUAL_BASE ? concrete_shift : virtual_shift),
        frag.end + (frag.end < VIRTUAL_BASE ? concrete_shift : virtual_shift),
        p->n, p->bsrc->len, p->esrc->len, base,
    };
    *out = f;
    return 0;
}

/* the subroutine call (?&name) at pos: a concrete copy of a small all-concrete
 * definition here (parse.py's call), anything else by builder.call */
static int call(Parser *p, PyObject *name, Py_ssize_t pos, Frag *out) {
    int recursive = PyDict_Contains(p->recursive, name);
    if (recursive < 0) return -1;
    PyObject *entry = recursive ? NULL : PyDict_GetItemWithError(p->definitions, name);
    if (!entry && PyErr_Occurred()) return -1;
    if (entry) {
        Frag frag;
        ll n_end, vn_end;
        Py_ssize_t b_end, e_end;
        if (!PyArg_ParseTuple(entry, "(LLLLLL)LLnn", &frag.start, &frag.end, &frag.s0, &frag.b0,
                              &frag.e0, &frag.v0, &n_end, &vn_end, &b_end, &e_end))
            return -1;
        ll size_c = n_end - frag.s0, span = size_c + vn_end - frag.v0;
        if (frag.start >= 0 && vn_end == frag.v0 && size_c <= p->call_copy_limit &&
            p->n + size_c <= p->concrete_budget)
            return copy_group(p, frag, n_end, b_end, e_end, out);
        if (frag.start >= 0 && p->vn + span < VIRTUAL_LIMIT)
            return call_block(p, frag, size_c, span, out);
    }
    PyObject *result = call_builder(p, "call", "(On)", name, pos);
    if (!result) return -1;
    int rc = tuple_frag(result, out);
    Py_DECREF(result);
    return rc;
}

/* the common escapes of a letter (\d \w \s and their negations, \n \t \r \f \v \a,
 * \xHH \uHHHH \UHHHHHHHH in range): 1 read here, 0 for builder.escape, -1 error */
static int common_escape(Parser *p, Py_ssize_t pos, Frag *item, Py_ssize_t *next) {
    Py_UCS4 kind = CH(p, pos + 1);
    char key[2] = {(char)kind, 0};
    if (kind < 0x80) {
        PyObject *ranges = PyDict_GetItemString(p->shorthands, key);
        if (ranges) {
            *next = pos + 2;
            return char_set(p, ranges, item) < 0 ? -1 : 1;
        }
    }
    Py_UCS4 code;
    switch (kind) {
    case 'n': code = 0x0A; break;
    case 't': code = 0x09; break;
    case 'r': code = 0x0D; break;
    case 'f': code = 0x0C; break;
    case 'v': code = 0x0B; break;
    case 'a': code = 0x07; break;
    case 'x': case 'u': case 'U': {
        Py_ssize_t width = kind == 'x' ? 2 : kind == 'u' ? 4 : 8;
        if (pos + 2 + width > p->length) return 0;
        ll value = 0;
        for (Py_ssize_t i = 0; i < width; i++) {
            int digit = hex_value(CH(p, pos + 2 + i));
            if (digit < 0) return 0;
            value = value * 16 + digit;
        }
        if (value > 0x10FFFF) return 0;
        code = (Py_UCS4)value;
        *next = pos + 2 + width;
        return literal(p, &code, 1, item) < 0 ? -1 : 1;
    }
    default: return 0;
    }
    *next = pos + 2;
    return literal(p, &code, 1, item) < 0 ? -1 : 1;
}

/* an escape of a letter or digit at pos: read here when common, else by builder.escape */
static int escape(Parser *p, Py_ssize_t pos, Frag *item, Py_ssize_t *next) {
    int common = common_escape(p, pos, item, next);
    if (common != 0) return common < 0 ? -1 : 0;
    if (sync_out(p) < 0) return -1;
    PyObject *method = PyObject_GetAttrString(p->builder, "escape");
    if (!method) return -1;
    PyObject *position = PyLong_FromSsize_t(pos);
    PyObject *kwnames = Py_BuildValue("(s)", "in_class");
    PyObject *result = NULL;
    if (position && kwnames) {
        PyObject *args[2] = {position, Py_False};
        result = PyObject_Vectorcall(method, args, 1, kwnames);
    }
    Py_XDECREF(position);
    Py_XDECREF(kwnames);
    Py_DECREF(method);
    if (!result) return -1;
    int rc = -1;
    if (PyTuple_Check(result) && PyTuple_GET_SIZE(result) == 3) {
        PyObject *ranges = PyTuple_GET_ITEM(result, 0);
        *next = PyLong_AsSsize_t(PyTuple_GET_ITEM(result, 2));
        if (!(*next == -1 && PyErr_Occurred())) {
            if (ranges != Py_None) {
                rc = char_set(p, ranges, item);
            } else {
                long code = PyLong_AsLong(PyTuple_GET_ITEM(result, 1));
                Py_UCS4 c = (Py_UCS4)code;
                rc = (code == -1 && PyErr_Occurred()) ? -1 : literal(p, &c, 1, item);
            }
        }
    } else {
        PyErr_SetString(PyExc_TypeError, "expected (ranges, code, next) from escape");
    }
    Py_DECREF(result);
    return rc;
}

/* the class at pos: cached by its text in builder.class_cache, else builder.char_class */
static int char_class(Parser *p, Py_ssize_t pos, Py_ssize_t size, Frag *item, Py_ssize_t *next) {
    Py_ssize_t end = class_span(p, pos, size);
    PyObject *ranges = NULL;
    if (end >= 0) {
        PyObject *key = PyUnicode_Substring(p->pattern, pos, end);
        if (!key) return -1;
        ranges = PyDict_GetItemWithError(p->class_cache, key);
        Py_DECREF(key);
        if (!ranges && PyErr_Occurred()) return -1;
        Py_XINCREF(ranges);
    }
    if (!ranges) {
        PyObject *result = call_builder(p, "char_class", "(n)", pos);
        if (!result) return -1;
        if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2) {
            Py_DECREF(result);
            PyErr_SetString(PyExc_TypeError, "expected (ranges, end) from char_class");
            return -1;
        }
        ranges = PyTuple_GET_ITEM(result, 0);
        Py_INCREF(ranges);
        end = PyLong_AsSsize_t(PyTuple_GET_ITEM(result, 1));
        Py_DECREF(result);
        PyObject *key = end < 0 ? NULL : PyUnicode_Substring(p->pattern, pos, end);
        if (!key || PyDict_SetItem(p->class_cache, key, ranges) < 0) {
            Py_XDECREF(key);
            Py_DECREF(ranges);
            return -1;
        }
        Py_DECREF(key);
    }
    int rc = char_set(p, ranges, item);
    Py_DECREF(ranges);
    *next = end;
    return rc;
}

/* a quantifier at pos applied to the last item; returns the position after it */
static Py_ssize_t quantify(Parser *p, FragVec *items, int quantifiable, Py_ssize_t pos,
                           Py_ssize_t size, int *literal_brace) {
    Py_UCS4 c = CH(p, pos);
    PyObject *low_obj = NULL, *high_obj = NULL;
    ll low, high;
    Py_ssize_t end;
    int overflow = 0;
    *literal_brace = 0;
    if (c == '{') {
        PyObject *counted = call_builder(p, "counted", "(nn)", pos, size);
        if (!counted) return -1;
        if (counted == Py_None) {
            Py_DECREF(counted);
            *literal_brace = 1;
            return pos + 1;
        }
        low_obj = PyTuple_GET_ITEM(counted, 0);
        high_obj = PyTuple_GET_ITEM(counted, 1);
        Py_INCREF(low_obj);
        Py_INCREF(high_obj);
        end = PyLong_AsSsize_t(PyTuple_GET_ITEM(counted, 2));
        Py_DECREF(counted);
        int over_low = 0, over_high = 0;
        low = PyLong_AsLongLongAndOverflow(low_obj, &over_low);
        high = high_obj == Py_None ? -1 : PyLong_AsLongLongAndOverflow(high_obj, &over_high);
        overflow = over_low || over_high;
        if (PyErr_Occurred()) goto error;
    } else {
        low = c == '+' ? 1 : 0;
        high = c == '?' ? 1 : -1;
        end = pos + 1;
    }
    if (!quantifiable) {
        fail(p, items->len ? "multiple repeat" : "nothing to repeat", pos);
        goto error;
    }
    if (end < size && CH(p, end) == '?') {
        end += 1; /* lazy: the same language under a full match */
    } else if (end < size && CH(p, end) == '+') {
        fail(p, "possessive quantifiers are not supported", end);
        goto error;
    }
    Frag *last = &items->data[items->len - 1];
    int rc = overflow ? 1 : simple_repeat(p, *last, low, high, last);
    if (rc < 0) goto error;
    if (rc == 1) {
        if (!low_obj) {
            low_obj = PyLong_FromLongLong(low);
            high_obj = high < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(high);
            if (!low_obj || !high_obj) goto error;
        }
        if (python_repeat(p, *last, low_obj, high_obj, pos, last) < 0) goto error;
    }
    Py_XDECREF(low_obj);
    Py_XDECREF(high_obj);
    return end;
error:
    Py_XDECREF(low_obj);
    Py_XDECREF(high_obj);
    return -1;
}

/* close the innermost level: its own items and branches go, the enclosing ones return */
static Level pop_level(Level *stack, Py_ssize_t *depth, FragVec *items, FragVec *branches) {
    free(items->data);
    free(branches->data);
    Level level = stack[--*depth];
    *items = level.items;
    *branches = level.branches;
    return level;
}

static void free_level(Level *level) {
    free(level->items.data);
    free(level->branches.data);
}

static PyObject *attr(PyObject *obj, const char *name) {
    return PyObject_GetAttrString(obj, name);
}

static int read_context(Parser *p, PyObject *builder, PyObject *pattern, PyObject *context) {
    if (!PyTuple_Check(context) || PyTuple_GET_SIZE(context) != 6) {
        PyErr_SetString(PyExc_TypeError, "expected the context tuple of parse.py");
        return -1;
    }
    p->builder = builder;
    p->pattern = pattern;
    p->kind = PyUnicode_KIND(pattern);
    p->text = PyUnicode_DATA(pattern);
    p->length = PyUnicode_GET_LENGTH(pattern);
    p->class_template = PyTuple_GET_ITEM(context, 0);
    p->any = PyTuple_GET_ITEM(context, 1);
    p->any_but_newline = PyTuple_GET_ITEM(context, 2);
    p->choice_min_words = PyLong_AsSsize_t(PyTuple_GET_ITEM(context, 3));
    p->block_type = PyTuple_GET_ITEM(context, 4);
    p->shorthands = PyTuple_GET_ITEM(context, 5);
    if (!PyDict_Check(p->shorthands)) {
        PyErr_SetString(PyExc_TypeError, "expected the shorthand classes as a dict");
        return -1;
    }
    if (PyErr_Occurred()) return -1;
    Int64List **lists[] = {&p->bsrc, &p->blo, &p->bhi, &p->bdst, &p->esrc, &p->edst};
    const char *names[] = {"bsrc", "blo", "bhi", "bdst", "esrc", "edst"};
    for (int i = 0; i < 6; i++) {
        PyObject *list = attr(builder, names[i]);
        if (!list) return -1;
        *lists[i] = (Int64List *)list;
        if (!Py_IS_TYPE(list, &Int64ListType)) {
            PyErr_Format(PyExc_TypeError, "expected builder.%s to be an Int64List", names[i]);
            return -1;
        }
    }
    p->class_cache = attr(builder, "class_cache");
    p->group_memo = p->class_cache ? attr(builder, "group_memo") : NULL;
    p->definitions = p->group_memo ? attr(builder, "definitions") : NULL;
    p->recursive = p->definitions ? attr(builder, "recursive") : NULL;
    p->blocks = p->recursive ? attr(builder, "blocks") : NULL;
    if (!p->blocks) return -1;
    if (!PyList_Check(p->blocks)) {
        PyErr_SetString(PyExc_TypeError, "expected builder.blocks to be a list");
        return -1;
    }
    if (!PyDict_Check(p->definitions) || !PyDict_Check(p->recursive)) {
        PyErr_SetString(PyExc_TypeError, "expected the builder's definitions to be dicts");
        return -1;
    }
    if (!PyDict_Check(p->class_cache) || !PyDict_Check(p->group_memo)) {
        PyErr_SetString(PyExc_TypeError, "expected the builder's caches to be dicts");
        return -1;
    }
    PyObject *limits = attr(builder, "limits");
    if (!limits) return -1;
    ll memo = 0;
    int rc = read_ll(limits, "memo_min_group", &memo);
    if (rc == 0) rc = read_ll(limits, "call_copy_limit", &p->call_copy_limit);
    if (rc == 0) rc = read_ll(limits, "concrete_budget", &p->concrete_budget);
    Py_DECREF(limits);
    p->memo_min_group = (Py_ssize_t)memo;
    ll define_level = 0;
    if (rc < 0 || read_ll(builder, "define_level", &define_level) < 0) return -1;
    p->define_level = (Py_ssize_t)define_level;
    return sync_in(p);
}

static void release(Parser *p) {
    Int64List *lists[] = {p->bsrc, p->blo, p->bhi, p->bdst, p->esrc, p->edst};
    for (int i = 0; i < 6; i++) Py_XDECREF((PyObject *)lists[i]);
    Py_XDECREF(p->class_cache);
    Py_XDECREF(p->group_memo);
    Py_XDECREF(p->definitions);
    Py_XDECREF(p->recursive);
    Py_XDECREF(p->blocks);
    free(p->run);
    free(p->bytes);
}

/* the loop itself: parse.py's _Builder.parse_body, step for step */
static int parse_loop(Parser *p, Py_ssize_t pos, Py_ssize_t size, int dotall, Frag *top) {
    Level *stack = NULL;
    Py_ssize_t depth = 0, stack_cap = 0;
    FragVec items = {0}, branches = {0};
    int quantifiable = 0;
    Frag item;
    Py_ssize_t next;
#define TRY(expr)                 \
    do {                          \
        if ((expr) < 0) goto fail; \
    } while (0)
    while (pos < size) {
        Py_UCS4 c = CH(p, pos);
        if (p->define_level == depth && c != ')' && !starts_with(p, pos, "(?P<")) {
            fail(p, "(?(DEFINE)...) may hold only named groups (?P<name>...)", pos);
            goto fail;
        }
        if (c == '\\' && pos + 1 < size && is_ascii_alnum(CH(p, pos + 1))) {
            TRY(escape(p, pos, &item, &next));
            TRY(push(&items, item));
            quantifiable = 1;
            pos = next;
            continue;
        }
        if (!is_special(c) || c == '\\') {
            Py_ssize_t count;
            Py_ssize_t end = literal_run(p, pos, size, &count);
            if (end == -2) goto fail;
            if (end < 0) {
                fail(p, "bad escape (end of pattern)", pos);
                goto fail;
            }
            if (end < size && count > 1) {
                Py_UCS4 after = CH(p, end);
                if (after == '*' || after == '+' || after == '?' || after == '{') {
                    /* the last character takes the quantifier */
                    TRY(literal(p, p->run, count - 1, &item));
                    TRY(push(&items, item));
                    TRY(literal(p, p->run + count - 1, 1, &item));
                    TRY(push(&items, item));
                    quantifiable = 1;
                    pos = end;
                    continue;
                }
            }
            TRY(literal(p, p->run, count, &item));
            TRY(push(&items, item));
            quantifiable = 1;
            pos = end;
            continue;
        }
        if (c == '[') {
            TRY(char_class(p, pos, size, &item, &next));
            TRY(push(&items, item));
            quantifiable = 1;
            pos = next;
            continue;
        }
        if (c == '.') {
            TRY(char_set(p, dotall ? p->any : p->any_but_newline, &item));
            TRY(push(&items, item));
            quantifiable = 1;
            pos += 1;
            continue;
        }
        if (c == '*' || c == '+' || c == '?' || c == '{') {
            int literal_brace;
            Py_ssize_t end = quantify(p, &items, quantifiable, pos, size, &literal_brace);
            if (end < 0) goto fail;
            if (literal_brace) {
                unsigned char brace = '{';
                TRY(byte_chain(p, &brace, 1, &item));
                TRY(push(&items, item));
                quantifiable = 1;
            } else {
                quantifiable = 0;
            }
            pos = end;
            continue;
        }
        if (c == '|') {
            TRY(sequence(p, &items, &item));
            TRY(push(&branches, item));
            items.len = 0;
            quantifiable = 0;
            pos += 1;
            continue;
        }
        if (c == '(' && starts_with(p, pos, "(?&")) {
            Py_ssize_t close = PyUnicode_FindChar(p->pattern, ')', pos, size, 1);
            if (close == -2) goto fail;
            if (close < 0) {
                fail(p, "missing ), unterminated subroutine call", pos);
                goto fail;
            }
            PyObject *name = PyUnicode_Substring(p->pattern, pos + 3, close);
            if (!name) goto fail;
            int rc = call(p, name, pos, &item);
            Py_DECREF(name);
            TRY(rc);
            TRY(push(&items, item));
            quantifiable = 1;
            pos = close + 1;
            continue;
        }
        if (c == '(') {
            int is_define = starts_with(p, pos, "(?(DEFINE)");
            Py_ssize_t body = pos + 1;
            int inner_dotall = dotall;
            if (is_define) {
                Py_ssize_t defined = PyObject_Length(p->definitions);
                if (defined < 0) goto fail;
                if (depth || items.len || branches.len || defined) {
                    fail(p, "(?(DEFINE)...) must open the pattern", pos);
                    goto fail;
                }
                body = pos + 10;
            } else {
                int found = reused_group(p, pos, size, dotall, &item, &next);
                TRY(found);
                if (found) {
                    TRY(push(&items, item));
                    quantifiable = 1;
                    pos = next;
                    continue;
                }
                if (starts_with(p, pos + 1, "?:")) {
                    body = pos + 3;
                } else if (starts_with(p, pos + 1, "?")) {
                    PyObject *result = call_builder(p, "open_body", "(nnO)", pos, size,
                                                    dotall ? Py_True : Py_False);
                    if (!result) goto fail;
                    body = PyLong_AsSsize_t(PyTuple_GET_ITEM(result, 0));
                    inner_dotall = PyObject_IsTrue(PyTuple_GET_ITEM(result, 1));
                    Py_DECREF(result);
                    if (PyErr_Occurred()) goto fail;
                    if (body < 0) { /* a comment */
                        pos = -body;
                        continue;
                    }
                }
            }
            Level *grown = with_room(stack, &stack_cap, depth + 1, sizeof(Level));
            if (!grown) goto fail;
            stack = grown;
            Level level = {items, branches, pos, dotall};
            stack[depth++] = level;
            FragVec none = {0};
            items = none;
            branches = none;
            if (is_define) p->define_level = depth;
            dotall = inner_dotall;
            quantifiable = 0;
            pos = body;
            continue;
        }
        if (c == ')') {
            if (!depth) {
                fail(p, "unbalanced parenthesis", pos);
                goto fail;
            }
            if (depth == p->define_level) { /* the end of the definitions */
                dotall = pop_level(stack, &depth, &items, &branches).dotall;
                p->define_level = -1;
                quantifiable = 0; /* "(?(DEFINE)...)*" repeats nothing */
                pos += 1;
                continue;
            }
            Frag group;
            TRY(sequence(p, &items, &item));
            TRY(push(&branches, item));
            TRY(alternation(p, &branches, &group));
            Level level = pop_level(stack, &depth, &items, &branches);
            dotall = level.dotall;
            if (depth == p->define_level) {
                PyObject *tuple = frag_tuple(group);
                if (!tuple) goto fail;
                PyObject *result = call_builder(p, "define", "(nO)", level.open_pos, tuple);
                Py_DECREF(tuple);
                if (!result) goto fail;
                Py_DECREF(result);
                pos += 1;
                continue;
            }
            TRY(remember_group(p, level.open_pos, pos, dotall, group));
            TRY(push(&items, group));
            quantifiable = 1;
            pos += 1;
            continue;
        }
        if (c == '^') {
            fail(p, "the anchor '^' is only supported at the very start of the pattern", pos);
            goto fail;
        }
        if (c == '$') {
            fail(p, "the anchor '$' is only supported at the very end of the pattern", pos);
            goto fail;
        }
        PyErr_Format(PyExc_AssertionError, "unhandled character at %zd", pos);
        goto fail;
    }
    if (depth) {
        fail(p, "missing ), unterminated subpattern", stack[depth - 1].open_pos);
        goto fail;
    }
    TRY(sequence(p, &items, &item));
    TRY(push(&branches, item));
    TRY(alternation(p, &branches, top));
    free(items.data);
    free(branches.data);
    free(stack);
    return 0;
fail:
    free(items.data);
    free(branches.data);
    for (Py_ssize_t i = 0; i < depth; i++) free_level(&stack[i]);
    free(stack);
    return -1;
#undef TRY
}

static PyObject *parse_body(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *builder, *context;
    Py_ssize_t pos, size;
    int dotall;
    if (!PyArg_ParseTuple(args, "OnnpO", &builder, &pos, &size, &dotall, &context)) return NULL;
    PyObject *pattern = attr(builder, "pattern");
    if (!pattern) return NULL;
    if (!PyUnicode_Check(pattern)) {
        Py_DECREF(pattern);
        PyErr_SetString(PyExc_TypeError, "expected builder.pattern to be a str");
        return NULL;
    }
    Parser p;
    memset(&p, 0, sizeof p);
    Frag top;
    PyObject *result = NULL;
    if (pos < 0 || size > PyUnicode_GET_LENGTH(pattern) || pos > size) {
        PyErr_SetString(PyExc_ValueError, "expected 0 <= pos <= size <= len(pattern)");
    } else if (read_context(&p, builder, pattern, context) == 0 &&
               parse_loop(&p, pos, size, dotall, &top) == 0 && sync_out(&p) == 0) {
        PyObject *level = PyLong_FromSsize_t(p.define_level);
        if (level && PyObject_SetAttrString(builder, "define_level", level) == 0)
            result = frag_tuple(top);
        Py_XDECREF(level);
    }
    release(&p);
    Py_DECREF(pattern);
    return result;
}

/* the kind, characters and length of `obj`, a str (TypeError otherwise) */
static int read_str(PyObject *obj, int *kind, const void **text, Py_ssize_t *length) {
    if (!PyUnicode_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "expected a str");
        return -1;
    }
    *kind = PyUnicode_KIND(obj);
    *text = PyUnicode_DATA(obj);
    *length = PyUnicode_GET_LENGTH(obj);
    return 0;
}

/* the end (past its ']') of the class opening at i, read as the dialect's scans read it:
 * escapes skip the next character, the first unescaped ']' closes it; -1 when it never
 * closes (a lone backslash at the end included) */
static Py_ssize_t class_end(int kind, const void *text, Py_ssize_t length, Py_ssize_t i) {
    for (Py_ssize_t j = i + 1; j < length;) {
        Py_UCS4 d = PyUnicode_READ(kind, text, j);
        if (d == ']') return j + 1;
        if (d == '\\' && j + 1 >= length) return -1;
        j += d == '\\' ? 2 : 1;
    }
    return -1;
}

/* whether the group opening regex[0] ('(') closes at its last character, reading escapes
 * and classes whole: formcast.regex.dialect._is_atom's scan of a parenthesized regex */
static PyObject *group_spans_all(PyObject *module, PyObject *regex) {
    (void)module;
    int kind;
    const void *text;
    Py_ssize_t length, depth = 0;
    if (read_str(regex, &kind, &text, &length) < 0) return NULL;
    for (Py_ssize_t i = 0; i < length;) {
        Py_UCS4 c = PyUnicode_READ(kind, text, i);
        if (c == '(') {
            depth++;
            i++;
        } else if (c == ')') {
            depth--;
            i++;
            if (depth == 0) return PyBool_FromLong(i == length);
        } else if (c == '\\') {
            i += i + 1 < length ? 2 : 1;
        } else if (c == '[') {
            Py_ssize_t end = class_end(kind, text, length, i);
            if (end < 0) Py_RETURN_FALSE; /* an unclosed class: the rest is inside */
            i = end;
        } else {
            i++;
        }
    }
    Py_RETURN_FALSE;
}

/* the names of the definitions `regex` calls with (?&name), reading escapes and closed
 * classes whole: formcast.regex.dialect.calls's scan */
static PyObject *call_names(PyObject *module, PyObject *regex) {
    (void)module;
    int kind;
    const void *text;
    Py_ssize_t length;
    if (read_str(regex, &kind, &text, &length) < 0) return NULL;
    PyObject *names = PyList_New(0);
    if (!names) return NULL;
    for (Py_ssize_t i = 0; i < length;) {
        Py_UCS4 c = PyUnicode_READ(kind, text, i);
        if (c == '\\') {
            i += i + 1 < length ? 2 : 1;
        } else if (c == '[') {
            Py_ssize_t end = class_end(kind, text, length, i);
            i = end < 0 ? i + 1 : end; /* an unclosed class's bracket is one character */
        } else if (c == '(' && i + 3 < length && PyUnicode_READ(kind, text, i + 1) == '?' &&
                   PyUnicode_READ(kind, text, i + 2) == '&') {
            Py_ssize_t j = i + 3;
            while (j < length) {
                Py_UCS4 d = PyUnicode_READ(kind, text, j);
                if (!(Py_UNICODE_ISALNUM(d) || d == '_')) break;
                j++;
            }
            if (j > i + 3 && j < length && PyUnicode_READ(kind, text, j) == ')') {
                PyObject *name = PyUnicode_Substring(regex, i + 3, j);
                if (!name || PyList_Append(names, name) < 0) {
                    Py_XDECREF(name);
                    Py_DECREF(names);
                    return NULL;
                }
                Py_DECREF(name);
                i = j + 1;
            } else {
                i++;
            }
        } else {
            i++;
        }
    }
    return names;
}

/* how many characters of `pattern` lie in alternations of at least `min_words` literals:
 * formcast.automaton.choices.choice_characters's scan (matches found left to right, never
 * overlapping) */
static PyObject *choice_span(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *pattern;
    Py_ssize_t min_words, length, found = 0;
    int kind;
    const void *text;
    if (!PyArg_ParseTuple(args, "On", &pattern, &min_words)) return NULL;
    if (read_str(pattern, &kind, &text, &length) < 0) return NULL;
    for (Py_ssize_t i = 0; i + 2 < length;) {
        if (PyUnicode_READ(kind, text, i) != '(' || PyUnicode_READ(kind, text, i + 1) != '?' ||
            PyUnicode_READ(kind, text, i + 2) != ':') {
            i++;
            continue;
        }
        Py_ssize_t bars, end = literal_group_end(kind, text, length, i, &bars);
        if (end < 0) {
            i++;
            continue;
        }
        if (bars >= min_words - 1) found += end - i;
        i = end;
    }
    return PyLong_FromSsize_t(found);
}

static PyMethodDef methods[] = {
    {"choice_span", choice_span, METH_VARARGS,
     "choice_span(pattern, min_words) -> int: the characters of pattern in alternations of "
     "at least min_words literals."},
    {"call_names", call_names, METH_O,
     "call_names(regex) -> list[str]: the names of the definitions regex calls, in order."},
    {"group_spans_all", group_spans_all, METH_O,
     "group_spans_all(regex) -> bool: whether the group opening regex[0] closes at its end "
     "(escapes and classes read whole)."},
    {"parse_body", parse_body, METH_VARARGS,
     "parse_body(builder, pos, size, dotall, context) -> fragment: the loop of "
     "_Builder.parse_body over pattern[pos:size], building the same NFA."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "formcast._regex_parse",
    "The parse loop of formcast.automaton.parse in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__regex_parse(void) {
    if (PyType_Ready(&Int64ListType) < 0) return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (!module) return NULL;
    if (PyModule_AddObjectRef(module, "Int64List", (PyObject *)&Int64ListType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
