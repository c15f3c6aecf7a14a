/* formcast._trie_walk.Visitor: the first visit of a state, in one call.
 *
 * index.py makes a state's row (the tokens it allows, and where each leads) the first time
 * a cursor stands there. The row's walks, sorts and bit packing ran in C already; the
 * Python between them (which way to take, buffers, copies, the bits) cost more than those
 * calls at the median of maskbench's first visits. A Visitor holds one vocabulary's arrays for
 * its life and takes a state through the whole decision of TokenIndex._walk_vocabulary
 * for a LazyAutomaton whose rows formcast._subset builds, building the rows it reads:
 *
 * - the state's plain bytes (PLAIN_BYTES) all lead to one state, and so on down the chain
 *   of plain bytes (a string's characters): the other tokens are walked and written over
 *   the plain tokens' template of the chain's shape (index._templated). Where the state
 *   loops on every plain byte and every non-ASCII character (formcast._subset's
 *   utf8_steps), the text tokens (vocabulary.TextTokens) are not walked: whole ones end
 *   there, cut ones inside a character, and only the special trie is walked;
 * - else a string leaving out a few plain bytes (`[^,"]{1,255}`): the same template, less
 *   the plain tokens holding one of them (diverted_visit, with no byte diverted);
 * - else an object's key, where most plain bytes lead to states that loop on every plain
 *   byte (index._first_byte_row): the plain tokens under the other first bytes (declared
 *   names' initials) and the other tokens are walked, and the row's bits are the plain
 *   tokens' by first byte; under an initial whose tokens all live, those that leave
 *   every name are read off the first byte too (walk_initials), and the other tokens
 *   that end in a free key (its UTF-8 characters) are bits alone: the row lists only
 *   the tokens on a name's way and the other tokens apart. Where every non-ASCII
 *   character leads to the free key, which loops on them, the text tokens are walked
 *   only under a declared name's initial (take_key_text);
 * - else a string whose plain bytes part three ways (most along a chain, a few elsewhere,
 *   the rest dead: a hostname, a UUID): the template of the chain less the plain tokens
 *   holding a byte off it, and a walk from where a token leaves the chain at a live byte
 *   (diverted_visit);
 * - else the whole trie is walked.
 *
 * A row of at most 1 / sorted_share of the vocabulary comes back sorted, with its bits; a
 * larger one coded one byte a token (index._scattered, index._templated: a string's from
 * the template of its chain's shape, which template_of gives; such a row is sorted only
 * up to 1 / TEMPLATED_SHARE). The tests compare every row with index.py's own ways.
 *
 * Every row is built under the automaton's lock by the caller, with the GIL held (the
 * builder makes Python objects). When the table lacks room for a row's new states, the
 * visit stops and says so (VISIT_RETRY): the caller grows the table and calls again;
 * the rows built so far stay built. */

#include <stdlib.h>
#include <string.h>

#include "_trie_walk.h"

enum {
    VISIT_RETRY = 0,
    VISIT_SORTED = 1,
    VISIT_FIRST_BYTE = 3,
    VISIT_CHAIN = 4,
    VISIT_CODED = 5,
    VISIT_TABLE = 6,
    VISIT_TEMPLATED = 7
};
/* the tries a Visitor holds: every token's, those not plain, the plain ones, and (where
 * given: `text`) those neither plain nor text (vocabulary.special_trie) and the text
 * tokens that open with a plain byte (vocabulary.TextTokens.plain_first) */
enum { TRIE_ALL, TRIE_OTHER, TRIE_PLAIN, TRIE_SPECIAL, TRIE_TEXT, TRIES };
enum { OPENS_PLAIN, OPENS_CUT, OPENS_WHOLE }; /* vocabulary.TextTokens.cut_openings */

typedef struct Scratch Scratch;
static void scratch_free(Scratch *s);

/* A visit's buffers: the walk's output and pending pairs, the chain, a table over the
 * vocabulary. */
struct Scratch {
    int32_t *out_ids, *out_states, *pending_nodes, *pending_states, *chain, *table;
};

/* A diverted chain's (see diverted_visit): the plain tokens holding a byte off the chain,
 * and room to mark the walked plain tokens (both words long, in the table's scratch). */
typedef struct {
    const uint32_t *dropped;
    uint32_t *listed;
} Diverted;

/* The bytes of a visit's scratch table: a row's states (int32 a token), or its codes (a
 * byte a token) followed by two bitmasks over the vocabulary (see chain_visit). */
static size_t scratch_table_bytes(Py_ssize_t size) {
    size_t states = (size_t)size * 4, codes = (size_t)((size + 3) & ~(Py_ssize_t)3);
    size_t masks = 2 * (size_t)((size + 31) / 32) * 4;
    return states > codes + masks ? states : codes + masks;
}

/* Allocate the buffers (0), or none of them (-1: MemoryError set). */
static int scratch_alloc(Scratch *s, Py_ssize_t out_size, Py_ssize_t pending_size,
                         Py_ssize_t links, Py_ssize_t size) {
    s->out_ids = malloc((size_t)out_size * 4 + 4);
    s->out_states = malloc((size_t)out_size * 4 + 4);
    s->pending_nodes = malloc((size_t)pending_size * 4 + 4);
    s->pending_states = malloc((size_t)pending_size * 4 + 4);
    s->chain = malloc((size_t)links * 4);
    s->table = malloc(scratch_table_bytes(size));
    if (s->out_ids && s->out_states && s->pending_nodes && s->pending_states && s->chain &&
        s->table)
        return 0;
    scratch_free(s);
    PyErr_NoMemory();
    return -1;
}

static void scratch_free(Scratch *s) {
    free(s->out_ids);
    free(s->out_states);
    free(s->pending_nodes);
    free(s->pending_states);
    free(s->chain);
    free(s->table);
    memset(s, 0, sizeof(*s));
}
enum {
    HELD_ROOT = TRIES * TRIE_ARRAYS,
    HELD_PLAIN,
    HELD_BITS,
    HELD_BY_FIRST,
    HELD_REPEATS, /* the repeats and their originals of the whole trie, then the other's */
    HELD_TEXT = HELD_REPEATS + 4, /* the text tokens' arrays (take_text) */
    VISITOR_BUFFERS = HELD_TEXT + 12
};

#define DROPPED_KEPT 8
/* the ways of visit_state, as Visitor.ways counts the rows they made */
enum { WAY_CHAIN, WAY_EXCLUDED, WAY_KEY, WAY_DIVERTED, WAY_WHOLE, WAYS };
typedef struct {
    uint64_t bytes[4]; /* the bytes off the chain */
    uint32_t *tokens;  /* the plain tokens holding one (words), or NULL: a free slot */
} DroppedSet;

typedef struct {
    PyObject_HEAD
    Held held[VISITOR_BUFFERS];
    TrieArrays tries[TRIES];
    const int32_t *plain_root;     /* 256 entries: the plain trie's node of each byte, or -1 */
    const uint8_t *plain_bytes;    /* the bytes that stand for themselves in a string */
    Py_ssize_t plain_count;
    uint64_t plain_mask[4];        /* the same, as byte flags */
    const uint32_t *plain_bits;    /* the plain tokens, packed (words) */
    const uint32_t *bits_by_first; /* the plain tokens by first byte (256 x words) */
    Py_ssize_t size, words, links, first_byte_min, sorted_share;
    /* the repeated tokens of the whole trie and the other, and the tokens they repeat */
    const int32_t *repeat[2], *original[2];
    Py_ssize_t repeats[2];
    PyObject *template_of; /* shape -> (codes, bits): the plain tokens' template, or None */
    /* () -> the plain tokens containing each byte (256 x words), asked the first time a
     * chain leaving out plain bytes is met (diverted_visit); None: that way is not taken */
    PyObject *by_byte_of;
    Held by_byte_held;
    const uint32_t *by_byte;
    /* the plain tokens holding a byte off a diverted chain, by its set (off_chain_tokens) */
    DroppedSet dropped[DROPPED_KEPT];
    int dropped_next;
    Py_ssize_t taken[WAYS]; /* the rows each way made (Visitor.ways) */
    /* the tokens that are not plain only for their non-ASCII characters
     * (vocabulary.TextTokens): those whose last character is whole, as bits (all, and
     * those opening with a non-ASCII byte), and those cutting it short, with its lead
     * byte, its bytes they hold and how they open; the tokens of the text trie (those
     * opening with a plain byte): its node of each first byte, and each token's cut
     * depth and lead byte (0: whole) in its order. has_text 0 (and no special or text
     * trie) where the Visitor was given none */
    const uint32_t *text_whole_bits, *text_whole_lead_bits;
    const int32_t *text_cut_ids, *text_root;
    const uint8_t *text_cut_leads, *text_cut_depths, *text_cut_openings;
    const uint8_t *text_depths, *text_leads;
    Py_ssize_t text_cut_count;
    /* the whole ones again, ascending, with their characters, and the whole characters
     * before each cut one's cut character; the most characters a chain must count for
     * them (a whole token's, or a cut one's and its cut character) */
    const int32_t *text_whole_ids;
    const uint8_t *text_whole_chars, *text_cut_chars;
    Py_ssize_t text_whole_count, text_max_chars;
    int has_text;
    Py_ssize_t out_size, pending_size;
    Scratch scratch; /* the visits' buffers */
    int busy;        /* whether a visit holds them */
} Visitor;

/* -- results ------------------------------------------------------------------------- */

/* A tuple of `count` new references (stolen, released on failure); NULL if any is. */
static PyObject *tuple_of(PyObject **items, int count) {
    PyObject *tuple = NULL;
    for (int i = 0; i < count; i++)
        if (items[i] == NULL) goto fail;
    tuple = PyTuple_New(count);
    if (tuple == NULL) goto fail;
    for (int i = 0; i < count; i++) PyTuple_SET_ITEM(tuple, i, items[i]);
    return tuple;
fail:
    for (int i = 0; i < count; i++) Py_XDECREF(items[i]);
    return NULL;
}

