/* A Flight Recorder dump's pickle read into the columns of its entries, for the usual dump.

   The pickle is parsed into an arena of nodes (one per value: scalars, texts as spans of the
   file, containers as runs of node ids), memo references sharing nodes as the unpickler shares
   objects; nothing of it runs, and every opcode that is not plain data is refused. The entries
   are then checked as columns.py checks them (the same types, ranges and budget of values walked)
   and written as columns: numbers, texts as ids of a table of distinct texts, each tensor side
   (shapes and dtype names) as an id of a table of distinct sides.

   Anything else (another opcode, a text that is not printable ASCII where one is read, a value
   out of range, more than the budget) makes a call return FR_UNUSUAL: the caller reads that dump
   the way it did before, which says what is wrong. The work and memory are linear in the file:
   nodes, memo indices and runs are bounded by its bytes, lists are counted against the budget
   before they are walked, and an entry or frame map holding more than a few dozen keys is
   unusual. libc only. */

#include "frscan.h"

/* ------------------------------------------------------------------------------------------ */
/* parsing                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static int new_node(fr_t *p, uint8_t kind, int64_t a, int64_t b, int32_t *id) {
    if (p->nn >= p->max_nodes) return FR_UNUSUAL;
    GROW(p->nodes, p->nn, p->cn, 1, node_t);
    node_t *n = &p->nodes[p->nn];
    n->kind = kind, n->a = a, n->b = b, n->first = n->last = -1, n->plain = 0;
    *id = (int32_t)p->nn++;
    return FR_OK;
}

static int push(fr_t *p, int32_t id) {
    GROW(p->stack, p->ns, p->cs, 1, int32_t);
    p->stack[p->ns++] = id;
    return FR_OK;
}

static int64_t fence(const fr_t *p) { return p->nm ? p->marks[p->nm - 1] : 0; }

/* items stack[from:to] appended to container `c` as one run */
static int add_run(fr_t *p, int32_t c, int64_t from, int64_t to) {
    int64_t k = to - from;
    if (k == 0) return FR_OK;
    if (k > INT32_MAX) return FR_UNUSUAL;
    GROW(p->items, p->ni, p->ci, k, int32_t);
    GROW(p->runs, p->nr, p->cr, 1, run_t);
    memcpy(p->items + p->ni, p->stack + from, (size_t)k * sizeof(int32_t));
    run_t *r = &p->runs[p->nr];
    r->start = p->ni, r->count = (int32_t)k, r->next = -1;
    p->ni += k;
    node_t *n = &p->nodes[c];
    if (n->last >= 0) p->runs[n->last].next = (int32_t)p->nr;
    else n->first = (int32_t)p->nr;
    n->last = (int32_t)p->nr++;
    n->b += k;
    return FR_OK;
}

static int string(fr_t *p, int64_t at, int64_t len) {
    if (len < 0 || at + len > p->size) return FR_UNUSUAL;
    const uint8_t *s = p->d + at;
    uint8_t plain = 1;
    for (int64_t i = 0; i < len; i++) {
        if (s[i] >= 0x80) return FR_UNUSUAL; /* (UTF-8 beyond ASCII: the unpickler's to decode) */
        if (s[i] < 0x20 || s[i] == 0x7f) plain = 0;
    }
    int32_t id;
    int rc = new_node(p, K_STR, at, len, &id);
    if (rc) return rc;
    p->nodes[id].plain = plain;
    return push(p, id);
}

/* A pickler numbers its memo from 0, one entry per value at most: an index beyond the values made
   so far is no pickler's (and would size the memo by a number rather than by the file). */
static int memo_put(fr_t *p, int64_t idx) {
    if (p->ns <= fence(p) || idx < 0 || idx > p->nn + 1024) return FR_UNUSUAL;
    if (idx >= p->cmemo) {
        int64_t c = p->cmemo ? p->cmemo : 256;
        while (c <= idx) c *= 2;
        int32_t *m = realloc(p->memo, (size_t)c * sizeof(int32_t));
        if (!m) return FR_MEMORY;
        for (int64_t i = p->cmemo; i < c; i++) m[i] = -1;
        p->memo = m, p->cmemo = c;
    }
    p->memo[idx] = p->stack[p->ns - 1];
    return FR_OK;
}

