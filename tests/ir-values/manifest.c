/* Parser for the fixture manifest. Test code: it reports malformed lines with their number
 * instead of guessing, because a silently skipped case would be a test that cannot fail. */
#include "manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOK 24

bool mf_dtype(const char *name, nx_dtype *out)
{
    static const struct {
        const char *name;
        nx_dtype d;
    } rows[] = {{"f32", NX_DTYPE_F32},  {"f64", NX_DTYPE_F64},   {"i8", NX_DTYPE_I8},
                {"i16", NX_DTYPE_I16},  {"i32", NX_DTYPE_I32},   {"i64", NX_DTYPE_I64},
                {"u8", NX_DTYPE_U8},    {"bool", NX_DTYPE_BOOL}, {"f16", NX_DTYPE_F16},
                {"bf16", NX_DTYPE_BF16}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        if (strcmp(name, rows[i].name) == 0) {
            *out = rows[i].d;
            return true;
        }
    }
    return false;
}

static int split(char *line, char **tok)
{
    int n = 0;
    for (char *s = strtok(line, " \t\r\n"); s && n < MAX_TOK; s = strtok(NULL, " \t\r\n"))
        tok[n++] = s;
    return n;
}

static bool parse_shape(const char *s, mf_array *a)
{
    a->ndim = 0;
    if (strcmp(s, "-") == 0)
        return true;
    while (*s) {
        if (a->ndim == NX_MAX_DIMS)
            return false;
        char *end = NULL;
        a->shape[a->ndim++] = strtoll(s, &end, 10);
        if (end == s || (*end != ',' && *end != '\0'))
            return false;
        s = *end ? end + 1 : end;
    }
    return true;
}

static bool parse_array(char **tok, int n, mf_array *a)
{
    if (n != 4 || !mf_dtype(tok[1], &a->dtype) || !parse_shape(tok[2], a))
        return false;
    char *end = NULL;
    a->offset = strtoll(tok[3], &end, 10);
    a->nviews = 0;
    return *end == '\0' && a->offset >= 0 && a->offset % 8 == 0;
}

static bool parse_view(char **tok, int n, mf_array *a)
{
    if (n < 2 || a->nviews == MF_MAX_VIEWS || n - 2 > NX_MAX_DIMS)
        return false;
    mf_view *v = &a->views[a->nviews++];
    if (strcmp(tok[1], "perm") == 0)
        v->kind = MF_PERM;
    else if (strcmp(tok[1], "slice") == 0 && n == 6)
        v->kind = MF_SLICE;
    else if (strcmp(tok[1], "expand") == 0 && n == 4)
        v->kind = MF_EXPAND;
    else
        return false;
    for (int i = 2; i < n; i++)
        v->v[i - 2] = strtoll(tok[i], NULL, 10);
    return true;
}

static bool parse_line(mf_manifest *m, mf_case **cur, char **tok, int n)
{
    mf_case *c = *cur;
    if (strcmp(tok[0], "case") == 0) {
        if (c || n != 2 || strlen(tok[1]) >= sizeof c->name)
            return false;
        if (m->ncases == m->cap) {
            /* cases are large (fixed arrays): grow geometrically, never one at a time */
            int cap = m->cap ? 2 * m->cap : 256;
            mf_case *grown = realloc(m->cases, (size_t)cap * sizeof *grown);
            if (!grown)
                return false;
            m->cases = grown;
            m->cap = cap;
        }
        c = *cur = &m->cases[m->ncases++];
        memset(c, 0, sizeof *c);
        strcpy(c->name, tok[1]);
        return true;
    }
    if (!c)
        return false;
    if (strcmp(tok[0], "op") == 0 && n == 2 && strlen(tok[1]) < sizeof c->op) {
        strcpy(c->op, tok[1]);
        return true;
    }
    if (strcmp(tok[0], "attr") == 0 && n >= 2 && c->nattrs < MF_MAX_ATTRS && n - 2 <= MF_MAX_VALS &&
        strlen(tok[1]) < sizeof c->attrs[0].key) {
        mf_attr *a = &c->attrs[c->nattrs++];
        strcpy(a->key, tok[1]);
        a->nvals = n - 2;
        for (int i = 2; i < n; i++) {
            if (strlen(tok[i]) >= sizeof a->vals[0])
                return false;
            strcpy(a->vals[i - 2], tok[i]);
        }
        return true;
    }
    if (strcmp(tok[0], "in") == 0 && c->nin < MF_MAX_ARRAYS)
        return parse_array(tok, n, &c->in[c->nin++]);
    if (strcmp(tok[0], "view") == 0 && c->nin > 0)
        return parse_view(tok, n, &c->in[c->nin - 1]);
    if (strcmp(tok[0], "out") == 0 && c->nout < MF_MAX_ARRAYS)
        return parse_array(tok, n, &c->out[c->nout++]);
    if (strcmp(tok[0], "tol") == 0 && n == 3) {
        c->rtol = strtod(tok[1], NULL);
        c->atol = strtod(tok[2], NULL);
        return true;
    }
    if (strcmp(tok[0], "end") == 0 && n == 1) {
        *cur = NULL;
        return c->op[0] != '\0' && c->nout > 0;
    }
    return false;
}

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            unsigned char *grown = realloc(buf, cap + 1);
            if (!grown) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = grown;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