static PyObject *bytes_of(const void *data, Py_ssize_t size) {
    return PyBytes_FromStringAndSize((const char *)data, size);
}

static PyObject *retry(void) {
    PyObject *items[1] = {PyLong_FromLong(VISIT_RETRY)};
    return tuple_of(items, 1);
}

/* -- rows of the automaton ----------------------------------------------------------- */

/* Whether every plain byte leads from `row` to one state (written to *target). */
static int one_plain_target(const Visitor *v, const int32_t *row, int32_t *target) {
    int32_t first = row[v->plain_bytes[0]];
    for (Py_ssize_t k = 1; k < v->plain_count; k++)
        if (row[v->plain_bytes[k]] != first) return 0;
    *target = first;
    return 1;
}

/* The characters a chain of plain bytes may count for text tokens (chain_counts_text's
 * steps lie on the stack: 768 bytes a link). */
#define TEXT_CHAIN_MAX 16

/* The links of a chain whose rows follow_chain builds: those whose characters
 * chain_counts_text counts for the text tokens (text_max_chars; the walks build the
 * others they read). Past them a link is read off the plain bytes' edges alone
 * (plain_step): a bounded string's row interns the states inside its UTF-8 characters
 * too, and the chain runs to the longest plain token (80 bytes in SmolLM2's vocabulary):
 * its first visit built 80 rows and ~700 states, ~0.4 ms. */
static Py_ssize_t chain_rows(const Visitor *v) {
    return v->has_text && v->text_max_chars <= TEXT_CHAIN_MAX ? v->text_max_chars : 1;
}

/* chain[k], for 2 <= k < links: the one state k plain bytes lead to from chain[0] (DEAD
 * stays DEAD, a loop stays put); a state sending every plain byte to DEAD ends the
 * chain. The rows of its first chain_rows links are built. 1 whole, 0 parted on the
 * way, 2 no room, -1 error. */
static int follow_chain(const Visitor *v, Walk *w, int32_t *chain) {
    Py_ssize_t rows = chain_rows(v);
    for (Py_ssize_t k = 2; k < v->links; k++) {
        int32_t current = chain[k - 1];
        if (current == DEAD || current == chain[k - 2]) {
            chain[k] = current;
            continue;
        }
        if (k - 1 >= rows && w->plain_step && w->build) {
            int64_t next = w->plain_step(w->nfa, current, v->plain_mask, w->writable_table,
                                         w->states, w->accepting, w->sets);
            if (next == -1) return -1;
            if (next == STEP_NO_ROOM) {
                w->build = NULL; /* as build_row: nothing more is built in this call */
                return 2;
            }
            if (next == PLAIN_PARTS) return 0;
            chain[k] = (int32_t)next;
            continue;
        }
        int built = build_row(w, current);
        if (built <= 0) return built < 0 ? -1 : 2;
        if (!one_plain_target(v, w->table + (Py_ssize_t)current * 256, &chain[k])) return 0;
    }
    return 1;
}

/* The shape of the chain (index._chain_shape): byte k is 0 where chain[k] is DEAD, else 1
 * + the index of chain[k] among the chain's distinct live states in order of first
 * appearance; byte 0 is 0. None past 255 distinct states. */
static PyObject *chain_shape(const Visitor *v, const int32_t *chain) {
    PyObject *shape = PyBytes_FromStringAndSize(NULL, v->links);
    if (shape == NULL) return NULL;
    uint8_t *codes = (uint8_t *)PyBytes_AS_STRING(shape);
    int32_t seen[255];
    int distinct = 0;
    codes[0] = 0;
    for (Py_ssize_t k = 1; k < v->links; k++) {
        int32_t state = chain[k];
        if (state == DEAD) {
            codes[k] = 0;
            continue;
        }
        int code = 0;
        for (int i = distinct - 1; i >= 0 && !code; i--) /* the latest first: runs repeat it */
            if (seen[i] == state) code = i + 1;
        if (!code) {
            if (distinct == 255) {
                Py_DECREF(shape);
                Py_RETURN_NONE;
            }
            seen[distinct++] = state;
            code = distinct;
        }
        codes[k] = (uint8_t)code;
    }
    return shape;
}

/* -- walks --------------------------------------------------------------------------- */

/* Walk `trie` from the (node, state) pairs, appending to the walk's output. 1 done, 0
 * stopped at a row without room, -1 error (exception set). */
static int walk_from(const Visitor *v, Walk *w, int trie, const int32_t *nodes,
                     const int32_t *states, Py_ssize_t count) {
    use_trie(w, &v->tries[trie]);
    w->pending = 0;
    int status = run(w, nodes, states, count);
    if (status != WALK_OK) {
        set_walk_error(status);
        return -1;
    }
    return w->pending == 0;
}

static int walk_root(const Visitor *v, Walk *w, int trie, int32_t state) {
    const int32_t root = 0;
    return walk_from(v, w, trie, &root, &state, 1);
}

/* The answer of a sorted row: its pairs and its bits (a new reference, stolen). */
static PyObject *sorted_answer(const int32_t *ids, const int32_t *states, Py_ssize_t count,
                               PyObject *bits) {
    PyObject *items[4] = {PyLong_FromLong(VISIT_SORTED), bytes_of(ids, count * 4),
                          bytes_of(states, count * 4), bits};
    return tuple_of(items, 4);
}

/* A sorted row with its bits. */
static PyObject *sorted_row(const Visitor *v, const int32_t *ids, const int32_t *states,
                            Py_ssize_t count) {
    PyObject *bits = PyBytes_FromStringAndSize(NULL, v->words * 4);
    int32_t bad; /* none: the tries' ids were checked below the size */
    if (bits) pack_ids(ids, count, (uint32_t *)PyBytes_AS_STRING(bits), v->words, &bad);
    return sorted_answer(ids, states, count, bits);
}

/* The ids whose bits `words` sets, ascending, into `ids`; their count. */
static Py_ssize_t ids_of_bits(const Visitor *v, const uint32_t *words, int32_t *ids) {
    Py_ssize_t count = 0;
    for (Py_ssize_t word = 0; word < v->words; word++)
        for (uint32_t set = words[word]; set; set &= set - 1)
            ids[count++] = (int32_t)(word * 32 + __builtin_ctz(set));
    return count;
}

/* A small row coded one byte a token (`code`, palette[code] its state) whose bits (a
 * new reference, stolen) are set exactly where its code is not 0: sorted, its pairs
 * written to ids and states in order of their bits. The bits are 6 KB for 49k tokens,
 * where the codes are 49 KB: their scan was most of such a row's making. */
static PyObject *sorted_of_codes(const Visitor *v, const uint8_t *code, const int32_t *palette,
                                 PyObject *bits, int32_t *ids, int32_t *states) {
    Py_ssize_t count = ids_of_bits(v, (const uint32_t *)PyBytes_AS_STRING(bits), ids);
    for (Py_ssize_t i = 0; i < count; i++) states[i] = palette[code[ids[i]]];
    return sorted_answer(ids, states, count, bits);
}

#define PAIRS_INSERTED 64 /* a row of more pairs is sorted by its bits (sorted_by_bits) */

/* The walk's pairs (their ids distinct, below the size) sorted by id through the row's
 * bits: each live pair's bit set and its state written at its id in `table` (the visit's
 * scratch over the vocabulary), then the bits read in order. O(pairs + words): a radix
 * sort's buckets (2 x 2,048) cost more than the few hundred pairs of most rows. */
static PyObject *sorted_by_bits(const Visitor *v, Walk *w, int32_t *table) {
    PyObject *bits = PyBytes_FromStringAndSize(NULL, v->words * 4);
    if (!bits) return NULL;
    uint32_t *words = (uint32_t *)PyBytes_AS_STRING(bits);
    memset(words, 0, (size_t)v->words * 4);
    int32_t *ids = w->out_ids, *states = w->out_states;
    for (Py_ssize_t i = 0; i < w->filled; i++) {
        if (states[i] == DEAD) continue;
        words[ids[i] >> 5] |= (uint32_t)1 << (ids[i] & 31);
        table[ids[i]] = states[i];
    }
    Py_ssize_t count = ids_of_bits(v, words, ids);
    for (Py_ssize_t i = 0; i < count; i++) states[i] = table[ids[i]];
    return sorted_answer(ids, states, count, bits);
}

/* A row coded one byte a token (codes, bits and the palette's `distinct` states): sorted
 * when it holds at most 1 / sorted_share of the vocabulary, else as it is. */
static PyObject *coded_row(const Visitor *v, PyObject *codes, PyObject *bits,
                           const int32_t *palette, Py_ssize_t distinct, Py_ssize_t kept,
                           int32_t *ids, int32_t *states) {
    if (kept * v->sorted_share <= v->size) {
        PyObject *row = sorted_of_codes(v, (const uint8_t *)PyBytes_AS_STRING(codes), palette,
                                        bits, ids, states);
        Py_DECREF(codes);
        return row;
    }
    PyObject *items[4] = {PyLong_FromLong(VISIT_CODED), codes, bytes_of(palette, distinct * 4),
                          bits};
    return tuple_of(items, 4);
}

/* index._scattered of the walk's pairs (trie 0 the whole one, 1 the other). */
static PyObject *scattered(const Visitor *v, Walk *w, int which, int32_t *table) {
    PyObject *codes = PyBytes_FromStringAndSize(NULL, v->size);
    PyObject *bits = PyBytes_FromStringAndSize(NULL, v->words * 4);
    if (!codes || !bits) {
        Py_XDECREF(codes);
        Py_XDECREF(bits);
        return NULL;
    }
    int32_t palette[256];
    Py_ssize_t kept, distinct;
    int bad = scatter_core(w->out_ids, w->out_states, w->filled, NULL, NULL, 0, NULL, 0, table,
                           v->size, v->repeat[which], v->original[which], v->repeats[which],
                           (uint32_t *)PyBytes_AS_STRING(bits), v->words,
                           (uint8_t *)PyBytes_AS_STRING(codes), palette, &kept, &distinct);
    if (bad) {
        Py_DECREF(codes);
        Py_DECREF(bits);
        PyErr_SetString(PyExc_ValueError, "expected token ids below the size");
        return NULL;
    }
    if (distinct > 0)
        return coded_row(v, codes, bits, palette, distinct, kept, w->out_ids, w->out_states);
    Py_DECREF(codes); /* more than 255 states: the table is the row */
    if (kept * v->sorted_share <= v->size) {
        Py_ssize_t count = 0;
        for (Py_ssize_t token = 0; token < v->size; token++)
            if (table[token] != DEAD) {
                w->out_ids[count] = (int32_t)token;
                w->out_states[count++] = table[token];
            }
        Py_DECREF(bits);
        return sorted_row(v, w->out_ids, w->out_states, count);
    }
    PyObject *items[3] = {PyLong_FromLong(VISIT_TABLE), bytes_of(table, v->size * 4), bits};
    return tuple_of(items, 3);
}

