/* Logs' summaries in C: each log's first and last bytes read, its header and its last checkpoint
 * found and checked (logfile/summaries.py calls it, with logscan.c in one library built by
 * logfile/compiled.py; model/load.py's `_summary`, the Python reader, is the reference and the
 * fallback).
 *
 * ls_ends reads, for each of many paths, what reader.read_ends reads (a regular file's first
 * head_cap bytes and its last tail_cap bytes, with one open; nothing else is ever opened), then
 * says of each whether its header and its tail are "usual": found where reader._header_of and
 * tail._tail_in find them, every record concerned a map of string keys and values msgpack
 * decodes the same way everywhere (ints, nil, bools, floats, ASCII strings, arrays and maps of
 * those), each key the schema knows of the right type and range (logfile/records.py's SCHEMA,
 * given key by key: ls_ends_rule), the checkpoint not continued (`more`), no collective after it.
 * Anything else, or any doubt, and the log is not usual: the Python reader reads it, says its
 * damage or refuses it. Every read is bounded by the bytes read; nothing is allocated per log. */

#define _POSIX_C_SOURCE 200809L

#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FRAME_MARK 0xC1
#define MAX_FRAME (1u << 26)
#define SHORT 256        /* tail.SHORT: the last bytes tried first */
#define MAX_CANDIDATES 256
#define MAX_PAYLOADS 256 /* frames chained to the end of the tail (each takes 7 bytes at least) */
#define MAX_PAIRS 32     /* keys of one record (more: the Python reader's) */
#define MAX_RECORDS 64   /* records of one payload */
#define MAX_PARTS 8      /* payloads from the checkpoint's to the end */
#define MAX_RULES 32
#define DEPTH 8

enum { R_NONE, R_INT, R_STR, R_SECONDS, R_LIST, R_SEQUENCE, R_OTHER };

typedef struct {
    char name[16];
    int32_t len, code, item;       /* item: a list's items' code (R_INT, R_STR, R_SEQUENCE) */
    int64_t lo, ilo, most;
    uint64_t max, imax;            /* ints: lo..max, both included */
} rule;

typedef struct {
    rule rules[MAX_RULES];
    int32_t count;
    uint32_t required;             /* a bit per rule */
} kind_rules;

typedef struct {
    kind_rules kinds[128];
    uint8_t known[128];            /* the record kinds (one ASCII letter each) */
    uint32_t crc_table[256];
    int64_t version, max_world;    /* format.FORMAT_VERSION, records.MAX_WORLD */
    char magic[32];
    int32_t magic_len;
} ends_state;

typedef struct {
    int64_t read;                  /* 1: read (the bytes in the buffer); 0: the Python reader reads it */
    int64_t head_len, tail_start, tail_len;
    int64_t header, hdr_at, hdr_end;  /* header: 1, the first frame's first record [hdr_at, hdr_end) is a usual header */
    int64_t tail, nparts, records; /* tail: 1, a usual complete tail: its records from the checkpoint on */
    int64_t part_at[MAX_PARTS], part_end[MAX_PARTS];  /* ... in parts of the tail's bytes (all int64: a row) */
} ls_end;

void *ls_ends_new(int64_t version, int64_t max_world, const char *magic) {
    ends_state *st = calloc(1, sizeof(ends_state));
    if (!st) return NULL;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        st->crc_table[i] = c;
    }
    st->version = version, st->max_world = max_world;
    size_t n = strlen(magic);
    st->magic_len = n < sizeof(st->magic) ? (int32_t)n : -1;
    if (st->magic_len >= 0) memcpy(st->magic, magic, n);
    return st;
}

void ls_ends_free(void *p) { free(p); }

/* A record kind, then a key of it with its rule (R_NONE: a kind with no key yet). 0: no room. */
int32_t ls_ends_rule(void *p, const char *kind, const char *name, int32_t code, int64_t lo, uint64_t max,
                     int64_t most, int32_t item, int64_t ilo, uint64_t imax, int32_t required) {
    ends_state *st = p;
    unsigned char k = (unsigned char)kind[0];
    if (k >= 128 || kind[1]) return 0;
    st->known[k] = 1;
    if (code == R_NONE) return 1;
    kind_rules *kr = &st->kinds[k];
    size_t len = strlen(name);
    if (kr->count >= MAX_RULES || len == 0 || len >= sizeof(kr->rules[0].name)) return 0;
    rule *r = &kr->rules[kr->count];
    memcpy(r->name, name, len);
    r->len = (int32_t)len, r->code = code, r->lo = lo, r->max = max, r->most = most;
    r->item = item, r->ilo = ilo, r->imax = imax;
    if (required) kr->required |= 1u << kr->count;
    kr->count++;
    return 1;
}

