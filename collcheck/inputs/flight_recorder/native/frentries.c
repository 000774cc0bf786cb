/* A dump's entries checked as collcheck/inputs/flight_recorder/columns.py checks them (the same
   types, ranges and budget of values walked), written as columns: numbers, ids of distinct texts,
   ids of distinct tensor sides (shapes and dtype names). Anything columns.py would not take as
   usual is FR_UNUSUAL here. */

#include "frscan.h"

/* ------------------------------------------------------------------------------------------ */
/* the entries, checked as columns.py checks them                                              */
/* ------------------------------------------------------------------------------------------ */

enum {
    F_RECORD_ID, F_PG_ID, F_PROCESS_GROUP, F_SEQ, F_P2P_SEQ, F_OP_ID, F_NAME, F_CREATED, F_STATE,
    F_STARTED, F_COMPLETED, F_DURATION, F_IS_P2P, F_RETIRED, F_TIMEOUT, F_THREAD_ID, F_THREAD_NAME,
    F_IN_SIZES, F_OUT_SIZES, F_IN_DTYPES, F_OUT_DTYPES, F_FRAMES
};
static const char *FIELDS[N_FIELDS] = {
    "record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "op_id", "profiling_name",
    "time_created_ns", "state", "time_discovered_started_ns", "time_discovered_completed_ns", "duration_ms",
    "is_p2p", "retired", "timeout_ms", "thread_id", "thread_name", "input_sizes", "output_sizes",
    "input_dtypes", "output_dtypes", "frames"};

typedef struct {
    fr_t *p;
    int64_t left, spent;
    int pg_ints, pg_texts;
} walk_t;

static int spend(walk_t *w, int64_t k) {
    w->spent += k;
    return w->spent > w->left ? FR_UNUSUAL : FR_OK;
}

/* the items of a container, in order: calls fn(w, id, i, arg) */
#define EACH(P, C, VAR, BODY)                                                       \
    do {                                                                            \
        int64_t i_ = 0;                                                             \
        for (int32_t r_ = (P)->nodes[C].first; r_ >= 0; r_ = (P)->runs[r_].next) { \
            const run_t *run_ = &(P)->runs[r_];                                     \
            for (int32_t k_ = 0; k_ < run_->count; k_++, i_++) {                    \
                int32_t VAR = (P)->items[run_->start + k_];                         \
                BODY                                                                \
            }                                                                       \
        }                                                                           \
    } while (0)

/* the budget a shown text takes (untrusted.visible's work); texts beyond MAX_TEXT are unusual */
static int shown(walk_t *w, int32_t id, int need_plain) {
    const node_t *n = &w->p->nodes[id];
    if (n->kind != K_STR || n->b > MAX_TEXT || (need_plain && !n->plain)) return FR_UNUSUAL;
    return spend(w, n->b >> 6);
}

static int text_id(walk_t *w, int32_t id, int32_t *out) {
    fr_t *p = w->p;
    TRY(shown(w, id, 1));
    if (p->text_of[id]) {
        *out = p->text_of[id] - 1;
        return FR_OK;
    }
    TRY(fr_intern(&p->texts, p->d + p->nodes[id].a, p->nodes[id].b, out));
    p->text_of[id] = *out + 1;
    return FR_OK;
}

/* a whole number in [0, most] (or None, -1, where `none_ok`) */
static int number(const fr_t *p, int32_t id, int64_t most, int none_ok, int64_t *out) {
    const node_t *n = &p->nodes[id];
    if (n->kind == K_NONE && none_ok) {
        *out = -1;
        return FR_OK;
    }
    if (n->kind != K_INT || n->a < 0 || n->a > most) return FR_UNUSUAL;
    *out = n->a;
    return FR_OK;
}

static int is_list(const fr_t *p, int32_t id) {
    return p->nodes[id].kind == K_LIST || p->nodes[id].kind == K_TUPLE;
}

/* a list of at most `limit` items, its 1 + length spent before it is walked */
static int sequence(walk_t *w, int32_t id, int64_t limit) {
    if (!is_list(w->p, id) || w->p->nodes[id].b > limit) return FR_UNUSUAL;
    return spend(w, 1 + w->p->nodes[id].b);
}

static int enc_put(fr_t *p, const void *s, int64_t len) {
    GROW(p->enc, p->nenc, p->cenc, len, uint8_t);
    memcpy(p->enc + p->nenc, s, (size_t)len);
    p->nenc += len;
    return FR_OK;
}

/* a side's list of tensors (None: none), spent and its length encoded first */
static int tensors(walk_t *w, int32_t id) {
    int64_t count = 0;
    if (w->p->nodes[id].kind != K_NONE) {
        TRY(sequence(w, id, MAX_TENSORS));
        count = w->p->nodes[id].b;
    }
    return enc_put(w->p, &count, 8);
}