/* A large row on its template (VISIT_TEMPLATED): the template's codes, shared, and the
 * tokens whose code differs from theirs as (id, state) pairs, ascending. Only a token
 * that is not plain can differ (a plain one keeps its length's code, its repeats too;
 * one dropped for an excluded byte has its bit clear, which decides): the non-plain ids
 * are read off the plain tokens' bits in order, or off the codes `changed` marks set
 * (template_core), so the pairs need no sort. They are written over the walk's buffers,
 * read no more. The row's codes were 49 KB of new memory a row, 12 page faults where the
 * heap grew; the pairs are a few KB. */
static PyObject *templated_row(const Visitor *v, Walk *w, PyObject *template_codes,
                               const uint8_t *codes, const uint8_t *template_of_codes,
                               const uint32_t *changed, const uint32_t *plain_listed,
                               const int32_t *palette, Py_ssize_t distinct, PyObject *bits) {
    int32_t *ids = w->out_ids, *states = w->out_states;
    Py_ssize_t count = 0;
    for (Py_ssize_t word = 0; word < v->words; word++) {
        /* the few hundred codes a string's row set, where marked: the vocabulary's ~1,300
         * ids that are not plain, each read in two 49 KB arrays, were ~2 us a row */
        uint32_t others = changed ? changed[word] & ~v->plain_bits[word] : ~v->plain_bits[word];
        if (plain_listed) others |= plain_listed[word]; /* a diverted chain's walked ones */
        for (; others; others &= others - 1) {
            Py_ssize_t id = word * 32 + __builtin_ctz(others);
            if (id >= v->size) break;
            if (codes[id] != template_of_codes[id] && codes[id]) {
                ids[count] = (int32_t)id;
                states[count++] = palette[codes[id]];
            }
        }
    }
    PyObject *items[6] = {PyLong_FromLong(VISIT_TEMPLATED), Py_NewRef(template_codes),
                          bytes_of(palette, distinct * 4), bytes_of(ids, count * 4),
                          bytes_of(states, count * 4), bits};
    return tuple_of(items, 6);
}

/* The bits set of what template_of gave (codes, bits, the bits set), in *kept: 0, or -1
 * with an exception set. The count is the template's, kept with it: counted at each
 * visit, the vocabulary's ~1,500 words twice were a tenth of a string's first visit. */
static int template_count(const Visitor *v, PyObject *template, Py_ssize_t *kept) {
    if (!PyTuple_Check(template) || PyTuple_GET_SIZE(template) != 3) {
        PyErr_SetString(PyExc_TypeError, "expected template_of to give (codes, bits, kept)");
        return -1;
    }
    *kept = PyLong_AsSsize_t(PyTuple_GET_ITEM(template, 2));
    if (*kept == -1 && PyErr_Occurred()) return -1;
    if (*kept < 0 || *kept > v->size) {
        PyErr_Format(PyExc_ValueError, "expected a template's count in [0, %zd], found %zd",
                     v->size, *kept);
        return -1;
    }
    return 0;
}

/* The parts of what template_of gave, the codes and bits held in held[0] and held[1], the
 * count in *kept (template_count): 0, or -1 with an exception set (the caller releases
 * `held` either way). */
static int take_template(const Visitor *v, PyObject *template, Held held[2], Py_ssize_t *kept) {
    if (template_count(v, template, kept) < 0) return -1;
    if (take(PyTuple_GET_ITEM(template, 0), &held[0], 0, 1, v->size, "template codes") < 0)
        return -1;
    return take(PyTuple_GET_ITEM(template, 1), &held[1], 0, 4, v->words, "template bits");
}

/* A row on its template comes back sorted when it holds at most 1 / TEMPLATED_SHARE of
 * the vocabulary, else on its template (templated_row): its pairs (~15k tokens of a
 * hostname's letters and digits, a third of the vocabulary) cost ~30 us to list, sort
 * and copy out, where its template's codes are shared and its bits made anyway. */
#define TEMPLATED_SHARE 16

/* index._templated: the plain tokens' template of the chain's shape, the walked tokens
 * and the repeats written over it (in `codes`, the visit's scratch of a byte a token),
 * where `diverted` is not NULL less the plain tokens its `dropped` marks, before the
 * walked tokens, plain ones too, are written (diverted_visit): sorted when small, else
 * on its template (templated_row). Py_None where it does not apply (more than 255
 * states): the caller then leaves the row to index.py, or walks the whole trie. */
static PyObject *on_template(const Visitor *v, Walk *w, const int32_t *chain, PyObject *shape,
                             uint8_t *codes, const uint32_t *counted_bits, uint32_t *changed,
                             PyObject *fetched, const Diverted *diverted) {
    PyObject *template =
        fetched ? Py_NewRef(fetched) : PyObject_CallOneArg(v->template_of, shape);
    if (template == NULL) return NULL;
    Held held[2];
    memset(held, 0, sizeof(held));
    PyObject *result = NULL, *bits = NULL;
    Py_ssize_t kept, distinct;
    if (take_template(v, template, held, &kept) < 0) goto done;
    bits = PyBytes_FromStringAndSize(NULL, v->words * 4);
    if (!bits) goto done;
    int32_t palette[256];
    int status = template_core(
        w->out_ids, w->out_states, w->filled, chain, (const uint8_t *)PyBytes_AS_STRING(shape),
        v->links, held[0].view.buf, held[1].view.buf, kept, v->plain_bits, v->size,
        v->repeat[1], v->original[1], v->repeats[1], codes, changed,
        diverted ? diverted->dropped : NULL, (uint32_t *)PyBytes_AS_STRING(bits), v->words,
        palette, &kept, &distinct);
    if (status == TOO_MANY) {
        result = Py_NewRef(Py_None);
    } else if (status != FINE) {
        PyErr_SetString(PyExc_ValueError, "expected token ids below the size");
    } else {
        if (counted_bits) { /* tokens at chain[1] the walk counted (chain_visit): bits alone */
            uint32_t *out = (uint32_t *)PyBytes_AS_STRING(bits);
            for (Py_ssize_t word = 0; word < v->words; word++) out[word] |= counted_bits[word];
            palette[0] = chain[1]; /* an allowed token of code 0 that no pair names */
        }
        if (kept * TEMPLATED_SHARE <= v->size && !counted_bits) {
            result = sorted_of_codes(v, codes, palette, bits, w->out_ids, w->out_states);
            bits = NULL; /* sorted_of_codes took it */
        } else {
            uint32_t *listed = diverted ? diverted->listed : NULL;
            if (listed) { /* the walked plain tokens, listed apart from the template */
                memset(listed, 0, (size_t)v->words * 4);
                for (Py_ssize_t i = 0; i < w->filled; i++) {
                    int32_t id = w->out_ids[i];
                    if (v->plain_bits[id >> 5] >> (id & 31) & 1)
                        listed[id >> 5] |= (uint32_t)1 << (id & 31);
                }
            }
            result = templated_row(v, w, PyTuple_GET_ITEM(template, 0), codes, held[0].view.buf,
                                   changed, listed, palette, distinct, bits);
            bits = NULL; /* templated_row took it */
        }
    }
done:
    release(held, 2);
    Py_XDECREF(bits);
    Py_DECREF(template);
    return result;
}

/* The walk's pairs as a row: sorted with their bits when small and the trie repeats no
 * token; else scattered over the vocabulary (index._scattered): coded one byte a token
 * when its states are few, else as the table itself. */
static PyObject *finish_pairs(const Visitor *v, Walk *w, int trie, int32_t *table) {
    Py_ssize_t count = w->filled;
    int which = trie == TRIE_ALL ? 0 : 1;
    if (v->repeats[which] > 0 || count * v->sorted_share > v->size)
        return scattered(v, w, which, table);
    if (count > PAIRS_INSERTED) return sorted_by_bits(v, w, table);
    if (sort_pairs_in_place(w->out_ids, w->out_states, count) < 0) return PyErr_NoMemory();
    return sorted_row(v, w->out_ids, w->out_states, count);
}

/* -- the three ways ------------------------------------------------------------------ */

/* Whether the template of `shape` (*template, a new reference) alone makes a row large
 * (more than 1 / sorted_share of the vocabulary): 1, 0, or -1 with an exception set. */
static int large_on_template(const Visitor *v, PyObject *shape, PyObject **template) {
    *template = PyObject_CallOneArg(v->template_of, shape);
    if (*template == NULL) return -1;
    Py_ssize_t kept; /* its arrays are taken by on_template, which uses them */
    if (template_count(v, *template, &kept) < 0) return -1;
    return kept * v->sorted_share > v->size;
}

/* A pair of the walk's output, where its buffer has room: the walks' pairs and the text
 * tokens' are tokens that are not plain, none twice. */
static inline void add_pair(Walk *w, int32_t id, int32_t state) {
    w->out_ids[w->filled] = id;
    w->out_states[w->filled++] = state;
}

/* The state `depth` bytes into a character opening with `lead`, of utf8_steps' steps. */
static inline int32_t inside_character(const int32_t *steps, int depth, int lead) {
    return steps[(depth - 1) * UTF8_LEADS + lead - 0xC0];
}