static size_t stored_size(nx_dtype d, bool widened)
{
    if (d == NX_DTYPE_BOOL || d == NX_DTYPE_I8 || d == NX_DTYPE_U8)
        return widened && d != NX_DTYPE_BOOL ? 8 : 1;
    if (widened || d == NX_DTYPE_F64 || d == NX_DTYPE_I64)
        return 8;
    return d == NX_DTYPE_I16 || d == NX_DTYPE_F16 || d == NX_DTYPE_BF16 ? 2 : 4;
}

size_t mf_bytes(const mf_array *a, bool widened)
{
    size_t n = stored_size(a->dtype, widened);
    for (int i = 0; i < a->ndim; i++)
        n *= (size_t)a->shape[i];
    return n;
}

static bool arrays_fit(const mf_case *c, size_t blob_len)
{
    for (int k = 0; k < c->nin + c->nout; k++) {
        bool out = k >= c->nin;
        const mf_array *a = out ? &c->out[k - c->nin] : &c->in[k];
        for (int i = 0; i < a->ndim; i++) {
            if (a->shape[i] < 0)
                return false;
        }
        if ((size_t)a->offset > blob_len || mf_bytes(a, out) > blob_len - (size_t)a->offset)
            return false;
    }
    return true;
}

bool mf_load(const char *dir, mf_manifest *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    char path[4096];
    snprintf(path, sizeof path, "%s/arrays.bin", dir);
    m->blob = read_file(path, &m->blob_len);
    if (!m->blob) {
        snprintf(err, errlen, "cannot read %s", path);
        return false;
    }
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    size_t len = 0;
    char *text = (char *)read_file(path, &len);
    if (!text) {
        snprintf(err, errlen, "cannot read %s", path);
        mf_free(m);
        return false;
    }
    mf_case *cur = NULL;
    int lineno = 0;
    bool ok = true;
    for (char *line = text, *next; ok && line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        lineno++;
        char *tok[MAX_TOK];
        int n = split(line, tok);
        if (n == 0 || tok[0][0] == '#')
            continue;
        if (!parse_line(m, &cur, tok, n)) {
            snprintf(err, errlen, "%s:%d: malformed manifest line", path, lineno);
            ok = false;
        }
    }
    if (ok && cur) {
        snprintf(err, errlen, "%s: last case has no 'end'", path);
        ok = false;
    }
    for (int i = 0; ok && i < m->ncases; i++) {
        if (!arrays_fit(&m->cases[i], m->blob_len)) {
            snprintf(err, errlen, "case %s: an array lies outside arrays.bin", m->cases[i].name);
            ok = false;
        }
    }
    free(text);
    if (!ok)
        mf_free(m);
    return ok;
}

bool mf_load_known(const char *path, mf_manifest *m, char *err, size_t errlen)
{
    size_t len = 0;
    char *text = (char *)read_file(path, &len);
    if (!text)
        return true;
    int lineno = 0;
    bool ok = true;
    for (char *line = text, *next; ok && line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        lineno++;
        char *tok[MAX_TOK];
        int n = split(line, tok);
        if (n == 0 || tok[0][0] == '#')
            continue;
        bool found = false;
        for (int i = 0; i < m->ncases && n >= 2; i++) {
            if (strcmp(m->cases[i].name, tok[0]) == 0) {
                /* the reference string lives as long as the manifest: keep a copy */
                size_t l = strlen(tok[1]) + 1;
                char *ref = malloc(l);
                if (!ref)
                    break;
                memcpy(ref, tok[1], l);
                free((void *)m->cases[i].known_bug);
                m->cases[i].known_bug = ref;
                found = true;
            }
        }
        if (!found) {
            snprintf(err, errlen, "%s:%d: no such case, or no bug reference", path, lineno);
            ok = false;
        }
    }
    free(text);
    return ok;
}

void mf_free(mf_manifest *m)
{
    for (int i = 0; i < m->ncases; i++)
        free((void *)m->cases[i].known_bug);
    free(m->cases);
    free(m->blob);
    memset(m, 0, sizeof *m);
}

const mf_attr *mf_attr_get(const mf_case *c, const char *key)
{
    for (int i = 0; i < c->nattrs; i++) {
        if (strcmp(c->attrs[i].key, key) == 0)
            return &c->attrs[i];
    }
    return NULL;
}

int mf_attr_ints(const mf_case *c, const char *key, int64_t *v, int max)
{
    const mf_attr *a = mf_attr_get(c, key);
    if (!a)
        return -1;
    int n = a->nvals < max ? a->nvals : max;
    for (int i = 0; i < n; i++)
        v[i] = strtoll(a->vals[i], NULL, 10);
    return n;
}

int64_t mf_attr_int(const mf_case *c, const char *key, int64_t def)
{
    int64_t v;
    return mf_attr_ints(c, key, &v, 1) == 1 ? v : def;
}

double mf_attr_double(const mf_case *c, const char *key, double def)
{
    const mf_attr *a = mf_attr_get(c, key);
    return a && a->nvals == 1 ? strtod(a->vals[0], NULL) : def;
}

const char *mf_attr_word(const mf_case *c, const char *key)
{
    const mf_attr *a = mf_attr_get(c, key);
    return a && a->nvals == 1 ? a->vals[0] : "";
}
