/* The scanner's hot loop in C (logfile/compiled.py loads it with ctypes; scanner.py's Python loop
 * is the reference and the fallback).
 *
 * ls_scan reads format 2 frames from a position on while each is "usual": a good frame (its CRC
 * checks) whose event id follows the last one's, holding one collective record of known keys
 * whose template (op, tensors, reduce op, peer, site, chain, role, label, async, native, API and
 * its number of keys) the Python scanner already took the usual way and registered here with its
 * signature id, of a group whose slot it registered, its ts, j and completions in the ranges
 * logfile/records.py gives. Its fields go into columns (struct ls_out). Anything else stops the
 * batch *before* that frame: the Python reader takes it (damage, copies, other records, a first
 * template, a value of another type), so a record is taken here only where the Python loop would
 * have taken it the same way. Every read is bounded by the payload; nothing is allocated per
 * record. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_MARK 0xC1
#define MAX_FRAME (1u << 26)
#define ABSENT INT64_MIN
#define NKEY 12          /* o t r p s ch u l a n x, then the number of keys without a non-empty d */
#define MAX_TEMPLATES 1024
#define INDEX 4096       /* open addressing over the templates: a power of two, at most a quarter full */
#define MAX_GROUP_ID 65536

typedef struct {
    int64_t key[MAX_TEMPLATES][NKEY];
    int32_t sid[MAX_TEMPLATES];
    int32_t count;
    int16_t index[INDEX]; /* template + 1; 0: empty */
    int32_t slot[MAX_GROUP_ID]; /* a file's group id -> its slot; -1: not registered */
    uint32_t crc_table[256];
    uint8_t side[128];    /* 1: a kind of record a frame may hold before its collective (`side`) */
} ls_state;

typedef struct {
    /* per record: capacity `cap` */
    int64_t *off, *ts, *j, *t;
    int32_t *sid, *slot, *chain, *site;
    uint8_t *flags;
    /* per completion entry: capacity `dcap` */
    int32_t *drec;  /* the record (index in this batch) that carries it */
    int64_t *dback, *dlast;
    uint8_t *dlen;
    /* per record before a frame's collective: its bytes and its frame's; capacity `scap` */
    int64_t *sstart, *send, *sframe, *sframe_end;
    int64_t cap, dcap, scap;
    /* results */
    int64_t n, nd, ns, stop, last_eid, eid0;
    uint32_t last_crc;
} ls_out;

void *ls_new(void) {
    ls_state *st = calloc(1, sizeof(ls_state));
    if (!st) return NULL;
    memset(st->slot, 0xff, sizeof(st->slot));
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        st->crc_table[i] = c;
    }
    return st;
}

void ls_free(void *p) { free(p); }

static uint32_t hash(const int64_t *key) {
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < NKEY; k++) h = (h ^ (uint64_t)key[k]) * 1099511628211ull;
    return (uint32_t)(h ^ h >> 29) & (INDEX - 1);
}

static void reindex(ls_state *st) {
    memset(st->index, 0, sizeof(st->index));
    for (int32_t i = 0; i < st->count; i++) {
        uint32_t h = hash(st->key[i]);
        while (st->index[h]) h = (h + 1) & (INDEX - 1);
        st->index[h] = (int16_t)(i + 1);
    }
}

void ls_forget_all(void *p) {
    ls_state *st = p;
    st->count = 0;
    reindex(st);
}

/* Forget the templates whose first `width` fields are `key`'s (the Python loop's keys changed). */
void ls_forget(void *p, const int64_t *key, int32_t width) {
    ls_state *st = p;
    int32_t k = 0;
    for (int32_t i = 0; i < st->count; i++) {
        if (memcmp(st->key[i], key, sizeof(int64_t) * (size_t)width) == 0) continue;
        if (k != i) {
            memcpy(st->key[k], st->key[i], sizeof(st->key[0]));
            st->sid[k] = st->sid[i];
        }
        k++;
    }
    st->count = k;
    reindex(st);
}