/* Whether every well-formed non-ASCII character leads from `state` (its row built) to
 * `loop`, which stays where it is on each (both `state` and `loop` past ASCII dead
 * elsewhere: formcast._subset's utf8_steps), with the states inside a character from
 * each in steps_first and steps_loop: 1, 0 (also where the Visitor has no text tokens or
 * the automaton no such check), -1 with an exception set. `loop` must stay where it is
 * on every plain byte too for the text tokens to end there (the callers' states do). */
static int text_leads(const Visitor *v, Walk *w, int32_t state, int32_t loop,
                      int32_t *steps_first, int32_t *steps_loop) {
    if (!v->has_text || w->utf8 == NULL || loop <= DEAD) return 0;
    int32_t target = w->utf8(w->nfa, state, w->table, w->states, steps_first);
    if (target != loop) return target < 0 ? -1 : 0;
    if (state == loop) {
        memcpy(steps_loop, steps_first, 3 * UTF8_LEADS * sizeof(int32_t));
        return 1;
    }
    target = w->utf8(w->nfa, loop, w->table, w->states, steps_loop);
    return target < 0 ? -1 : target == loop;
}

/* The cut text tokens below a state that text_leads to a loop, as pairs after the walk's:
 * the cut character alone from the state (steps_first), any other from the loop, where
 * its first character (plain or not) led (steps_loop); those that open with a plain byte
 * too unless `plain_too` is 0. */
static void take_cut_tokens(const Visitor *v, Walk *w, const int32_t *steps_first,
                            const int32_t *steps_loop, int plain_too) {
    for (Py_ssize_t k = 0; k < v->text_cut_count; k++) {
        uint8_t opening = v->text_cut_openings[k];
        if (opening == OPENS_PLAIN && !plain_too) continue;
        const int32_t *steps = opening == OPENS_CUT ? steps_first : steps_loop;
        add_pair(w, v->text_cut_ids[k],
                 inside_character(steps, v->text_cut_depths[k], v->text_cut_leads[k]));
    }
}

/* Whether each non-ASCII character counts one link of `chain`, as a plain byte does (a
 * string of bounded length): from chain[k] every well-formed character leads to
 * chain[k + 1] (where that is DEAD, none lives from chain[k]), for k below the most
 * characters a text token needs (text_max_chars). steps + k * 3 * UTF8_LEADS: the
 * states inside a character from chain[k] (DEAD where none lives). 1, 0 (also where the
 * chain is shorter than that, or the Visitor has no text tokens), -1 with an exception
 * set. The rows of chain[0 .. text_max_chars) are built (follow_chain). */
static int chain_counts_text(const Visitor *v, Walk *w, const int32_t *chain, int32_t *steps) {
    if (!v->has_text || w->utf8 == NULL || v->text_max_chars > TEXT_CHAIN_MAX ||
        v->text_max_chars >= v->links - 1)
        return 0;
    for (Py_ssize_t k = 0; k < v->text_max_chars; k++) {
        int32_t *at = steps + k * 3 * UTF8_LEADS;
        if (chain[k] == DEAD || chain[k + 1] == DEAD) {
            if (chain[k] != DEAD) { /* the string's end: no character may live here */
                const int32_t *row = w->table + (Py_ssize_t)chain[k] * 256;
                for (int b = 0x80; b < 0x100; b++)
                    if (row[b] != DEAD) return 0;
            }
            for (int i = 0; i < 3 * UTF8_LEADS; i++) at[i] = DEAD;
            continue;
        }
        int32_t target = w->utf8(w->nfa, chain[k], w->table, w->states, at);
        if (target != chain[k + 1]) return target < 0 ? -1 : 0;
    }
    return 1;
}

/* The text tokens below a state whose chain counts their characters (chain_counts_text),
 * as pairs after the walk's: a whole one where its characters lead along the chain, a
 * cut one inside its cut character from the link its whole ones reach; none where that
 * is DEAD. */
static void take_counted_text(const Visitor *v, Walk *w, const int32_t *chain,
                              const int32_t *steps) {
    for (Py_ssize_t k = 0; k < v->text_whole_count; k++) {
        int32_t after = chain[v->text_whole_chars[k]];
        if (after != DEAD) add_pair(w, v->text_whole_ids[k], after);
    }
    for (Py_ssize_t k = 0; k < v->text_cut_count; k++) {
        const int32_t *at = steps + v->text_cut_chars[k] * 3 * UTF8_LEADS;
        int32_t after = inside_character(at, v->text_cut_depths[k], v->text_cut_leads[k]);
        if (after != DEAD) add_pair(w, v->text_cut_ids[k], after);
    }
}

/* The walk of the other tokens below a string's state. Where the row will lie on its
 * template (large by the template alone, no token repeated), the tokens that end where
 * one plain byte leads (chain[1]: a string's characters that are not plain, UTF-8 ones
 * mostly) are counted into `counted` (words, zeroed here) rather than listed: the row
 * takes them as bits, their state palette[0] (on_template). 1 done, 0 no room, -1 error;
 * *shape is the chain's shape and *template its template where they were needed (new
 * references), else NULL. */
static int walk_string_others(const Visitor *v, Walk *w, int32_t state, const int32_t *chain,
                              uint32_t *counted, PyObject **shape, PyObject **template,
                              int *counting) {
    *shape = *template = NULL;
    *counting = 0;
    if (v->links >= 2 && chain[1] != DEAD && v->template_of != Py_None && !v->repeats[1]) {
        *shape = chain_shape(v, chain);
        if (*shape == NULL) return -1;
        int large = *shape == Py_None ? 0 : large_on_template(v, *shape, template);
        if (large < 0) return -1;
        *counting = large;
    }
    if (*counting) memset(counted, 0, (size_t)v->words * 4);
    /* a free string (chain[1] is the state), or the state just past a declared name
     * (chain[1] a free key): the text tokens end in chain[1] or inside a character */
    int32_t steps_first[3 * UTF8_LEADS], steps_loop[3 * UTF8_LEADS];
    int32_t steps_by_link[TEXT_CHAIN_MAX * 3 * UTF8_LEADS];
    int looping = v->links >= 3 && chain[2] == chain[1], text = 0, counts = 0;
    if (*counting && looping) text = text_leads(v, w, state, chain[1], steps_first, steps_loop);
    else if (*counting) text = counts = chain_counts_text(v, w, chain, steps_by_link);
    if (text < 0) return -1;
    w->counted_state = *counting ? chain[1] : DEAD;
    w->counted_bits = *counting ? counted : NULL;
    int walked = walk_root(v, w, text ? TRIE_SPECIAL : TRIE_OTHER, state);
    w->counted_state = DEAD;
    w->counted_bits = NULL;
    if (walked == 1 && counts) {
        take_counted_text(v, w, chain, steps_by_link);
    } else if (walked == 1 && text) {
        for (Py_ssize_t k = 0; k < v->words; k++) counted[k] |= v->text_whole_bits[k];
        take_cut_tokens(v, w, steps_first, steps_loop, 1);
    }
    return walked;
}

static PyObject *chain_visit(const Visitor *v, Walk *w, int32_t state, const int32_t *chain,
                             int32_t *table) {
    /* the counted bits lie past the codes (a byte a token) in the table's scratch, and
     * the marks of the codes a row on its template sets past them (scratch_table_bytes) */
    uint32_t *counted = (uint32_t *)((uint8_t *)table + ((v->size + 3) & ~(Py_ssize_t)3));
    PyObject *shape, *template;
    int counting;
    int walked = walk_string_others(v, w, state, chain, counted, &shape, &template, &counting);
    if (walked <= 0) {
        Py_XDECREF(shape);
        Py_XDECREF(template);
        return walked < 0 ? NULL : retry();
    }
    if (v->links < 2 || chain[1] == DEAD) /* no plain token */
        return finish_pairs(v, w, TRIE_OTHER, table);
    if (shape == NULL && (shape = chain_shape(v, chain)) == NULL) return NULL;
    if (shape != Py_None && v->template_of != Py_None) {
        /* a row with counted bits is templated whatever it keeps (on_template), so its
         * codes need not be whole: those it sets are marked, past the counted bits */
        PyObject *row = on_template(v, w, chain, shape, (uint8_t *)table,
                                    counting ? counted : NULL, counting ? counted + v->words : NULL,
                                    template, NULL);
        Py_CLEAR(template);
        if (row != Py_None) {
            Py_DECREF(shape);
            return row;
        }
        Py_DECREF(row);
        if (counting) { /* past 255 states: walked again, every token listed */
            w->filled = 0;
            walked = walk_root(v, w, TRIE_OTHER, state);
            if (walked <= 0) {
                Py_DECREF(shape);
                return walked < 0 ? NULL : retry();
            }
        }
    }
    Py_XDECREF(template);
    Py_DECREF(shape);
    PyObject *items[4] = {PyLong_FromLong(VISIT_CHAIN), bytes_of(chain, v->links * 4),
                          bytes_of(w->out_ids, w->filled * 4),
                          bytes_of(w->out_states, w->filled * 4)};
    return tuple_of(items, 4);
}

/* -- strings whose characters part at a few plain bytes ---------------------------------
 *
 * A pattern's characters often split the plain bytes three ways: most lead along a chain
 * (a hostname's letters and digits, or a UUID's, counting them), a few lead elsewhere
 * (the '-' and '.' between its parts), the rest die. A plain token of chain bytes alone
 * then takes its length's state, as a string's does (the template of the chain's
 * shape); one holding a byte that dies wherever it comes, dies; only those holding one of
 * the few other live bytes need a walk, from the node where such a byte leaves the
 * chain. diverted_visit finds those nodes by following the chain down the plain trie
 * only where such a byte lies below (the trie's below_bytes), walks the plain trie from
 * them and the other trie from the state, and writes the walks over the template less
 * every plain token holding a byte off the chain. The whole trie's walk it replaces met
 * ~15k tokens at each character of a hostname (~0.3 ms a first visit). */