/* one side's shapes: encoded as [tensors, then per tensor its dims and each dim] (int64s) */
static int shapes(walk_t *w, int32_t id) {
    fr_t *p = w->p;
    TRY(tensors(w, id));
    int rc = FR_OK;
    EACH(p, id, shape, {
        if (rc) break;
        if ((rc = sequence(w, shape, MAX_DIMS))) break;
        int64_t dims = p->nodes[shape].b;
        if ((rc = enc_put(p, &dims, 8))) break;
        EACH(p, shape, dim, {
            int64_t v;
            if ((rc = number(p, dim, INT64_MAX, 0, &v))) break;
            if ((rc = enc_put(p, &v, 8))) break;
        });
    });
    return rc;
}

/* one side's dtype names: [count, then each name's text id] */
static int dtypes(walk_t *w, int32_t id) {
    fr_t *p = w->p;
    TRY(tensors(w, id));
    int rc = FR_OK;
    EACH(p, id, name, {
        int32_t t;
        if ((rc = text_id(w, name, &t))) break;
        int64_t v = t;
        if ((rc = enc_put(p, &v, 8))) break;
    });
    return rc;
}

static int side(walk_t *w, int32_t sizes, int32_t names, int32_t *out) {
    fr_t *p = w->p;
    p->nenc = 0;
    TRY(shapes(w, sizes));
    TRY(dtypes(w, names));
    return fr_intern(&p->sides, p->enc, p->nenc, out);
}

static const char *FRAME_KEYS[3] = {"line", "filename", "name"};

/* which of `names` a key node is (-1: none), found once per node: keys are shared through the memo
   (one node per distinct key in a dump that torch or pickle wrote). A node is a key of entries or
   of frames, never both, in a usual dump; a node met as both is looked up each time. */
static int field(fr_t *p, int32_t key, const char **names, int count) {
    uint8_t cached = p->field_of[key];
    int tag = 128 | (names == FIELDS ? 0 : 64);
    if ((cached & 192) == tag) return (cached & 63) - 1;
    const node_t *k = &p->nodes[key];
    int found = -1;
    for (int j = 0; j < count; j++)
        if ((int64_t)strlen(names[j]) == k->b && !memcmp(p->d + k->a, names[j], (size_t)k->b)) {
            found = j;
            break;
        }
    p->field_of[key] = (uint8_t)(tag | (found + 1));
    return found;
}

static int frame(walk_t *w, int32_t f) {
    fr_t *p = w->p;
    if (p->nodes[f].kind != K_DICT || p->nodes[f].b > 2 * MAX_KEYS) return FR_UNUSUAL;
    int32_t got[3] = {-1, -1, -1}; /* line, filename, name */
    int64_t at = 0;
    int32_t key = -1;
    EACH(p, f, item, {
        if (at++ % 2 == 0) {
            key = item;
        } else {
            int j = field(p, key, FRAME_KEYS, 3);
            if (j >= 0) got[j] = item;
        }
    });
    int64_t v;
    if (got[0] >= 0) TRY(number(p, got[0], MAX_LINE - 1, 1, &v));
    for (int j = 1; j < 3; j++)
        if (got[j] >= 0) TRY(shown(w, got[j], 0));
    return FR_OK;
}

static int frames(walk_t *w, int32_t id) {
    fr_t *p = w->p;
    if (p->nodes[id].kind == K_NONE) return FR_OK;
    TRY(sequence(w, id, MAX_FRAMES));
    int rc = FR_OK;
    EACH(p, id, f, {
        if (!p->seen[f]) {
            p->seen[f] = 1;
            if ((rc = frame(w, f))) break;
        }
    });
    return rc;
}

static int flag(const fr_t *p, int32_t id, uint8_t *out) {
    uint8_t k = p->nodes[id].kind;
    if (k != K_TRUE && k != K_FALSE && k != K_NONE) return FR_UNUSUAL;
    *out = k == K_TRUE;
    return FR_OK;
}

static int duration(const fr_t *p, int32_t id) {
    const node_t *n = &p->nodes[id];
    if (n->kind == K_NONE) return FR_OK;
    if (n->kind == K_INT) return n->a >= 0 && n->a < 1000000000000000000LL ? FR_OK : FR_UNUSUAL;
    if (n->kind != K_FLOAT) return FR_UNUSUAL;
    double v;
    uint64_t bits = (uint64_t)n->a;
    memcpy(&v, &bits, 8);
    return isfinite(v) && v >= 0 && v < 1e18 ? FR_OK : FR_UNUSUAL;
}

static int fields_of(fr_t *p, int32_t e, int32_t got[N_FIELDS]) {
    if (p->nodes[e].kind != K_DICT || p->nodes[e].b > 2 * MAX_KEYS) return FR_UNUSUAL;
    for (int j = 0; j < N_FIELDS; j++) got[j] = -1;
    int64_t at = 0;
    int32_t key = -1;
    EACH(p, e, item, {
        if (at++ % 2 == 0) {
            key = item;
        } else {
            int j = field(p, key, FIELDS, N_FIELDS);
            if (j >= 0) got[j] = item;
        }
    });
    return FR_OK;
}