static int32_t find(const ls_state *st, const int64_t *key) {
    for (uint32_t h = hash(key); st->index[h]; h = (h + 1) & (INDEX - 1)) {
        int32_t i = st->index[h] - 1;
        if (memcmp(st->key[i], key, sizeof(st->key[0])) == 0) return i;
    }
    return -1;
}

/* 1: registered; 0: the table is full (those records stay with the Python loop). */
int32_t ls_add_template(void *p, const int64_t *key, int32_t sid) {
    ls_state *st = p;
    int32_t i = find(st, key);
    if (i < 0) {
        if (st->count >= MAX_TEMPLATES) return 0;
        i = st->count++;
        memcpy(st->key[i], key, sizeof(st->key[0]));
        uint32_t h = hash(key);
        while (st->index[h]) h = (h + 1) & (INDEX - 1);
        st->index[h] = (int16_t)(i + 1);
    }
    st->sid[i] = sid;
    return 1;
}

/* The kinds of record a frame may hold before its collective, one character each: those the
 * Python scanner only appends to lists of their own (steps, syncs...), whatever the collectives. */
void ls_set_side_kinds(void *p, const char *kinds) {
    ls_state *st = p;
    memset(st->side, 0, sizeof(st->side));
    for (; *kinds; kinds++)
        if ((unsigned char)*kinds < 128) st->side[(unsigned char)*kinds] = 1;
}

void ls_set_group(void *p, int64_t gid, int32_t slot) {
    if (gid >= 0 && gid < MAX_GROUP_ID) ((ls_state *)p)->slot[gid] = slot;
}