#define NOT_DIVERTED ((PyObject *)3) /* diverted_visit: the way does not apply */
/* Plain bytes a chain needs for diverted_visit: with fewer, the tokens of its bytes alone
 * are few (a number's digits), and a template pass over the vocabulary would cost more
 * than their walk. A domain's lower-case letters and digits are 36. */
#define DIVERTED_MIN_CHAIN 24
/* Live plain bytes off the chain a diverted_visit takes at most: each widens the part of
 * the plain trie its nodes are looked for in. */
#define DIVERTED_MAX 16

/* The plain tokens by the bytes they hold, asked of by_byte_of the first time. 0, or -1
 * with an exception set. */
static int hold_by_byte(Visitor *v) {
    if (v->by_byte) return 0;
    PyObject *found = PyObject_CallNoArgs(v->by_byte_of);
    if (!found) return -1;
    int taken = take(found, &v->by_byte_held, 0, 4, 256 * v->words, "by_byte");
    Py_DECREF(found); /* the held buffer keeps it */
    if (taken < 0) return -1;
    v->by_byte = v->by_byte_held.view.buf;
    return 0;
}

/* The plain bytes of `row` that lead to the live state most of them lead to (*next):
 * flags in `on_chain` (256); 1 where they are at least DIVERTED_MIN_CHAIN, else 0. */
static int chain_bytes(const Visitor *v, const int32_t *row, uint8_t *on_chain, int32_t *next) {
    int32_t targets[256];
    Py_ssize_t counts[256], distinct = 0, best = -1;
    for (Py_ssize_t k = 0; k < v->plain_count; k++) {
        int32_t target = row[v->plain_bytes[k]];
        if (target == DEAD) continue;
        Py_ssize_t i = 0;
        while (i < distinct && targets[i] != target) i++;
        if (i == distinct) {
            targets[distinct] = target;
            counts[distinct++] = 0;
        }
        if (++counts[i] > (best < 0 ? 0 : counts[best])) best = i;
    }
    if (best < 0 || counts[best] < DIVERTED_MIN_CHAIN) return 0;
    *next = targets[best];
    memset(on_chain, 0, 256);
    for (Py_ssize_t k = 0; k < v->plain_count; k++)
        on_chain[v->plain_bytes[k]] = row[v->plain_bytes[k]] == *next;
    return 1;
}

/* The chain of `on_chain` bytes from chain[0] (chain[1] set): chain[k] the one state they
 * all lead to from chain[k - 1] (DEAD stays DEAD, a loop stays put), the rows built on
 * the way; `diverted` (256 flags, zeroed here) the plain bytes off the chain that live
 * from some state of it, `count` of them. 1 whole, 0 the chain's bytes part ways (or
 * more than DIVERTED_MAX bytes divert), 2 no room, -1 error. */
static int follow_diverted(const Visitor *v, Walk *w, int32_t *chain, const uint8_t *on_chain,
                           uint8_t *diverted, int *count) {
    memset(diverted, 0, 256);
    *count = 0;
    for (Py_ssize_t k = 0; k + 1 < v->links; k++) {
        int32_t current = chain[k];
        int loops = k >= 1 && current == chain[k - 1]; /* its bytes were read already */
        if (k >= 1 && (current == DEAD || loops)) {
            chain[k + 1] = current;
            continue;
        }
        int built = build_row(w, current);
        if (built <= 0) return built < 0 ? -1 : 2;
        const int32_t *row = w->table + (Py_ssize_t)current * 256;
        int32_t next = DEAD;
        int first = 1;
        for (Py_ssize_t i = 0; i < v->plain_count; i++) {
            uint8_t byte = v->plain_bytes[i];
            int32_t target = row[byte];
            if (!on_chain[byte]) {
                if (target != DEAD && !diverted[byte]) {
                    if (++*count > DIVERTED_MAX) return 0;
                    diverted[byte] = 1;
                }
            } else if (first) {
                next = target;
                first = 0;
            } else if (target != next) {
                return 0;
            }
        }
        if (k >= 1) chain[k + 1] = next; /* chain[1] is given: chain_bytes chose its bytes */
        else if (next != chain[1]) return 0;
    }
    return 1;
}

/* The nodes of the plain trie where a token leaves the chain at a live byte, and the
 * state there (into `nodes`, `states`, room for every node): the trie followed down from
 * its root along chain bytes, only into a node below which a diverted byte lies
 * (`diverted_bits`, four words); their count, or -1 (MemoryError set). */
static Py_ssize_t diverted_nodes(const Visitor *v, const Walk *w, const int32_t *chain,
                                 const uint8_t *on_chain, const uint64_t *diverted_bits,
                                 int32_t *nodes, int32_t *states) {
    const TrieArrays *trie = &v->tries[TRIE_PLAIN];
    Py_ssize_t room = 256, depth = 0, found = 0;
    int32_t *stack = malloc((size_t)room * 2 * sizeof(int32_t)); /* (node, its depth) */
    if (!stack) {
        PyErr_NoMemory();
        return -1;
    }
    stack[depth++] = 0; /* the root, at depth 0 */
    stack[depth++] = 0;
    while (depth) {
        int32_t at = stack[depth - 1], node = stack[depth - 2];
        depth -= 2;
        const NodeRecord *record = trie->records + node;
        const int32_t *row = w->table + (Py_ssize_t)chain[at] * 256;
        int32_t following = at + 1 < v->links ? chain[at + 1] : DEAD;
        for (int32_t k = 0; k < record->child_count; k++) {
            int32_t child = record->child_first + k;
            const NodeRecord *below = trie->records + child;
            uint8_t byte = (uint8_t)below->byte;
            if (!on_chain[byte]) {
                if (row[byte] > DEAD) {
                    nodes[found] = child;
                    states[found++] = row[byte];
                }
                continue;
            }
            const uint64_t *under = trie->below_bytes + (Py_ssize_t)child * 4;
            if (following == DEAD || below->child_count <= 0 ||
                !((under[0] & diverted_bits[0]) | (under[1] & diverted_bits[1]) |
                  (under[2] & diverted_bits[2]) | (under[3] & diverted_bits[3])))
                continue;
            if (depth + 2 > 2 * room) {
                int32_t *grown = realloc(stack, (size_t)room * 4 * sizeof(int32_t));
                if (!grown) {
                    free(stack);
                    PyErr_NoMemory();
                    return -1;
                }
                stack = grown;
                room *= 2;
            }
            stack[depth++] = child;
            stack[depth++] = at + 1;
        }
    }
    free(stack);
    return found;
}

/* The plain tokens holding a byte of `off` (four words of byte flags) into `out`: the
 * union of their by_byte rows, kept for the last DROPPED_KEPT sets asked (a pattern's
 * states ask the same one at each character; the union over ~60 bytes of 1,536 words
 * each cost more than the rest of a visit's template pass). Copied out: a visit of
 * another thread may replace the kept one while template_of runs. 0, or -1 (MemoryError
 * set). */
static int off_chain_tokens(Visitor *v, const uint64_t *off, uint32_t *out) {
    for (int i = 0; i < DROPPED_KEPT; i++) {
        DroppedSet *kept = &v->dropped[i];
        if (kept->tokens && !memcmp(kept->bytes, off, sizeof(kept->bytes))) {
            memcpy(out, kept->tokens, (size_t)v->words * 4);
            return 0;
        }
    }
    memset(out, 0, (size_t)v->words * 4);
    for (int byte = 0; byte < 256; byte++) {
        if (!(off[byte >> 6] >> (byte & 63) & 1)) continue;
        const uint32_t *holding = v->by_byte + (Py_ssize_t)byte * v->words;
        for (Py_ssize_t word = 0; word < v->words; word++) out[word] |= holding[word];
    }
    DroppedSet *slot = &v->dropped[v->dropped_next];
    if (!slot->tokens && !(slot->tokens = malloc((size_t)v->words * 4))) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(slot->bytes, off, sizeof(slot->bytes));
    memcpy(slot->tokens, out, (size_t)v->words * 4);
    v->dropped_next = (v->dropped_next + 1) % DROPPED_KEPT;
    return 0;
}

/* How a state's plain bytes part (chain_bytes, follow_diverted), found once a visit: the
 * way is tried before an object key's with no byte diverted (a string leaving out a few
 * plain bytes, `[^,"]{1,255}`), and after it with up to DIVERTED_MAX. */
typedef struct {
    int known;  /* asked already */
    int status; /* 1: a chain diverted at `count` bytes; 0: not such a state */
    int count;
    uint8_t on_chain[256], diverted[256];
} Split;

/* The row of a state whose plain bytes part three ways (see above), where at most `most`
 * bytes divert: NOT_DIVERTED where they do not, or where the row would lie on its
 * template with more than 255 states. `split` is the visit's (zeroed before its first
 * call). */