static int memo_get(fr_t *p, int64_t idx) {
    if (idx < 0 || idx >= p->cmemo || p->memo[idx] < 0) return FR_UNUSUAL;
    return push(p, p->memo[idx]);
}

static uint64_t le(const uint8_t *s, int k) {
    uint64_t v = 0;
    for (int i = k - 1; i >= 0; i--) v = (v << 8) | s[i];
    return v;
}

static int scalar(fr_t *p, uint8_t kind, int64_t a) {
    int32_t id;
    TRY(new_node(p, kind, a, 0, &id));
    return push(p, id);
}

static int tuple_of(fr_t *p, int64_t from) {
    int32_t id;
    TRY(new_node(p, K_TUPLE, 0, 0, &id));
    TRY(add_run(p, id, from, p->ns));
    p->ns = from;
    return push(p, id);
}

static int pop_mark(fr_t *p, int64_t *m) {
    if (!p->nm) return FR_UNUSUAL;
    *m = p->marks[--p->nm];
    return FR_OK;
}

/* APPEND(S), SETITEM(S): stack[from:] into the container below them */
static int fill(fr_t *p, int64_t from, uint8_t kind) {
    if (from < 1 || from - 1 < fence(p)) return FR_UNUSUAL;
    int32_t c = p->stack[from - 1];
    if (p->nodes[c].kind != kind) return FR_UNUSUAL;
    if (kind == K_DICT) {
        if ((p->ns - from) % 2) return FR_UNUSUAL;
        for (int64_t k = from; k < p->ns; k += 2)
            if (p->nodes[p->stack[k]].kind != K_STR) return FR_UNUSUAL; /* keys: texts only */
    }
    TRY(add_run(p, c, from, p->ns));
    p->ns = from;
    return FR_OK;
}

static int parse(fr_t *p) {
    const uint8_t *d = p->d;
    int64_t n = p->size, i = 2;
    if (n < 2 || d[0] != 0x80 || d[1] < 2 || d[1] > 5) return FR_UNUSUAL;
    while (i < n) {
        uint8_t op = d[i++];
        int64_t m, k;
        switch (op) {
        case '.':                          /* STOP */
            if (p->ns != 1 || p->nm) return FR_UNUSUAL;
            p->root = p->stack[0];
            return FR_OK;
        case '(':
            GROW(p->marks, p->nm, p->cm, 1, int64_t);
            p->marks[p->nm++] = p->ns;
            break;
        case '}': TRY(scalar(p, K_DICT, 0)); break;
        case ']': TRY(scalar(p, K_LIST, 0)); break;
        case ')': TRY(tuple_of(p, p->ns)); break;
        case 't': TRY(pop_mark(p, &m)); TRY(tuple_of(p, m)); break;
        case 0x85: case 0x86: case 0x87:
            k = op - 0x84;
            if (p->ns - fence(p) < k) return FR_UNUSUAL;
            TRY(tuple_of(p, p->ns - k));
            break;
        case 'a':
            if (p->ns - fence(p) < 2) return FR_UNUSUAL;
            TRY(fill(p, p->ns - 1, K_LIST));
            break;
        case 'e': TRY(pop_mark(p, &m)); TRY(fill(p, m, K_LIST)); break;
        case 's':
            if (p->ns - fence(p) < 3) return FR_UNUSUAL;
            TRY(fill(p, p->ns - 2, K_DICT));
            break;
        case 'u': TRY(pop_mark(p, &m)); TRY(fill(p, m, K_DICT)); break;
        case 'X': NEED(4); k = (int64_t)le(d + i, 4); i += 4; TRY(string(p, i, k)); i += k; break;
        case 0x8c: NEED(1); k = d[i++]; TRY(string(p, i, k)); i += k; break;
        case 0x8d:
            NEED(8);
            if (le(d + i, 8) > (uint64_t)n) return FR_UNUSUAL;
            k = (int64_t)le(d + i, 8); i += 8; TRY(string(p, i, k)); i += k;
            break;
        case 'J': NEED(4); TRY(scalar(p, K_INT, (int32_t)(uint32_t)le(d + i, 4))); i += 4; break;
        case 'K': NEED(1); TRY(scalar(p, K_INT, d[i])); i += 1; break;
        case 'M': NEED(2); TRY(scalar(p, K_INT, (int64_t)le(d + i, 2))); i += 2; break;
        case 0x8a: /* LONG1: little-endian two's complement, at most 8 bytes here */
            NEED(1); k = d[i++];
            if (k > 8) return FR_UNUSUAL;
            NEED(k);
            {
                uint64_t v = le(d + i, (int)k);
                if (k && k < 8 && (d[i + k - 1] & 0x80)) v |= ~(uint64_t)0 << (8 * k);
                TRY(scalar(p, K_INT, (int64_t)v));
            }
            i += k;
            break;
        case 'N': TRY(scalar(p, K_NONE, 0)); break;
        case 0x88: TRY(scalar(p, K_TRUE, 0)); break;
        case 0x89: TRY(scalar(p, K_FALSE, 0)); break;
        case 'G': {
            NEED(8);
            uint64_t v = 0;
            for (int j = 0; j < 8; j++) v = (v << 8) | d[i + j];
            i += 8;
            TRY(scalar(p, K_FLOAT, (int64_t)v));
            break;
        }
        case 'q': NEED(1); TRY(memo_put(p, d[i])); i += 1; break;
        case 'r': NEED(4); TRY(memo_put(p, (int64_t)le(d + i, 4))); i += 4; break;
        case 'h': NEED(1); TRY(memo_get(p, d[i])); i += 1; break;
        case 'j': NEED(4); TRY(memo_get(p, (int64_t)le(d + i, 4))); i += 4; break;
        default: return FR_UNUSUAL;
        }
    }
    return FR_UNUSUAL; /* no STOP */
}