static uint32_t crc32(const ends_state *st, const uint8_t *b, int64_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (int64_t i = 0; i < n; i++) c = st->crc_table[(c ^ b[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* -- frames (frames.frame_at) ------------------------------------------------------------------- */
enum { FR_NONE, FR_TORN, FR_OK };

/* frame_at(d, pos) with its data n bytes long: FR_OK (*at, *end: the payload; *eid), FR_TORN, FR_NONE. */
static int frame_at(const ends_state *st, const uint8_t *d, int64_t pos, int64_t n, int64_t *at, int64_t *end,
                    uint64_t *eid) {
    if (d[pos] != FRAME_MARK) return FR_NONE;
    int64_t p = pos + 5;
    uint64_t fields[2];
    for (int k = 0; k < 2; k++) {
        uint64_t value = 0;
        int shift = 0;
        for (;;) {
            if (p >= n) return FR_TORN;
            uint8_t b = d[p++];
            if (shift == 63 && (b & 0x7F) > 1) value = UINT64_MAX;  /* (beyond 64 bits: Python's int is huge) */
            else if (value != UINT64_MAX) value |= (uint64_t)(b & 0x7F) << shift;
            if (b < 0x80) break;
            shift += 7;
            if (shift > 63) return FR_NONE;
        }
        fields[k] = value;
    }
    /* (a value beyond 64 bits, saturated: more than MAX_FRAME, or an eid that is not 0, as in Python) */
    if (fields[0] > MAX_FRAME) return FR_NONE;
    if ((int64_t)fields[0] > n - p) return FR_TORN;
    uint32_t crc = (uint32_t)d[pos + 1] | (uint32_t)d[pos + 2] << 8 | (uint32_t)d[pos + 3] << 16 |
                   (uint32_t)d[pos + 4] << 24;
    int64_t e = p + (int64_t)fields[0];
    if (crc32(st, d + pos + 5, e - pos - 5) != crc) return FR_NONE;
    *at = p, *end = e, *eid = fields[1];
    return FR_OK;
}

/* -- msgpack values -------------------------------------------------------------------------------- */
enum { T_INT, T_NIL, T_BOOL, T_FLOAT, T_STR, T_ARRAY, T_MAP, T_BAD };

typedef struct {
    int type, neg;
    int64_t i;      /* T_INT < 0, T_BOOL; T_STR, T_ARRAY, T_MAP: the length */
    uint64_t u;     /* T_INT >= 0 */
    double f;
    int64_t at;     /* T_STR: where its bytes start */
} val;

static uint64_t be(const uint8_t *b, int n) {
    uint64_t v = 0;
    for (int k = 0; k < n; k++) v = v << 8 | b[k];
    return v;
}

/* One value's head at *p (< end): the value itself, or a container's length. -1: past the end,
 * or not a value read the same way everywhere (T_BAD: bin, ext, a string that is not ASCII). */
static int head(const uint8_t *d, int64_t *p, int64_t end, val *v) {
    if (*p >= end) return -1;
    uint8_t b = d[(*p)++];
    int64_t n = -1;
    int width = 0;
    v->type = T_INT, v->neg = 0;
    if (b < 0x80) { v->u = b; return 0; }
    if (b >= 0xE0) { v->neg = 1, v->i = (int8_t)b; return 0; }
    if ((b & 0xF0) == 0x80) { v->type = T_MAP, v->i = b & 0x0F; return 0; }
    if ((b & 0xF0) == 0x90) { v->type = T_ARRAY, v->i = b & 0x0F; return 0; }
    if ((b & 0xE0) == 0xA0) n = b & 0x1F;
    switch (b) {
        case 0xC0: v->type = T_NIL; return 0;
        case 0xC2: case 0xC3: v->type = T_BOOL, v->i = b == 0xC3; return 0;
        case 0xCC: case 0xCD: case 0xCE: case 0xCF: {
            int w = 1 << (b - 0xCC);
            if (end - *p < w) return -1;
            v->u = be(d + *p, w), *p += w;
            return 0;
        }
        case 0xD0: case 0xD1: case 0xD2: case 0xD3: {
            int w = 1 << (b - 0xD0);
            if (end - *p < w) return -1;
            uint64_t u = be(d + *p, w);
            *p += w;
            int64_t s = w == 1 ? (int8_t)u : w == 2 ? (int16_t)u : w == 4 ? (int32_t)u : (int64_t)u;
            if (s < 0) v->neg = 1, v->i = s; else v->u = (uint64_t)s;
            return 0;
        }
        case 0xCA: case 0xCB: {
            int w = b == 0xCA ? 4 : 8;
            if (end - *p < w) return -1;
            uint64_t u = be(d + *p, w);
            *p += w;
            if (w == 4) { uint32_t x = (uint32_t)u; float f; memcpy(&f, &x, 4); v->f = f; }
            else memcpy(&v->f, &u, 8);
            v->type = T_FLOAT;
            return 0;
        }
        case 0xD9: width = 1; break;
        case 0xDA: case 0xDC: case 0xDE: width = 2; break;
        case 0xDB: case 0xDD: case 0xDF: width = 4; break;
        default:
            if (n < 0) { v->type = T_BAD; return -1; }
    }
    if (width) {
        if (end - *p < width) return -1;
        int64_t w = (int64_t)be(d + *p, width);
        *p += width;
        if (b == 0xDC || b == 0xDD) { v->type = T_ARRAY, v->i = w; return w <= end - *p ? 0 : -1; }
        if (b == 0xDE || b == 0xDF) { v->type = T_MAP, v->i = w; return w <= (end - *p) / 2 ? 0 : -1; }
        n = w;
    }
    if (end - *p < n) return -1;
    for (int64_t k = 0; k < n; k++)
        if (d[*p + k] >= 0x80) { v->type = T_BAD; return -1; }
    v->type = T_STR, v->i = n, v->at = *p;
    *p += n;
    return 0;
}

/* Past one whole value (containers `depth` deep at most, maps of string keys). -1: anything else. */
static int skip(const uint8_t *d, int64_t *p, int64_t end, int depth) {
    val v;
    if (depth > DEPTH || head(d, p, end, &v) < 0) return -1;
    if (v.type == T_ARRAY) {
        for (int64_t k = 0; k < v.i; k++)
            if (skip(d, p, end, depth + 1) < 0) return -1;
    } else if (v.type == T_MAP) {
        for (int64_t k = 0; k < v.i; k++) {
            val key;
            if (head(d, p, end, &key) < 0 || key.type != T_STR || skip(d, p, end, depth + 1) < 0) return -1;
        }
    }
    return 0;
}

/* -- the schema's checks (records.py) ---------------------------------------------------------------- */
static int int_in(const val *v, int bools, int64_t lo, uint64_t max) {
    if (v->type == T_BOOL) return bools && lo <= v->i && (uint64_t)v->i <= max;
    if (v->type != T_INT) return 0;
    if (v->neg) return v->i >= lo;
    return (lo <= 0 || v->u >= (uint64_t)lo) && v->u <= max;
}

/* The value at *p as `code` has it (records._int, _str, _seconds, _sequence); 1: it is. */
static int one(int code, int64_t lo, uint64_t max, const uint8_t *d, int64_t *p, int64_t end) {
    val v;
    int64_t q = *p;
    if (skip(d, p, end, 1) < 0 || head(d, &q, end, &v) < 0) return 0;
    switch (code) {
        case R_INT: return int_in(&v, 1, lo, max);
        case R_STR: return v.type == T_STR;
        case R_SECONDS:
            if (v.type == T_FLOAT) return isfinite(v.f) && v.f >= 0 && v.f < 18446744073709551616.0;
            return v.type == T_INT && !v.neg;
        case R_SEQUENCE:
            if (v.type != T_ARRAY || v.i != 3) return 0;
            for (int k = 0; k < 3; k++)
                if (head(d, &q, end, &v) < 0 || v.type != T_INT || v.neg) return 0;
            return 1;
    }
    return 0;
}

static int checked(const rule *r, const uint8_t *d, int64_t p, int64_t end) {
    if (r->code != R_LIST) return one(r->code, r->lo, r->max, d, &p, end);
    val v;
    if (head(d, &p, end, &v) < 0 || v.type != T_ARRAY || v.i > r->most) return 0;
    for (int64_t k = 0; k < v.i; k++)
        if (!one(r->item, r->ilo, r->imax, d, &p, end)) return 0;
    return 1;
}

/* -- records ------------------------------------------------------------------------------------ */
typedef struct {
    int64_t at, end;
    int kind;          /* its "k" (a known kind's letter), else 0 */
    int ok;            /* records._well_formed: a known kind, no collective, the schema's checks pass */
    int more;          /* a checkpoint continued ("more" true) */
    int64_t key_at[MAX_PAIRS], key_len[MAX_PAIRS], value_at[MAX_PAIRS];
    int32_t pairs;
} record;

static int key_is(const uint8_t *d, const record *r, int k, const char *name, int64_t len) {
    return r->key_len[k] == len && memcmp(d + r->key_at[k], name, (size_t)len) == 0;
}

/* The record at *p: a map of distinct string keys, each value whole; its kind and checks. -1: not
 * one read the same way everywhere. */
static int read_record(const ends_state *st, const uint8_t *d, int64_t *p, int64_t end, record *r) {
    val v;
    r->at = *p, r->kind = 0, r->ok = 0, r->more = 0;
    if (head(d, p, end, &v) < 0 || v.type != T_MAP || v.i > MAX_PAIRS) return -1;
    r->pairs = (int32_t)v.i;
    for (int32_t k = 0; k < r->pairs; k++) {
        val key;
        if (head(d, p, end, &key) < 0 || key.type != T_STR) return -1;
        r->key_at[k] = key.at, r->key_len[k] = key.i, r->value_at[k] = *p;
        for (int32_t e = 0; e < k; e++)
            if (key_is(d, r, e, (const char *)d + key.at, key.i)) return -1;  /* a key twice */
        if (skip(d, p, end, 1) < 0) return -1;
        if (key.i == 1 && d[key.at] == 'k') {
            int64_t q = r->value_at[k];
            if (head(d, &q, end, &v) == 0 && v.type == T_STR && v.i == 1 && st->known[d[v.at]]) r->kind = d[v.at];
        }
    }
    r->end = *p;
    if (!r->kind || r->kind == 'C') return 0;
    const kind_rules *kr = &st->kinds[r->kind];
    uint32_t seen = 0;
    for (int32_t k = 0; k < r->pairs; k++)
        for (int32_t i = 0; i < kr->count; i++) {
            const rule *ru = &kr->rules[i];
            if (!key_is(d, r, k, ru->name, ru->len)) continue;
            if (ru->code == R_OTHER || !checked(ru, d, r->value_at[k], end)) return 0;
            seen |= 1u << i;
            if (r->kind == 'P' && ru->len == 4 && memcmp(ru->name, "more", 4) == 0) {
                int64_t q = r->value_at[k];
                head(d, &q, end, &v);
                r->more = v.type == T_BOOL ? v.i != 0 : v.u != 0;  /* (a flag: checked) */
            }
        }
    r->ok = (seen & kr->required) == kr->required;
    return 0;
}

/* -- the header (reader._header_of, check_header) --------------------------------------------------- */
/* The head of the value of key `name` (the record's keys are distinct), into *v; 0: no such key. */
static int value_of(const uint8_t *d, const record *r, const char *name, val *v) {
    for (int32_t k = 0; k < r->pairs; k++) {
        int64_t q = r->value_at[k];
        if (key_is(d, r, k, name, (int64_t)strlen(name))) return head(d, &q, r->end, v) == 0;
    }
    return 0;
}

static int usual_header(const ends_state *st, const uint8_t *d, int64_t n, ls_end *e) {
    int64_t at, end;
    uint64_t eid;
    if (n < 1 || frame_at(st, d, 0, n, &at, &end, &eid) != FR_OK || eid != 0) return 0;
    record r;
    val v, rank, world;
    int64_t p = at;
    if (read_record(st, d, &p, end, &r) < 0 || r.kind != 'H' || !r.ok) return 0;
    /* ints, not bools (check_header), the version known, 0 <= rank < world <= MAX_WORLD, the magic */
    if (!value_of(d, &r, "v", &v) || v.type != T_INT || v.neg || v.u > (uint64_t)st->version) return 0;
    if (!value_of(d, &r, "rank", &rank) || !value_of(d, &r, "world", &world)) return 0;
    if (rank.type != T_INT || world.type != T_INT || rank.neg || world.neg) return 0;
    if (!(rank.u < world.u && world.u <= (uint64_t)st->max_world)) return 0;
    if (!value_of(d, &r, "magic", &v) || v.type != T_STR || v.i != st->magic_len ||
        memcmp(d + v.at, st->magic, (size_t)v.i) != 0)
        return 0;
    e->hdr_at = r.at, e->hdr_end = r.end;
    return 1;
}

/* -- the tail (tail._frames_to_end, _tail_of, _tail_in) ------------------------------------------------ */
/* The payloads [at, end) of the frames chaining from some mark in d[0, n) to its end: how many
 * (0: none; -1: more than MAX_PAYLOADS). */
static int chain(const ends_state *st, const uint8_t *d, int64_t n, int64_t *at, int64_t *end) {
    const uint8_t *m = memchr(d, FRAME_MARK, (size_t)n);
    for (int tries = 0; m && tries < MAX_CANDIDATES; tries++) {
        int64_t pos = m - d, p = pos, a, b;
        uint64_t eid;
        int count = 0, found = FR_NONE;
        while (p < n) {
            found = frame_at(st, d, p, n, &a, &b, &eid);
            if (found != FR_OK) break;
            if (count >= MAX_PAYLOADS) return -1;
            at[count] = a, end[count] = b, count++;
            p = b;
        }
        if (count && (p == n || found == FR_TORN)) return count;
        m = pos + 1 < n ? memchr(d + pos + 1, FRAME_MARK, (size_t)(n - pos - 1)) : NULL;
    }
    return 0;
}

/* _tail_of(d[0, n)) for a usual tail: 1 (e's parts: offsets from `base`), 0 (none in these frames:
 * Python's None), -1 (anything else, the Python reader says what). */
static int tail_of(const ends_state *st, const uint8_t *d, int64_t n, int64_t base, ls_end *e) {
    int64_t at[MAX_PAYLOADS], end[MAX_PAYLOADS];
    int count = chain(st, d, n, at, end);
    if (count < 0) return -1;
    if (count == 0) return 0;
    int after_ok = 1;
    int64_t later = 0;  /* records in the payloads after this one */
    record recs[1];
    for (int k = count - 1; k >= 0; k--) {
        int64_t p = at[k], cp = -1;
        int ok_from = 1, cp_ok = 0, colls = 0, nrec = 0, more = 0, from_cp = 0;
        /* (each record's checks: those after the payload's last checkpoint must all pass) */
        while (p < end[k]) {
            if (++nrec > MAX_RECORDS || read_record(st, d, &p, end[k], recs) < 0) return -1;
            if (recs->kind == 'C') colls = 1;
            from_cp++;
            if (recs->kind == 'P') cp = recs->at, cp_ok = recs->ok, more = recs->more, ok_from = 1, from_cp = 1;
            else ok_from = ok_from && recs->ok && recs->kind != 'H';  /* (a header: rank < world, Python's) */
        }
        if (cp >= 0) {
            if (!(cp_ok && !more && ok_from && after_ok) || count - k > MAX_PARTS) return -1;
            e->nparts = count - k, e->records = from_cp + later;
            e->part_at[0] = base + cp, e->part_end[0] = base + end[k];
            for (int j = k + 1; j < count; j++) e->part_at[j - k] = base + at[j], e->part_end[j - k] = base + end[j];
            return 1;
        }
        if (colls) return -1;
        after_ok = after_ok && ok_from;
        later += nrec;
    }
    return 0;
}

static int usual_tail(const ends_state *st, const uint8_t *d, int64_t n, ls_end *e) {
    int found = n > SHORT ? tail_of(st, d + n - SHORT, SHORT, n - SHORT, e) : 0;
    if (found == 0) found = tail_of(st, d, n, 0, e);
    return found == 1;
}

/* -- the files ---------------------------------------------------------------------------------- */
/* reader.read_ends: a regular file's first head_cap bytes, its last tail_cap bytes; 1: read. */
static int read_ends(const char *path, uint8_t *head_buf, int64_t head_cap, uint8_t *tail_buf, int64_t tail_cap,
                     ls_end *e) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;  /* (a device is never opened) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    int ok = 0;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= 0) {
        int64_t size = (int64_t)sb.st_size, start = size > tail_cap ? size - tail_cap : 0;
        ssize_t h = pread(fd, head_buf, (size_t)(size < head_cap ? size : head_cap), 0);
        ssize_t t = -1;
        if (h == size) {  /* the whole file in the head: its tail too (one read) */
            memcpy(tail_buf, head_buf + start, (size_t)(size - start));
            t = (ssize_t)(size - start);
        } else if (h >= 0) {
            t = pread(fd, tail_buf, (size_t)(size - start), start);
        }
        if (t >= 0) e->head_len = h, e->tail_start = start, e->tail_len = t, ok = 1;
    }
    close(fd);
    return ok;
}

/* Each of `count` paths' summary into out[i], its bytes into buf at i * (head_cap + tail_cap). */
void ls_ends(void *p, const char *const *paths, int64_t count, uint8_t *buf, int64_t head_cap, int64_t tail_cap,
             ls_end *out) {
    const ends_state *st = p;
    for (int64_t i = 0; i < count; i++) {
        ls_end *e = &out[i];
        uint8_t *h = buf + i * (head_cap + tail_cap), *t = h + head_cap;
        memset(e, 0, sizeof(*e));
        if (!read_ends(paths[i], h, head_cap, t, tail_cap, e)) continue;
        e->read = 1;
        e->header = usual_header(st, h, e->head_len, e);
        e->tail = usual_tail(st, t, e->tail_len, e);
    }
}