static PyObject *diverted_visit(Visitor *v, Walk *w, int32_t state, int32_t *chain,
                                const Scratch *scratch, Split *split, int most) {
    if (v->by_byte_of == Py_None || v->template_of == Py_None || v->links < 2)
        return NOT_DIVERTED;
    if (!split->known) {
        split->known = 1;
        split->status = 0;
        if (chain_bytes(v, w->table + (Py_ssize_t)state * 256, split->on_chain, &chain[1])) {
            int whole = follow_diverted(v, w, chain, split->on_chain, split->diverted,
                                        &split->count);
            if (whole < 0) return NULL;
            if (whole == 2) return retry();
            split->status = whole;
        }
    }
    /* a walked plain token's repeats would need its state too: only the template's are */
    if (!split->status || split->count > most || (split->count && v->repeats[0]))
        return NOT_DIVERTED;
    const uint8_t *on_chain = split->on_chain;
    if (hold_by_byte(v) < 0) return NULL;
    PyObject *shape = chain_shape(v, chain);
    if (shape == NULL || shape == Py_None) {
        Py_XDECREF(shape);
        split->status = 0;
        return shape ? NOT_DIVERTED : NULL;
    }
    /* the codes, then two masks (scratch_table_bytes): the dropped tokens, the listed */
    uint8_t *codes = (uint8_t *)scratch->table;
    uint32_t *dropped = (uint32_t *)(codes + ((v->size + 3) & ~(Py_ssize_t)3));
    Diverted parts = {dropped, dropped + v->words};
    uint64_t diverted_bits[4] = {0, 0, 0, 0}, off[4] = {0, 0, 0, 0};
    for (Py_ssize_t k = 0; k < v->plain_count; k++) {
        uint8_t byte = v->plain_bytes[k];
        if (split->diverted[byte]) diverted_bits[byte >> 6] |= (uint64_t)1 << (byte & 63);
        if (!on_chain[byte]) off[byte >> 6] |= (uint64_t)1 << (byte & 63);
    }
    if (off_chain_tokens(v, off, dropped) < 0) {
        Py_DECREF(shape);
        return NULL;
    }
    PyObject *row = NULL;
    w->filled = 0;
    int walked = walk_root(v, w, TRIE_OTHER, state);
    if (walked == 1 && split->count) {
        Py_ssize_t found = diverted_nodes(v, w, chain, on_chain, diverted_bits,
                                          scratch->pending_nodes, scratch->pending_states);
        walked = found < 0 ? -1
                           : walk_from(v, w, TRIE_PLAIN, scratch->pending_nodes,
                                       scratch->pending_states, found);
    }
    if (walked <= 0)
        row = walked < 0 ? NULL : retry();
    else
        row = on_template(v, w, chain, shape, codes, NULL, NULL, NULL, &parts);
    Py_DECREF(shape);
    if (row != Py_None) return row;
    Py_DECREF(row);
    split->status = 0; /* more than 255 states: the whole trie is walked instead */
    w->filled = 0;
    return NOT_DIVERTED;
}

#define NOT_A_KEY ((PyObject *)1) /* first_byte_visit: the way does not apply */

/* Walk the plain tokens under each declared name's initial (lists[256 + i], its state
 * lists[512 + i]; `walked` of them). Most of them leave every name for the first looping
 * state (lists[0]): those are counted, not written out, and where every token under the
 * initial is live (written out, or counted), the initial reads that state off by_first
 * (code 1) and only the tokens apart from it are the row's pairs (a few dozen of a few
 * thousand). Where some die there (a grammar's identifiers, say), the counted ones (kept
 * in `spare`, room for the vocabulary) are written out too, and the initial stays
 * unread. 1 done, 0 no room, -1 error. */
static int walk_initials(const Visitor *v, Walk *w, const int32_t *lists, Py_ssize_t walked,
                         uint8_t *by_first, int32_t *spare) {
    const TrieArrays *plain = &v->tries[TRIE_PLAIN];
    int status = 1;
    w->counted_ids = spare;
    w->read_entries = w->step != NULL; /* a name's prefixes: see Walk.read_entries */
    for (Py_ssize_t i = 0; i < walked && status == 1; i++) {
        uint8_t initial = (uint8_t)lists[256 + i];
        int32_t node = v->plain_root[initial], start = lists[512 + i];
        if (node < 0) continue;
        const NodeRecord *record = plain->records + node;
        Py_ssize_t before = w->filled, under = record->subtree_stop - record->subtree_first;
        w->counted_state = w->plain_loop_state = lists[0];
        w->counted = 0;
        status = walk_from(v, w, TRIE_PLAIN, &node, &start, 1);
        if (status != 1) break;
        if ((w->filled - before) + w->counted == under) {
            by_first[initial] = 1;
            continue;
        }
        if (w->filled + w->counted > w->out_size) { /* as the walk says of a full buffer */
            status = -1;
            set_walk_error(WALK_FULL);
            break;
        }
        for (Py_ssize_t k = 0; k < w->counted; k++) {
            w->out_ids[w->filled] = spare[k];
            w->out_states[w->filled++] = lists[0];
        }
    }
    w->counted_state = w->plain_loop_state = DEAD;
    w->counted_ids = NULL;
    w->read_entries = 0;
    return status;
}

/* The unread bytes (`count` of them, in place) less those by_first now reads (see
 * walk_initials); their new count. */
static Py_ssize_t still_unread(int32_t *unread, Py_ssize_t count, const uint8_t *by_first) {
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < count; i++)
        if (!by_first[unread[i] & 255]) unread[kept++] = unread[i];
    return kept;
}

/* The text tokens below an object key's `state` that text_leads to `free` (the first
 * looping state, which `others` names), as its walk would find them: those opening with a
 * non-ASCII byte end in `free` (bits in `out`) or, cut short, inside a character (pairs:
 * by `state`'s steps where the token is that cut character alone, else by `free`'s);
 * those opening with a plain byte that leads to `free` alike, read under it in the text
 * trie; those under another live first byte (a declared name's initial) walked from
 * there. 1 done, 0 no room, -1 error. */
static int take_key_text(const Visitor *v, Walk *w, int32_t state, int32_t free,
                         const int32_t *steps_key, const int32_t *steps_free, uint32_t *out) {
    for (Py_ssize_t k = 0; k < v->words; k++) out[k] |= v->text_whole_lead_bits[k];
    take_cut_tokens(v, w, steps_key, steps_free, 0);
    const int32_t *row = w->table + (Py_ssize_t)state * 256;
    const TrieArrays *trie = &v->tries[TRIE_TEXT];
    for (int byte = 0; byte < 0x80; byte++) {
        int32_t node = v->text_root[byte], after = row[byte];
        if (node < 0 || after == DEAD) continue;
        if (after != free) {
            w->counted_state = free;
            w->counted_bits = out;
            int status = walk_from(v, w, TRIE_TEXT, &node, &after, 1);
            w->counted_state = DEAD;
            w->counted_bits = NULL;
            if (status != 1) return status;
            continue;
        }
        const NodeRecord *record = trie->records + node;
        for (Py_ssize_t i = record->subtree_first; i < record->subtree_stop; i++) {
            int32_t id = trie->token_ids[i];
            int depth = v->text_depths[i];
            if (depth)
                add_pair(w, id, inside_character(steps_free, depth, v->text_leads[i]));
            else
                out[id >> 5] |= (uint32_t)1 << (id & 31);
        }
    }
    return 1;
}

/* index._first_byte_row, and index._looked_up's bits where no token repeats another. */
static PyObject *first_byte_visit(const Visitor *v, Walk *w, int32_t state, int32_t *spare) {
    const int32_t *row = w->table + (Py_ssize_t)state * 256;
    /* an undeclared key starts with any byte no declared name starts with: '~' or '`' */
    int32_t probe = row['~'] ? row['~'] : row['`'];
    if (probe <= DEAD) return NOT_A_KEY;
    int built = build_row(w, probe);
    if (built <= 0) return built < 0 ? NULL : retry();
    int32_t stays;
    if (!one_plain_target(v, w->table + (Py_ssize_t)probe * 256, &stays) || stays != probe)
        return NOT_A_KEY;
    Py_ssize_t following = 0;
    for (Py_ssize_t k = 0; k < v->plain_count; k++) following += row[v->plain_bytes[k]] != DEAD;
    if (following < v->first_byte_min) return NOT_A_KEY;
    for (Py_ssize_t k = 0; k < v->plain_count; k++) {
        int32_t target = row[v->plain_bytes[k]];
        if (target == DEAD) continue;
        built = build_row(w, target);
        if (built <= 0) return built < 0 ? NULL : retry();
    }
    uint8_t by_first[256];
    int32_t lists[4 * 256];
    Py_ssize_t counts[3];
    if (split_first_bytes(w->table, w->states, state, v->plain_bytes, v->plain_count, by_first,
                          lists, counts) < 0)
        return NULL;
    Py_ssize_t looped = counts[0], walked = counts[1], unread = counts[2];
    if (!looped) return NOT_A_KEY;
    /* Without repeats, the row's bits are made here, and the other tokens that end where
     * the first looping state loops (a free key's UTF-8 characters) are set in them, not
     * listed: index._FirstByteLookup reads an allowed token that is neither plain nor
     * listed as that state (`others`). With repeats, index._looked_up finishes the row. */
    PyObject *bits = NULL;
    uint32_t *out = NULL;
    int32_t others = DEAD;
    if (!v->repeats[0]) {
        bits = PyBytes_FromStringAndSize(NULL, v->words * 4);
        if (!bits) return NULL;
        out = (uint32_t *)PyBytes_AS_STRING(bits);
        memcpy(out, v->plain_bits, (size_t)v->words * 4);
        others = lists[0];
    }
    int32_t steps_key[3 * UTF8_LEADS], steps_free[3 * UTF8_LEADS];
    int text = out ? text_leads(v, w, state, others, steps_key, steps_free) : 0;
    if (text < 0) {
        Py_DECREF(bits);
        return NULL;
    }
    w->counted_state = others;
    w->counted_bits = out;
    int done = walk_root(v, w, text ? TRIE_SPECIAL : TRIE_OTHER, state);
    w->counted_state = DEAD;
    w->counted_bits = NULL;
    if (done > 0 && text) done = take_key_text(v, w, state, others, steps_key, steps_free, out);
    if (done > 0 && walked) {
        /* below a declared name's initial, a token that leaves every name stands in a
         * state looping on every plain byte: with its loop mask known from the start, its
         * subtree ends there unwalked, however small */
        for (Py_ssize_t k = 0; k < looped; k++) loop_mask(w, lists[k], 1);
        done = walk_initials(v, w, lists, walked, by_first, spare);
        if (done > 0) unread = still_unread(lists + 768, unread, by_first);
    }
    if (done <= 0) {
        Py_XDECREF(bits);
        return done < 0 ? NULL : retry();
    }
    if (out) {
        for (Py_ssize_t i = 0; i < unread; i++) {
            const uint32_t *dropped = v->bits_by_first + (Py_ssize_t)lists[768 + i] * v->words;
            for (Py_ssize_t k = 0; k < v->words; k++) out[k] &= ~dropped[k];
        }
        for (Py_ssize_t i = 0; i < w->filled; i++)
            out[w->out_ids[i] >> 5] |= (uint32_t)1 << (w->out_ids[i] & 31);
    } else {
        bits = Py_NewRef(Py_None);
    }
    PyObject *items[8] = {PyLong_FromLong(VISIT_FIRST_BYTE),
                          bytes_of(w->out_ids, w->filled * 4),
                          bytes_of(w->out_states, w->filled * 4),
                          bits,
                          bytes_of(by_first, 256),
                          NULL,
                          bytes_of(lists + 768, unread * 4),
                          PyLong_FromLong(others)};
    /* the palette of by_first's codes: DEAD, then the looping states */
    int32_t palette[257];
    palette[0] = DEAD;
    memcpy(palette + 1, lists, (size_t)looped * 4);
    items[5] = bytes_of(palette, (looped + 1) * 4);
    return tuple_of(items, 8);
}