/* ------------------------------------------------------------------------------------------ */
/* tables of distinct byte strings                                                             */
/* ------------------------------------------------------------------------------------------ */

static uint64_t hash_bytes(const uint8_t *s, int64_t len) {
    uint64_t h = 1469598103934665603ULL;
    for (int64_t i = 0; i < len; i++) h = (h ^ s[i]) * 1099511628211ULL;
    return h;
}

int fr_intern(table_t *t, const uint8_t *s, int64_t len, int32_t *id) {
    if (t->n * 2 >= t->nslots) {
        int64_t ns = t->nslots ? t->nslots * 2 : 1024;
        int32_t *slots = calloc((size_t)ns, sizeof(int32_t));
        if (!slots) return FR_MEMORY;
        for (int64_t j = 0; j < t->n; j++) {
            uint64_t h = hash_bytes(t->pool + t->spans[2 * j], t->spans[2 * j + 1]) & (uint64_t)(ns - 1);
            while (slots[h]) h = (h + 1) & (uint64_t)(ns - 1);
            slots[h] = (int32_t)j + 1;
        }
        free(t->slots);
        t->slots = slots, t->nslots = ns;
    }
    uint64_t h = hash_bytes(s, len) & (uint64_t)(t->nslots - 1);
    while (t->slots[h]) {
        int64_t j = t->slots[h] - 1;
        if (t->spans[2 * j + 1] == len && !memcmp(t->pool + t->spans[2 * j], s, (size_t)len)) {
            *id = (int32_t)j;
            return FR_OK;
        }
        h = (h + 1) & (uint64_t)(t->nslots - 1);
    }
    GROW(t->pool, t->npool, t->cpool, len, uint8_t);
    GROW(t->spans, 2 * t->n, t->cap, 2, int64_t);
    if (len) memcpy(t->pool + t->npool, s, (size_t)len);
    t->spans[2 * t->n] = t->npool, t->spans[2 * t->n + 1] = len;
    t->npool += len;
    t->slots[h] = (int32_t)t->n + 1;
    *id = (int32_t)t->n++;
    return FR_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* the library's calls                                                                         */
/* ------------------------------------------------------------------------------------------ */

static void destroy(fr_t *p) {
    free(p->nodes), free(p->items), free(p->runs), free(p->stack), free(p->marks), free(p->memo);
    free(p->text_of), free(p->seen), free(p->field_of), free(p->enc);
    table_t *t[2] = {&p->texts, &p->sides};
    for (int j = 0; j < 2; j++) free(t[j]->pool), free(t[j]->spans), free(t[j]->slots);
    free(p);
}

/* One parse's memory kept for the next (a process reads dumps one after another): no page of it
   is mapped and cleared again per dump, which took as long as the parse itself. Kept only up to
   KEEP bytes (a larger dump's is given back). */
#define KEEP (64 << 20)
static fr_t *spare;

static int64_t held(const fr_t *p) {
    return p->cn * (int64_t)sizeof(node_t) + p->ci * 4 + p->cr * (int64_t)sizeof(run_t) + p->cs * 4 + p->cm * 8 +
           p->cmemo * 4 + p->cnodes * 6 + p->cenc + p->texts.cpool + p->sides.cpool +
           (p->texts.cap + p->sides.cap) * 8 + (p->texts.nslots + p->sides.nslots) * 4;
}

static void reset(fr_t *p) {
    p->nn = p->ni = p->nr = p->ns = p->nm = p->nenc = 0;
    if (p->cmemo) memset(p->memo, 0xff, (size_t)p->cmemo * sizeof(int32_t)); /* (-1: not set) */
    table_t *t[2] = {&p->texts, &p->sides};
    for (int j = 0; j < 2; j++) {
        t[j]->n = t[j]->npool = 0;
        if (t[j]->nslots) memset(t[j]->slots, 0, (size_t)t[j]->nslots * sizeof(int32_t));
    }
}

void fr_free(fr_t *p) {
    if (!p) return;
    if (held(p) > KEEP) {
        destroy(p);
        return;
    }
    fr_t *old = __atomic_exchange_n(&spare, p, __ATOMIC_ACQ_REL);
    if (old) destroy(old);
}

/* The pickle parsed; NULL and *rc set when it is not plain data this reads (or no memory). */
fr_t *fr_parse(const uint8_t *data, int64_t size, int64_t max_nodes, int *rc) {
    fr_t *p = __atomic_exchange_n(&spare, NULL, __ATOMIC_ACQ_REL);
    if (p) reset(p);
    else p = calloc(1, sizeof(fr_t));
    if (!p) {
        *rc = FR_MEMORY;
        return NULL;
    }
    p->d = data, p->size = size, p->max_nodes = 1 + (max_nodes < size ? max_nodes : size);
    p->root = -1;
    int32_t none;
    *rc = new_node(p, K_NONE, 0, 0, &none); /* NONE_NODE: what an absent field reads as */
    if (!*rc) *rc = parse(p);
    if (*rc) {
        fr_free(p);
        return NULL;
    }
    return p;
}

int64_t fr_root(const fr_t *p) { return p->root; }

/* a node: its kind, a, b (see node_t) */
int fr_node(const fr_t *p, int64_t id, int64_t *a, int64_t *b) {
    if (id < 0 || id >= p->nn) return -1;
    *a = p->nodes[id].a, *b = p->nodes[id].b;
    return p->nodes[id].kind;
}

/* up to `cap` item ids of a container from its `skip`-th on; how many were written */
int64_t fr_items(const fr_t *p, int64_t id, int64_t skip, int32_t *out, int64_t cap) {
    if (id < 0 || id >= p->nn) return 0;
    int64_t got = 0, at = 0;
    for (int32_t r = p->nodes[id].first; r >= 0 && got < cap; r = p->runs[r].next) {
        const run_t *run = &p->runs[r];
        if (at + run->count <= skip) { /* (a run before `skip`: passed whole) */
            at += run->count;
            continue;
        }
        for (int64_t k = skip > at ? skip - at : 0; k < run->count && got < cap; k++) out[got++] = p->items[run->start + k];
        at += run->count;
    }
    return got;
}

/* a table: texts (0) or sides (1); its pool and its bytes, each string's (offset, length), and how
   many strings */
int64_t fr_table(const fr_t *p, int which, const uint8_t **pool, int64_t *pool_size, const int64_t **spans) {
    const table_t *t = which ? &p->sides : &p->texts;
    *pool = t->pool, *pool_size = t->npool, *spans = t->spans;
    return t->n;
}