static int entry(walk_t *w, int32_t e, int64_t i, fr_out *o) {
    fr_t *p = w->p;
    int32_t f[N_FIELDS];
    TRY(fields_of(p, e, f));
    for (int j = 0; j < N_FIELDS; j++)
        if (f[j] < 0) f[j] = NONE_NODE;
    int64_t v;
    static const int numbers[] = {F_RECORD_ID, F_SEQ, F_P2P_SEQ, F_OP_ID, F_CREATED, F_STARTED, F_COMPLETED, F_TIMEOUT};
    for (int j = 0; j < 8; j++) {
        TRY(number(p, f[numbers[j]], INT64_MAX, 1, &v));
        if (numbers[j] == F_RECORD_ID) o->record_id[i] = v < 0 ? 0 : v;
        if (numbers[j] == F_SEQ) o->seq[i] = v < 0 ? 0 : v;
        if (numbers[j] == F_CREATED) o->created[i] = v < 0 ? 0 : v;
        if (numbers[j] == F_COMPLETED) o->completed[i] = v;
    }
    TRY(text_id(w, f[F_NAME], &o->name[i])); /* (required: None is unusual) */
    o->state[i] = -1;
    if (p->nodes[f[F_STATE]].kind != K_NONE) TRY(text_id(w, f[F_STATE], &o->state[i]));
    if (p->nodes[f[F_THREAD_NAME]].kind != K_NONE) TRY(shown(w, f[F_THREAD_NAME], 0));
    int32_t tid = f[F_THREAD_ID];
    if (p->nodes[tid].kind == K_STR) TRY(shown(w, tid, 0));
    else TRY(number(p, tid, INT64_MAX, 1, &v));
    int32_t pg = f[F_PG_ID];
    o->pg[i] = -1;
    if (p->nodes[pg].kind == K_INT) {
        TRY(number(p, pg, INT64_MAX, 0, &v));
        char digits[24];
        int len = 0;
        do digits[23 - len++] = (char)('0' + v % 10); while ((v /= 10) && len < 23);
        TRY(fr_intern(&p->texts, (const uint8_t *)digits + 24 - len, len, &o->pg[i]));
        w->pg_ints = 1;
    } else if (p->nodes[pg].kind != K_NONE) {
        TRY(text_id(w, pg, &o->pg[i]));
        w->pg_texts = 1;
    }
    if (w->pg_ints && w->pg_texts) return FR_UNUSUAL;
    int32_t g = f[F_PROCESS_GROUP];
    if (!is_list(p, g) || p->nodes[g].b != 2) return FR_UNUSUAL;
    int32_t pair[2], at = 0;
    EACH(p, g, x, { pair[at++] = x; });
    TRY(text_id(w, pair[0], &o->gname[i]));
    TRY(text_id(w, pair[1], &o->gdesc[i]));
    TRY(flag(p, f[F_IS_P2P], &o->p2p[i]));
    uint8_t retired;
    TRY(flag(p, f[F_RETIRED], &retired));
    TRY(duration(p, f[F_DURATION]));
    TRY(side(w, f[F_IN_SIZES], f[F_IN_DTYPES], &o->in_side[i]));
    TRY(side(w, f[F_OUT_SIZES], f[F_OUT_DTYPES], &o->out_side[i]));
    return frames(w, f[F_FRAMES]);
}

/* The entries (a list node) checked and written into `o` (arrays of the list's length), the
   budget `left` (values walked) spent as columns.py spends it: FR_OK, or FR_UNUSUAL. */
int fr_columns(fr_t *p, int64_t entries, int64_t left, fr_out *o) {
    if (entries < 0 || entries >= p->nn || p->nodes[entries].kind != K_LIST) return FR_UNUSUAL;
    int64_t n = p->nodes[entries].b;
    walk_t w = {p, left, 0, 0, 0};
    if (p->nn > p->cnodes) {
        free(p->text_of), free(p->seen), free(p->field_of);
        p->text_of = malloc((size_t)p->nn * sizeof(int32_t));
        p->seen = malloc((size_t)p->nn), p->field_of = malloc((size_t)p->nn);
        p->cnodes = p->text_of && p->seen && p->field_of ? p->nn : 0;
        if (!p->cnodes) return FR_MEMORY;
    }
    memset(p->text_of, 0, (size_t)p->nn * sizeof(int32_t));
    memset(p->seen, 0, (size_t)p->nn), memset(p->field_of, 0, (size_t)p->nn);
    TRY(spend(&w, n * N_FIELDS));
    int rc = FR_OK;
    EACH(p, entries, e, {
        if ((rc = entry(&w, e, i_, o))) break;
    });
    o->spent = w.spent;
    return rc;
}