/* The answer of a way (its row, a retry, or NULL), counted in v->taken[way] when a row. */
static PyObject *taken(Visitor *v, int way, PyObject *answer) {
    if (answer && PyLong_AsLong(PyTuple_GET_ITEM(answer, 0)) != VISIT_RETRY) v->taken[way]++;
    return answer;
}

static PyObject *visit_state(Visitor *v, Walk *w, int32_t state, const Scratch *scratch) {
    int32_t *chain = scratch->chain;
    Split split;
    split.known = 0;
    int built = build_row(w, state);
    if (built <= 0) return built < 0 ? NULL : retry();
    chain[0] = state;
    if (one_plain_target(v, w->table + (Py_ssize_t)state * 256, &chain[1])) {
        int whole = follow_chain(v, w, chain);
        if (whole < 0) return NULL;
        if (whole == 2) return retry();
        if (whole == 1) return taken(v, WAY_CHAIN, chain_visit(v, w, state, chain, scratch->table));
    } else {
        PyObject *excluding = diverted_visit(v, w, state, chain, scratch, &split, 0);
        if (excluding != NOT_DIVERTED) return taken(v, WAY_EXCLUDED, excluding);
    }
    PyObject *key = first_byte_visit(v, w, state, scratch->table);
    if (key != NOT_A_KEY) return taken(v, WAY_KEY, key);
    PyObject *diverting = diverted_visit(v, w, state, chain, scratch, &split, DIVERTED_MAX);
    if (diverting != NOT_DIVERTED) return taken(v, WAY_DIVERTED, diverting);
    int walked = walk_root(v, w, TRIE_ALL, state);
    if (walked <= 0) return walked < 0 ? NULL : retry();
    return taken(v, WAY_WHOLE, finish_pairs(v, w, TRIE_ALL, scratch->table));
}

/* -- the type ------------------------------------------------------------------------ */

PyDoc_STRVAR(visit_doc,
"visit(table, state, builder) -> tuple\n"
"\n"
"The first visit of `state` (see the module's source for the ways it takes): table is\n"
"the automaton's int32 table (writable), builder its (nfa, accepting, sets), as for\n"
"walk(). Returns one of\n"
"  (0,): the table lacks room; grow it and call again;\n"
"  (1, ids, states, bits): a row sorted by token, with its packed bits;\n"
"  (3, ids, states, bits, by_first, palette, unread, others): an object key's row\n"
"      (index._first_byte_row): palette is DEAD, then the looping states that by_first's\n"
"      codes 1, 2, ... stand for; a plain token not among ids takes its first byte's\n"
"      (a declared name's initial reads code 1 where every token under it lives), and\n"
"      an allowed token that is not plain, not among ids, the state `others`; unread the\n"
"      bytes by_first leaves at 0; bits None (and others DEAD) where the vocabulary\n"
"      repeats tokens;\n"
"  (4, chain, ids, states): a row inside a string that its template cannot make (no\n"
"      template_of, or past 255 states): the chain of plain bytes' states and the other\n"
"      tokens' pairs;\n"
"  (5, codes, palette, bits): a large row, one code a token (uint8) standing for\n"
"      palette[code] (code 0: DEAD);\n"
"  (6, table, bits): a large row of more than 255 states, its state a token;\n"
"  (7, codes, palette, ids, states, bits): a large row inside a string: the template's\n"
"      codes (shared: one code a token, palette[code] its state) but at the sorted ids,\n"
"      whose states are given; bits decide which tokens are allowed (an allowed token of\n"
"      code 0 that ids do not name, a character that is not plain: palette[0]).\n"
"The arrays come as bytes (int32 ids and states, uint32 bits, uint8 by_first).");

static PyObject *Visitor_visit(Visitor *self, PyObject *args) {
    PyObject *table, *builder;
    Py_ssize_t state;
    if (!PyArg_ParseTuple(args, "OnO:visit", &table, &state, &builder)) return NULL;
    Held held[2];
    memset(held, 0, sizeof(held));
    Walk w;
    memset(&w, 0, sizeof(w));
    PyObject *result = NULL;
    Scratch scratch = self->scratch;
    int own = self->busy; /* a visit inside a visit (another thread's): buffers of its own */
    if (own && scratch_alloc(&scratch, self->out_size, self->pending_size, self->links,
                             self->size) < 0)
        return NULL;
    self->busy = 1;
    if (take(table, &held[0], 1, 4, 256, "the table") < 0) goto done;
    w.table = held[0].view.buf;
    w.states = held[0].view.len / 4 / 256;
    w.whole_rows = 1; /* a LazyAutomaton's, under its lock (see visit_building) */
    LoopMask loops[LOOP_SLOTS]; /* kept over the visit's walks */
    memset(loops, 0, sizeof(loops));
    w.loops = loops;
    if (start_building(&w, builder, &held[1]) < 0) goto done;
    if (state <= DEAD || state >= w.states) {
        PyErr_Format(PyExc_ValueError, "expected a live state below %zd, found %zd", w.states,
                     state);
        goto done;
    }
    w.out_ids = scratch.out_ids;
    w.out_states = scratch.out_states;
    w.out_size = self->out_size;
    w.pending_nodes = scratch.pending_nodes;
    w.pending_states = scratch.pending_states;
    w.pending_size = self->pending_size;
    result = visit_state(self, &w, (int32_t)state, &scratch);
done:
    release(held, 2);
    if (own)
        scratch_free(&scratch);
    else
        self->busy = 0;
    return result;
}

/* Forget the kept sets of off_chain_tokens. */
static void drop_kept_sets(Visitor *self) {
    for (int i = 0; i < DROPPED_KEPT; i++) {
        free(self->dropped[i].tokens);
        self->dropped[i].tokens = NULL;
    }
    self->dropped_next = 0;
}