static uint32_t crc32(const ls_state *st, const uint8_t *b, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = st->crc_table[(c ^ b[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* LEB128 as frames.py's _frame_header reads it; -1: past `end` or longer than 63 bits. */
static int uvarint(const uint8_t *d, int64_t *p, int64_t end, uint64_t *out) {
    uint64_t v = 0;
    int shift = 0;
    for (;;) {
        if (*p >= end) return -1;
        uint8_t b = d[(*p)++];
        v |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) break;
        shift += 7;
        if (shift > 63) return -1;
    }
    *out = v;
    return 0;
}

enum { V_INT, V_NIL, V_TRUE, V_FALSE, V_ARRAY, V_FIXSTR, V_OTHER };

typedef struct {
    int kind;
    int64_t i;    /* V_INT: the value; V_ARRAY: its length; V_FIXSTR: its length */
    int64_t at;   /* V_FIXSTR: where its bytes start */
} value;

static inline uint64_t be(const uint8_t *b, int n) {
    uint64_t v = 0;
    for (int k = 0; k < n; k++) v = v << 8 | b[k];
    return v;
}

/* One msgpack value's head at *p (< end); an int is taken only within int64. -1: runs past end. */
static int head(const uint8_t *d, int64_t *p, int64_t end, value *v) {
    if (*p >= end) return -1;
    uint8_t b = d[(*p)++];
    int n = 0, sign = 0;
    v->kind = V_INT;
    if (b < 0x80) { v->i = b; return 0; }
    if (b >= 0xE0) { v->i = (int8_t)b; return 0; }
    if ((b & 0xF0) == 0x90) { v->kind = V_ARRAY; v->i = b & 0x0F; return 0; }
    if ((b & 0xE0) == 0xA0) {
        v->kind = V_FIXSTR; v->i = b & 0x1F; v->at = *p;
        if (end - *p < v->i) return -1;
        *p += v->i;
        return 0;
    }
    switch (b) {
        case 0xC0: v->kind = V_NIL; return 0;
        case 0xC2: v->kind = V_FALSE; return 0;
        case 0xC3: v->kind = V_TRUE; return 0;
        case 0xCC: n = 1; break;
        case 0xCD: n = 2; break;
        case 0xCE: n = 4; break;
        case 0xCF: n = 8; break;
        case 0xD0: n = 1; sign = 1; break;
        case 0xD1: n = 2; sign = 1; break;
        case 0xD2: n = 4; sign = 1; break;
        case 0xD3: n = 8; sign = 1; break;
        case 0xDC:
            if (end - *p < 2) return -1;
            v->kind = V_ARRAY; v->i = (int64_t)be(d + *p, 2); *p += 2;
            return 0;
        default: v->kind = V_OTHER; return 0;
    }
    if (end - *p < n) return -1;
    uint64_t u = be(d + *p, n);
    *p += n;
    if (sign) {
        if (n == 1) v->i = (int8_t)u;
        else if (n == 2) v->i = (int16_t)u;
        else if (n == 4) v->i = (int32_t)u;
        else v->i = (int64_t)u;
    } else {
        if (u > (uint64_t)INT64_MAX) { v->kind = V_OTHER; return 0; }
        v->i = (int64_t)u;
    }
    return 0;
}

/* Field indexes: the template's eleven, then g, ts, j, d, k. */
enum { F_O, F_T, F_R, F_P, F_S, F_CH, F_U, F_L, F_A, F_N, F_X, F_G, F_TS, F_J, F_D, F_K, F_COUNT };

static int field_of(const uint8_t *s, int64_t len) {
    if (len == 1) {
        switch (s[0]) {
            case 'o': return F_O; case 't': return F_T; case 'r': return F_R; case 'p': return F_P;
            case 's': return F_S; case 'u': return F_U; case 'l': return F_L; case 'a': return F_A;
            case 'n': return F_N; case 'x': return F_X; case 'g': return F_G; case 'j': return F_J;
            case 'd': return F_D; case 'k': return F_K;
        }
    } else if (len == 2) {
        if (s[0] == 'c' && s[1] == 'h') return F_CH;
        if (s[0] == 't' && s[1] == 's') return F_TS;
    }
    return -1;
}

/* Past one value at *p that msgpack decodes to what the Python reader takes as it is: nil, bools,
 * ints, floats, ASCII strings, and arrays and maps (string keys) of those, `depth` deep at most.
 * -1: anything else (bytes, ext types, other text, deeper), which the Python reader then reads. */
static int skip(const uint8_t *d, int64_t *p, int64_t end, int depth) {
    if (*p >= end || depth > 8) return -1;
    uint8_t b = d[(*p)++];
    int64_t n = -1, items = 0, pairs = 0;
    if (b < 0x80 || b >= 0xE0 || b == 0xC0 || b == 0xC2 || b == 0xC3) return 0;
    if ((b & 0xE0) == 0xA0) n = b & 0x1F;
    else if ((b & 0xF0) == 0x90) items = b & 0x0F;
    else if ((b & 0xF0) == 0x80) pairs = b & 0x0F;
    else {
        int width;
        switch (b) {
            case 0xCC: case 0xD0: *p += 1; return *p <= end ? 0 : -1;
            case 0xCD: case 0xD1: *p += 2; return *p <= end ? 0 : -1;
            case 0xCE: case 0xD2: case 0xCA: *p += 4; return *p <= end ? 0 : -1;
            case 0xCF: case 0xD3: case 0xCB: *p += 8; return *p <= end ? 0 : -1;
            case 0xD9: width = 1; break;
            case 0xDA: case 0xDC: case 0xDE: width = 2; break;
            case 0xDB: case 0xDD: case 0xDF: width = 4; break;
            default: return -1;
        }
        if (end - *p < width) return -1;
        int64_t v = (int64_t)be(d + *p, width);
        *p += width;
        if (b == 0xD9 || b == 0xDA || b == 0xDB) n = v;
        else if (b == 0xDC || b == 0xDD) items = v;
        else pairs = v;
    }
    if (n >= 0) {  /* a string: ASCII only (UTF-8 that needs no check) */
        if (end - *p < n) return -1;
        for (int64_t k = 0; k < n; k++)
            if (d[*p + k] >= 0x80) return -1;
        *p += n;
        return 0;
    }
    if (items > end - *p || pairs > end - *p) return -1;  /* (each takes a byte at least) */
    for (int64_t k = 0; k < items; k++)
        if (skip(d, p, end, depth + 1) < 0) return -1;
    for (int64_t k = 0; k < pairs; k++) {
        value key;
        if (head(d, p, end, &key) < 0 || key.kind != V_FIXSTR) return -1;
        for (int64_t c = 0; c < key.i; c++)
            if (d[key.at + c] >= 0x80) return -1;
        if (skip(d, p, end, depth + 1) < 0) return -1;
    }
    return 0;
}

/* Past a record at *p of a side kind (a map whose first key is "k", of a kind in st->side); 0: it
 * is not one, *p unchanged. */
static int side(const ls_state *st, const uint8_t *d, int64_t *p, int64_t end) {
    int64_t q = *p;
    uint8_t b = d[q++];
    if ((b & 0xF0) != 0x80 || (b & 0x0F) == 0 || end - q < 4) return 0;
    if (d[q] != 0xA1 || d[q + 1] != 'k' || d[q + 2] != 0xA1 || d[q + 3] >= 128 || !st->side[d[q + 3]]) return 0;
    q += 4;
    for (int k = 1; k < (b & 0x0F); k++) {
        value key;
        if (head(d, &q, end, &key) < 0 || key.kind != V_FIXSTR) return 0;
        for (int64_t c = 0; c < key.i; c++)
            if (d[key.at + c] >= 0x80 || (key.i == 1 && d[key.at] == 'k')) return 0;
        if (skip(d, &q, end, 1) < 0) return 0;
    }
    *p = q;
    return 1;
}

/* The record of a frame's payload [p, end) into `out` at index out->n; 0: not usual (nothing kept). */
static int record(const ls_state *st, const uint8_t *d, int64_t p, int64_t end, ls_out *out) {
    value v;
    if (p >= end) return 0;
    uint8_t b = d[p++];
    int64_t nkeys;
    if ((b & 0xF0) == 0x80) nkeys = b & 0x0F;
    else if (b == 0xDE && end - p >= 2) { nkeys = (int64_t)be(d + p, 2); p += 2; }
    else return 0;
    int64_t f[F_COUNT];
    int seen = 0;
    for (int k = 0; k < F_COUNT; k++) f[k] = ABSENT;
    int64_t d_at = -1, d_len = 0;
    for (int64_t k = 0; k < nkeys; k++) {
        if (head(d, &p, end, &v) < 0 || v.kind != V_FIXSTR) return 0;
        int which = field_of(d + v.at, v.i);
        if (which < 0 || seen & (1 << which)) return 0;  /* another key, or one twice */
        seen |= 1 << which;
        if (head(d, &p, end, &v) < 0) return 0;
        if (which == F_K) {
            if (v.kind != V_FIXSTR || v.i != 1 || d[v.at] != 'C') return 0;
        } else if (which == F_D) {
            if (v.kind != V_ARRAY) return 0;
            d_at = p, d_len = v.i;
            for (int64_t e = 0; e < v.i; e++) {  /* [[back, (c,) µs], ...]: skipped here, read below */
                value w;
                if (head(d, &p, end, &w) < 0 || w.kind != V_ARRAY || (w.i != 2 && w.i != 3)) return 0;
                for (int64_t q = 0, len = w.i; q < len; q++)
                    if (head(d, &p, end, &w) < 0 || w.kind != V_INT || (q == 0 && w.i < 0)) return 0;
            }
        } else if (v.kind == V_INT) {
            f[which] = v.i;
        } else if (v.kind == V_NIL) {
            f[which] = ABSENT;  /* (a nil reads as absent in the Python loop's keys) */
        } else if ((v.kind == V_TRUE || v.kind == V_FALSE) && (which == F_A || which == F_N)) {
            f[which] = v.kind == V_TRUE;
        } else {
            return 0;
        }
    }
    if (p != end || !(seen & (1 << F_K))) return 0;
    if (!(seen & (1 << F_TS)) || !(seen & (1 << F_J)) || f[F_TS] == ABSENT || f[F_J] == ABSENT || f[F_J] < 0)
        return 0;
    if (f[F_G] == ABSENT || f[F_G] < 0 || f[F_G] >= MAX_GROUP_ID || st->slot[f[F_G]] < 0) return 0;
    int64_t key[NKEY];
    memcpy(key, f, sizeof(int64_t) * 11);
    key[11] = nkeys - (d_len > 0);
    int32_t t = find(st, key);
    if (t < 0) return 0;
    /* the columns' ranges (array typecodes 'i'): beyond them the Python loop raises */
    int64_t s = f[F_S], ch = f[F_CH];
    int64_t chain = ch != ABSENT ? ch : s == ABSENT ? -1 : -2 - s;
    if (chain < INT32_MIN || chain > INT32_MAX || (s != ABSENT && (s < INT32_MIN || s > INT32_MAX))) return 0;
    if (out->nd + d_len > out->dcap) return 0;
    /* completions: µs since the origin (ts minus the entry's last field) must stay within int64 */
    int64_t q = d_at, nd = out->nd;
    for (int64_t e = 0; e < d_len; e++) {
        value w, x;
        head(d, &q, end, &w);
        int64_t len = w.i;
        head(d, &q, end, &x);
        int64_t back = x.i, last = 0;
        for (int64_t r = 1; r < len; r++) { head(d, &q, end, &x); last = x.i; }
        if ((last < 0 && f[F_TS] > INT64_MAX + last) || (last > 0 && f[F_TS] < INT64_MIN + last)) return 0;
        out->drec[nd] = (int32_t)out->n;
        out->dback[nd] = back;
        out->dlast[nd] = last;
        out->dlen[nd] = (uint8_t)len;
        nd++;
    }
    int64_t i = out->n;
    out->nd = nd;
    out->sid[i] = st->sid[t];
    out->slot[i] = st->slot[f[F_G]];
    out->ts[i] = f[F_TS];
    out->j[i] = f[F_J];
    out->t[i] = f[F_T];
    out->chain[i] = (int32_t)chain;
    out->site[i] = s == ABSENT ? -1 : (int32_t)s;
    out->flags[i] = (f[F_A] != ABSENT && f[F_A] != 0) | (f[F_N] != ABSENT && f[F_N] != 0) << 1;
    return 1;
}

/* Frames from `pos` while usual, at most out->cap records; out->stop: where the Python reader
 * goes on, out->last_eid / last_crc: the last frame taken (the reader's duplicate check). */
void ls_scan(void *p, const uint8_t *d, int64_t n, int64_t pos, int64_t last_eid, ls_out *out) {
    const ls_state *st = p;
    out->n = out->nd = out->ns = 0;
    out->eid0 = -1;
    out->last_eid = last_eid;
    while (out->n < out->cap && pos + 7 <= n && d[pos] == FRAME_MARK) {
        int64_t q = pos + 5;
        uint64_t length, eid;
        if (uvarint(d, &q, n, &length) < 0 || uvarint(d, &q, n, &eid) < 0) break;
        if (length > MAX_FRAME || (int64_t)length > n - q || eid > (uint64_t)INT64_MAX) break;
        int64_t end = q + (int64_t)length;
        if ((int64_t)eid != out->last_eid + 1)
            break;  /* not the next collective (copies, a gap, a frame of other records before): Python's */
        uint32_t crc = (uint32_t)d[pos + 1] | (uint32_t)d[pos + 2] << 8 | (uint32_t)d[pos + 3] << 16 |
                       (uint32_t)d[pos + 4] << 24;
        if (crc32(st, d + pos + 5, (size_t)(end - pos - 5)) != crc) break;
        int64_t ns = out->ns, at = q;
        while (at < end && ns < out->scap && side(st, d, &at, end)) {
            out->sstart[ns] = q, out->send[ns] = at, out->sframe[ns] = pos, out->sframe_end[ns] = end;
            ns++;
            q = at;
        }
        if (!record(st, d, q, end, out)) break;
        out->ns = ns;
        out->off[out->n] = pos;
        if (out->n == 0) out->eid0 = (int64_t)eid;
        out->n++;
        out->last_eid = (int64_t)eid;
        out->last_crc = crc;
        pos = end;
    }
    out->stop = pos;
}