static void Visitor_dealloc(Visitor *self) {
    drop_kept_sets(self);
    release(self->held, VISITOR_BUFFERS);
    release(&self->by_byte_held, 1);
    scratch_free(&self->scratch);
    Py_XDECREF(self->template_of);
    Py_XDECREF(self->by_byte_of);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Whether a cut character's lead byte and depth can be read by utf8_steps' steps. */
static int cut_valid(int lead, int depth) {
    return lead >= 0xC2 && lead <= 0xF4 && depth >= 1 && depth <= 3;
}

/* The text tokens' arrays (text[1:]: vocabulary.TextTokens.arrays(), its tries taken
 * already), held: 0, or -1 with an exception set. */
static int take_text(Visitor *self, PyObject *text) {
    Held *held = &self->held[HELD_TEXT];
    PyObject *const *item = &PyTuple_GET_ITEM(text, 1);
    Py_ssize_t trie_tokens = self->tries[TRIE_TEXT].tokens;
    if (take(item[0], &held[0], 0, 4, self->words, "whole bits") < 0 ||
        take(item[1], &held[1], 0, 4, self->words, "whole lead bits") < 0 ||
        take(item[2], &held[2], 0, 4, 0, "cut ids") < 0)
        return -1;
    Py_ssize_t count = held[2].view.len / 4;
    if (take(item[3], &held[3], 0, 1, count, "cut leads") < 0 ||
        take(item[4], &held[4], 0, 1, count, "cut depths") < 0 ||
        take(item[5], &held[5], 0, 1, count, "cut openings") < 0 ||
        take(item[7], &held[6], 0, 4, 256, "the text trie's root") < 0 ||
        take(item[8], &held[7], 0, 1, trie_tokens, "the text trie's depths") < 0 ||
        take(item[9], &held[8], 0, 1, trie_tokens, "the text trie's leads") < 0 ||
        take(item[10], &held[9], 0, 4, 0, "whole ids") < 0 ||
        take(item[12], &held[11], 0, 1, count, "cut characters") < 0)
        return -1;
    self->text_whole_count = held[9].view.len / 4;
    if (take(item[11], &held[10], 0, 1, self->text_whole_count, "whole characters") < 0)
        return -1;
    self->text_whole_ids = held[9].view.buf;
    self->text_whole_chars = held[10].view.buf;
    self->text_cut_chars = held[11].view.buf;
    self->text_max_chars = 0;
    for (Py_ssize_t k = 0; k < self->text_whole_count; k++) {
        if (self->text_whole_ids[k] < 0 || self->text_whole_ids[k] >= self->size) {
            PyErr_SetString(PyExc_ValueError, "expected whole text tokens below the size");
            return -1;
        }
        if (self->text_whole_chars[k] > self->text_max_chars)
            self->text_max_chars = self->text_whole_chars[k];
    }
    for (Py_ssize_t k = 0; k < count; k++)
        if (self->text_cut_chars[k] + 1 > self->text_max_chars)
            self->text_max_chars = self->text_cut_chars[k] + 1;
    self->text_whole_bits = held[0].view.buf;
    self->text_whole_lead_bits = held[1].view.buf;
    self->text_cut_ids = held[2].view.buf;
    self->text_cut_leads = held[3].view.buf;
    self->text_cut_depths = held[4].view.buf;
    self->text_cut_openings = held[5].view.buf;
    self->text_root = held[6].view.buf;
    self->text_depths = held[7].view.buf;
    self->text_leads = held[8].view.buf;
    self->text_cut_count = count;
    for (Py_ssize_t k = 0; k < count; k++)
        if (self->text_cut_ids[k] < 0 || self->text_cut_ids[k] >= self->size ||
            !cut_valid(self->text_cut_leads[k], self->text_cut_depths[k]) ||
            self->text_cut_openings[k] > 2) {
            PyErr_SetString(PyExc_ValueError,
                            "expected cut text tokens below the size, of a lead byte 0xC2 .. "
                            "0xF4, 1 to 3 of its bytes and an opening 0 to 2");
            return -1;
        }
    for (Py_ssize_t k = 0; k < trie_tokens; k++)
        if (self->text_depths[k] && !cut_valid(self->text_leads[k], self->text_depths[k])) {
            PyErr_SetString(PyExc_ValueError, "expected the text trie's cuts as the others");
            return -1;
        }
    for (int b = 0; b < 256; b++)
        if (self->text_root[b] >= self->tries[TRIE_TEXT].nodes) {
            PyErr_SetString(PyExc_ValueError, "expected the text trie's root of its nodes");
            return -1;
        }
    return 0;
}

/* Visitor(all, other, plain, plain_root, plain_bytes, plain_bits, bits_by_first,
 *         repeats, size, links, first_byte_min, sorted_share, template_of, by_byte_of,
 *         text) */
static int Visitor_init(Visitor *self, PyObject *args, PyObject *kwargs) {
    (void)kwargs;
    PyObject *tries[TRIES], *root, *plain, *bits, *by_first, *repeats, *template_of;
    PyObject *by_byte_of = Py_None, *text = Py_None;
    if (!PyArg_ParseTuple(args, "O!O!O!OOOOO!nnnnO|OO:Visitor", &PyTuple_Type, &tries[0],
                          &PyTuple_Type, &tries[1], &PyTuple_Type, &tries[2], &root, &plain,
                          &bits, &by_first, &PyTuple_Type, &repeats, &self->size,
                          &self->links, &self->first_byte_min, &self->sorted_share,
                          &template_of, &by_byte_of, &text))
        return -1;
    if (text != Py_None &&
        (!PyTuple_Check(text) || PyTuple_GET_SIZE(text) != 14 ||
         !PyTuple_Check(PyTuple_GET_ITEM(text, 0)) || !PyTuple_Check(PyTuple_GET_ITEM(text, 7)))) {
        PyErr_SetString(PyExc_TypeError, "expected text as (special trie, *TextTokens.arrays())");
        return -1;
    }
    self->has_text = text != Py_None;
    tries[TRIE_SPECIAL] = self->has_text ? PyTuple_GET_ITEM(text, 0) : tries[TRIE_OTHER];
    tries[TRIE_TEXT] = self->has_text ? PyTuple_GET_ITEM(text, 7) : tries[TRIE_OTHER];
    if ((template_of != Py_None && !PyCallable_Check(template_of)) ||
        (by_byte_of != Py_None && !PyCallable_Check(by_byte_of))) {
        PyErr_SetString(PyExc_TypeError, "expected template_of and by_byte_of callable, or None");
        return -1;
    }
    if (self->scratch.out_ids) {
        PyErr_SetString(PyExc_TypeError, "expected a Visitor to be initialised once");
        return -1;
    }
    for (int t = 0; t < TRIES; t++) {
        if (PyTuple_GET_SIZE(tries[t]) != TRIE_ARRAYS) {
            PyErr_Format(PyExc_ValueError, "expected a trie as %d arrays", TRIE_ARRAYS);
            return -1;
        }
        if (take_trie(&PyTuple_GET_ITEM(tries[t], 0), self->held + t * TRIE_ARRAYS,
                      &self->tries[t]) < 0)
            return -1;
    }
    if (PyTuple_GET_SIZE(repeats) != 4) {
        PyErr_SetString(PyExc_ValueError, "expected repeats as four arrays");
        return -1;
    }
    for (int which = 0; which < 2; which++) {
        Held *held = &self->held[HELD_REPEATS + 2 * which];
        if (take(PyTuple_GET_ITEM(repeats, 2 * which), held, 0, 4, 0, "repeats") < 0) return -1;
        self->repeats[which] = held->view.len / 4;
        if (take(PyTuple_GET_ITEM(repeats, 2 * which + 1), held + 1, 0, 4, self->repeats[which],
                 "repeated") < 0)
            return -1;
        self->repeat[which] = held->view.buf;
        self->original[which] = held[1].view.buf;
    }
    self->words = (self->size + 31) / 32;
    if (self->size < 1 || self->links < 1 || self->sorted_share < 1) {
        PyErr_SetString(PyExc_ValueError, "expected a positive size, links and sorted_share");
        return -1;
    }
    if (take(root, &self->held[HELD_ROOT], 0, 4, 256, "plain_root") < 0) return -1;
    self->plain_root = self->held[HELD_ROOT].view.buf;
    if (take(plain, &self->held[HELD_PLAIN], 0, 1, 1, "plain_bytes") < 0) return -1;
    self->plain_bytes = self->held[HELD_PLAIN].view.buf;
    self->plain_count = self->held[HELD_PLAIN].view.len;
    if (self->plain_count > 256) {
        PyErr_SetString(PyExc_ValueError, "expected at most 256 plain bytes");
        return -1;
    }
    for (Py_ssize_t k = 0; k < self->plain_count; k++)
        self->plain_mask[self->plain_bytes[k] >> 6] |= (uint64_t)1 << (self->plain_bytes[k] & 63);
    if (take(bits, &self->held[HELD_BITS], 0, 4, self->words, "plain_bits") < 0) return -1;
    self->plain_bits = self->held[HELD_BITS].view.buf;
    if (take(by_first, &self->held[HELD_BY_FIRST], 0, 4, 256 * self->words, "bits_by_first") <
        0)
        return -1;
    self->bits_by_first = self->held[HELD_BY_FIRST].view.buf;
    for (int which = 0; which < 2; which++)
        for (Py_ssize_t k = 0; k < self->repeats[which]; k++)
            if (self->repeat[which][k] < 0 || self->repeat[which][k] >= self->size ||
                self->original[which][k] < 0 || self->original[which][k] >= self->size) {
                PyErr_SetString(PyExc_ValueError, "expected token ids below the size");
                return -1;
            }
    if (self->has_text && take_text(self, text) < 0) return -1;
    self->template_of = Py_NewRef(template_of);
    self->by_byte_of = Py_NewRef(by_byte_of);
    for (int t = 0; t < TRIES; t++) {
        const TrieArrays *trie = &self->tries[t];
        for (Py_ssize_t i = 0; i < trie->tokens; i++)
            if (trie->token_ids[i] < 0 || trie->token_ids[i] >= self->size) {
                PyErr_SetString(PyExc_ValueError, "expected token ids below the size");
                return -1;
            }
        if (trie->tokens > self->out_size) self->out_size = trie->tokens;
        if (trie->nodes > self->pending_size) self->pending_size = trie->nodes;
    }
    /* room for a row on its template's pairs too: one a token that is not plain, repeats
     * among them (templated_row) */
    if (self->size > self->out_size) self->out_size = self->size;
    for (int b = 0; b < 256; b++)
        if (self->plain_root[b] >= self->tries[TRIE_PLAIN].nodes) {
            PyErr_SetString(PyExc_ValueError, "expected plain_root nodes of the plain trie");
            return -1;
        }
    return scratch_alloc(&self->scratch, self->out_size, self->pending_size, self->links,
                         self->size);
}

static PyObject *Visitor_ways(Visitor *self, void *unused) {
    (void)unused;
    return Py_BuildValue("{snsnsnsnsn}", "chain", self->taken[WAY_CHAIN], "excluded",
                         self->taken[WAY_EXCLUDED], "key", self->taken[WAY_KEY], "diverted",
                         self->taken[WAY_DIVERTED], "whole", self->taken[WAY_WHOLE]);
}

static PyGetSetDef visitor_getset[] = {
    {"ways", (getter)Visitor_ways, NULL,
     "The rows each way of visit() made so far, by name: a string's chain, a string leaving "
     "out a few plain bytes, an object key, a chain diverted at a few bytes, the whole trie.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef visitor_methods[] = {
    {"visit", (PyCFunction)Visitor_visit, METH_VARARGS, visit_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(visitor_doc,
"Visitor(all, other, plain, plain_root, plain_bytes, plain_bits, bits_by_first, repeats,\n"
"        size, links, first_byte_min, sorted_share, template_of[, by_byte_of, text])\n"
"\n"
"One vocabulary's arrays, held for a state's first visit in one call (visit()): the\n"
"flattened tries of every token, the other tokens and the plain ones (walk_arrays),\n"
"the plain trie's node of each first byte, the plain bytes, the plain tokens' bits and\n"
"their bits by first byte, the repeated tokens of the whole trie and the tokens they\n"
"repeat, then the other trie's (four int32 arrays), the vocabulary's size, the links of\n"
"a chain of plain bytes (the longest plain token + 1), the fewest live plain bytes of an\n"
"object key's row, the share of the vocabulary past which a row is coded rather than\n"
"sorted, and template_of (shape -> (codes, bits, kept), the plain tokens' template of\n"
"a chain's shape; None: a string's row comes back unfinished); by_byte_of (() -> the\n"
"plain tokens holding each byte); text (the special trie's arrays, then the text\n"
"tokens' whole bits, cut ids, lead bytes and depths: vocabulary.TextTokens; None: text\n"
"tokens are walked like the others). Holds buffers of its own, ~12 bytes a token and 8\n"
"a trie node.");

static PyTypeObject VisitorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "formcast._trie_walk.Visitor",
    .tp_basicsize = sizeof(Visitor),
    .tp_dealloc = (destructor)Visitor_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = visitor_doc,
    .tp_methods = visitor_methods,
    .tp_getset = visitor_getset,
    .tp_init = (initproc)Visitor_init,
    .tp_new = PyType_GenericNew,
};

int add_visitor_type(PyObject *module) {
    if (PyType_Ready(&VisitorType) < 0) return -1;
    Py_INCREF(&VisitorType);
    if (PyModule_AddObject(module, "Visitor", (PyObject *)&VisitorType) < 0) {
        Py_DECREF(&VisitorType);
        return -1;
    }
    return 0;
}
