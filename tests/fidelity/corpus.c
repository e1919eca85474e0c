/* The golden corpus reader and case runner (corpus.h). Test code: plain malloc, no context
 * allocator, fixed-size buffers checked for truncation. */
#include "corpus.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

const char *gc_root(void)
{
    return NX_SOURCE_ROOT "/golden";
}

/* Splits text at spaces into up to max words of cap bytes; their count, -1 past max or cap. */
static int split(const char *text, char *words, size_t cap, int max)
{
    int n = 0;
    for (const char *p = text; *p;) {
        p += strspn(p, " \t");
        size_t len = strcspn(p, " \t");
        if (!len)
            break;
        if (n == max || len >= cap)
            return -1;
        memcpy(words + (size_t)n * cap, p, len);
        words[(size_t)n * cap + len] = 0;
        n++;
        p += len;
    }
    return n;
}

bool gc_read(const char *dir, const char *name, gc_case *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    snprintf(c->name, sizeof c->name, "%s", name);
    char path[GC_PATH + 16], line[2048];
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(c->err, sizeof c->err, "no manifest.txt");
        return false;
    }
    char inputs[512] = "", outputs[512] = "", options[1024] = "";
    bool have_in = false, have_out = false, have_opts = false;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *eq = strstr(line, " =");
        if (!eq || line[0] == '#')
            continue;
        *eq = 0;
        const char *v = eq + 2 + (eq[2] == ' ');
        if (!strcmp(line, "op"))
            snprintf(c->op, sizeof c->op, "%s", v);
        else if (!strcmp(line, "dtype"))
            snprintf(c->dtype, sizeof c->dtype, "%s", v);
        else if (!strcmp(line, "inputs"))
            have_in = snprintf(inputs, sizeof inputs, "%s", v) >= 0;
        else if (!strcmp(line, "output"))
            have_out = snprintf(outputs, sizeof outputs, "%s", v) >= 0;
        else if (!strcmp(line, "options"))
            have_opts = snprintf(options, sizeof options, "%s", v) >= 0;
        else if (!strcmp(line, "generator"))
            c->has_generator = *v != 0;
        else if (!strcmp(line, "numpy"))
            c->has_versions = *v != 0;
        else if (!strcmp(line, "contract"))
            snprintf(c->no_contract, sizeof c->no_contract, "%s", v);
        else if (!strcmp(line, "fd"))
            snprintf(c->no_fd, sizeof c->no_fd, "%s", v);
    }
    fclose(f);
    const char *missing = !c->op[0]     ? "op"
                          : !c->dtype[0] ? "dtype"
                          : !have_in     ? "inputs"
                          : !have_out    ? "output"
                          : !have_opts   ? "options"
                          : !c->has_generator ? "generator"
                          : !c->has_versions  ? "numpy (the generator's versions)"
                                              : NULL;
    if (missing) {
        snprintf(c->err, sizeof c->err, "manifest.txt has no '%s = ...' line", missing);
        return false;
    }
    c->nin = split(inputs, &c->in[0][0], sizeof c->in[0], NX_OP_MAX_IO);
    c->nout = split(outputs, &c->out[0][0], sizeof c->out[0], NX_OP_MAX_IO);
    char words[GC_MAX_OPTS][320];
    c->nopt = split(options, &words[0][0], sizeof words[0], GC_MAX_OPTS);
    if (c->nin < 0 || c->nout < 1 || c->nopt < 0) {
        snprintf(c->err, sizeof c->err, "manifest.txt: too many or too long %s",
                 c->nin < 0 ? "inputs" : c->nout < 1 ? "outputs (or none)" : "options");
        return false;
    }
    for (int i = 0; i < c->nopt; i++) {
        char *eqs = strchr(words[i], '=');
        size_t kl = eqs ? (size_t)(eqs - words[i]) : 0;
        if (!eqs || !kl || kl >= sizeof c->key[i] || strlen(eqs + 1) >= sizeof c->val[i]) {
            snprintf(c->err, sizeof c->err, "manifest.txt: option '%.64s' is not name=value",
                     words[i]);
            return false;
        }
        memcpy(c->key[i], words[i], kl);
        snprintf(c->val[i], sizeof c->val[i], "%s", eqs + 1);
    }
    return true;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

typedef struct walk {
    gc_case *cases;
    int n, cap;
} walk;

static int walk_dir(walk *w, const char *dir, const char *name)
{
    char path[GC_PATH + 16];
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    struct stat st;
    if (name[0] && stat(path, &st) == 0) {
        if (w->n == w->cap) {
            int cap = w->cap ? 2 * w->cap : 128;
            gc_case *grown = realloc(w->cases, (size_t)cap * sizeof *grown);
            if (!grown)
                return -1;
            w->cases = grown;
            w->cap = cap;
        }
        gc_read(dir, name, &w->cases[w->n++]);
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char sub[GC_PATH], subname[256];
        if (snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) >= (int)sizeof sub ||
            snprintf(subname, sizeof subname, "%s%s%s", name, name[0] ? "/" : "", e->d_name) >=
                (int)sizeof subname)
            continue;
        if (is_dir(sub))
            rc = walk_dir(w, sub, subname);
    }
    closedir(d);
    return rc;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const gc_case *)a)->name, ((const gc_case *)b)->name);
}

int gc_cases(gc_case **out)
{
    walk w = {0};
    *out = NULL;
    if (walk_dir(&w, gc_root(), "") != 0) {
        free(w.cases);
        return -1;
    }
    /* NX_TEST_GOLDEN_ONLY=<prefix> keeps the cases under golden/<prefix> (a family while it
     * is written; the suite runs them all) */
    const char *only = getenv("NX_TEST_GOLDEN_ONLY");
    if (only && *only) {
        int kept = 0;
        for (int i = 0; i < w.n; i++)
            if (strncmp(w.cases[i].name, only, strlen(only)) == 0)
                w.cases[kept++] = w.cases[i];
        w.n = kept;
    }
    if (w.n)
        qsort(w.cases, (size_t)w.n, sizeof *w.cases, by_name);
    *out = w.cases;
    return w.n;
}

const nx_op_desc *gc_desc(const gc_case *c)
{
    const nx_op_info *info = nx_op_find(c->op);
    return info ? nx_op_desc_find(info->name) : NULL;
}

bool gc_dtype(const gc_case *c, nx_dtype *out)
{
    return nx_dtype_from_name(c->dtype, out);
}

const char *gc_option(const gc_case *c, const char *key)
{
    for (int i = 0; i < c->nopt; i++)
        if (strcasecmp(c->key[i], key) == 0)
            return c->val[i];
    return NULL;
}

void gc_free(int n, nx_tensor **t)
{
    for (int i = 0; i < n; i++) {
        nx_tensor_free(t[i]);
        t[i] = NULL;
    }
}

nx_status gc_load(nx_ctx *ctx, const gc_case *c, bool outputs, nx_tensor **t)
{
    int n = outputs ? c->nout : c->nin;
    for (int i = 0; i < n; i++)
        t[i] = NULL;
    for (int i = 0; i < n; i++) {
        char path[GC_PATH + 80];
        snprintf(path, sizeof path, "%s/%s", c->dir, outputs ? c->out[i] : c->in[i]);
        nx_status st = nx_npy_read(ctx, path, &t[i]);
        if (st != NX_OK) {
            gc_free(i, t);
            return st;
        }
    }
    return NX_OK;
}

static const nx_op_opt *schema_opt(const nx_op_info *info, const char *key)
{
    for (int i = 0; i < info->nopts; i++)
        if (strcasecmp(info->opts[i].name, key) == 0)
            return &info->opts[i];
    return NULL;
}

/* The call's options: the manifest's (a TENSOR option's file made a path into the case folder),
 * then backend, then driver when the op has a driver option and one is asked for. */
typedef struct call_opts {
    int n;
    const char *keys[GC_MAX_OPTS + 2], *vals[GC_MAX_OPTS + 2];
    char paths[GC_MAX_OPTS][GC_PATH + 260];
} call_opts;

static void make_opts(call_opts *o, const gc_case *c, const nx_op_info *info, const char *backend,
                      const char *driver)
{
    o->n = 0;
    bool has_driver = schema_opt(info, "driver") != NULL;
    for (int i = 0; i < c->nopt; i++) {
        const nx_op_opt *s = schema_opt(info, c->key[i]);
        if (driver && has_driver && strcasecmp(c->key[i], "driver") == 0)
            continue; /* the driver asked for replaces the manifest's */
        o->keys[o->n] = c->key[i];
        o->vals[o->n] = c->val[i];
        if (s && s->type == NX_OPT_TENSOR && strcasecmp(c->val[i], "none") != 0) {
            snprintf(o->paths[i], sizeof o->paths[i], "%s/%s", c->dir, c->val[i]);
            o->vals[o->n] = o->paths[i];
        }
        o->n++;
    }
    if (backend) {
        o->keys[o->n] = "backend";
        o->vals[o->n++] = backend;
    }
    if (driver && has_driver) {
        o->keys[o->n] = "driver";
        o->vals[o->n++] = driver;
    }
}

nx_status gc_run(nx_ctx *ctx, const gc_case *c, const nx_op_info *info, const char *backend,
                 const char *driver, const nx_tensor *const *in, nx_tensor **out)
{
    call_opts *o = malloc(sizeof *o);
    if (!o)
        return NX_ERR_NOMEM;
    make_opts(o, c, info, backend, driver);
    nx_status st = nx_op_call(ctx, info->name, c->nin, in, o->n, o->keys, o->vals,
                              info->noutputs, out);
    free(o);
    return st;
}

nx_status gc_vjp(nx_ctx *ctx, const gc_case *c, const nx_op_info *info, const char *backend,
                 const nx_tensor *const *in, const nx_tensor *const *dy, nx_tensor **dx)
{
    call_opts *o = malloc(sizeof *o);
    if (!o)
        return NX_ERR_NOMEM;
    make_opts(o, c, info, backend, NULL);
    nx_status st = nx_op_vjp(ctx, info->name, c->nin, in, o->n, o->keys, o->vals,
                             info->noutputs, dy, dx);
    free(o);
    return st;
}

double gc_at(const nx_tensor *t, int64_t i)
{
    const void *d = nx_tensor_data(t);
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_F32:
        return ((const float *)d)[i];
    case NX_DTYPE_F64:
        return ((const double *)d)[i];
    case NX_DTYPE_I8:
        return ((const int8_t *)d)[i];
    case NX_DTYPE_I16:
        return ((const int16_t *)d)[i];
    case NX_DTYPE_I32:
        return ((const int32_t *)d)[i];
    case NX_DTYPE_I64:
        return (double)((const int64_t *)d)[i];
    case NX_DTYPE_U8:
    case NX_DTYPE_BOOL:
        return ((const uint8_t *)d)[i];
    case NX_DTYPE_U32:
        return ((const uint32_t *)d)[i];
    case NX_DTYPE_U64:
        return (double)((const uint64_t *)d)[i];
    default:
        return NAN;
    }
}

/* An integer or bool element exactly: its sign and magnitude (u64 and i64 beyond 2^53 are not
 * exact as doubles). */
static void int_at(const nx_tensor *t, int64_t i, bool *neg, uint64_t *mag)
{
    const void *d = nx_tensor_data(t);
    int64_t v;
    switch (nx_tensor_dtype(t)) {
    case NX_DTYPE_U64:
        *neg = false;
        *mag = ((const uint64_t *)d)[i];
        return;
    case NX_DTYPE_U32:
        v = ((const uint32_t *)d)[i];
        break;
    case NX_DTYPE_I64:
        v = ((const int64_t *)d)[i];
        break;
    case NX_DTYPE_I32:
        v = ((const int32_t *)d)[i];
        break;
    case NX_DTYPE_I16:
        v = ((const int16_t *)d)[i];
        break;
    case NX_DTYPE_I8:
        v = ((const int8_t *)d)[i];
        break;
    default:
        v = ((const uint8_t *)d)[i];
        break;
    }
    *neg = v < 0;
    *mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
}

/* How far past its tolerance a float element is (<= 0: within). */
static double excess(double g, double w, double rtol, double atol)
{
    if (isnan(g) || isnan(w))
        return isnan(g) && isnan(w) ? 0 : INFINITY;
    if (isinf(g) || isinf(w))
        return g == w ? 0 : INFINITY;
    return fabs(g - w) - (atol + rtol * fabs(w));
}

bool gc_compare(const nx_tensor *got, const nx_tensor *want, nx_dtype float_dtype, double rtol,
                double atol, char *msg, size_t len)
{
    int nd = nx_tensor_ndim(want);
    nx_dtype gd = nx_tensor_dtype(got), wd = nx_tensor_dtype(want);
    if (nx_tensor_ndim(got) != nd ||
        memcmp(nx_tensor_shape(got), nx_tensor_shape(want), (size_t)nd * sizeof(int64_t))) {
        snprintf(msg, len, "shape differs from the reference's (ndim %d vs %d, numel %lld vs %lld)",
                 nx_tensor_ndim(got), nd, (long long)nx_tensor_numel(got),
                 (long long)nx_tensor_numel(want));
        return false;
    }
    bool exact = !nx_dtype_is_float(gd) || !nx_dtype_is_float(wd);
    if (nx_dtype_is_float(gd) && nx_dtype_is_float(float_dtype) && gd != float_dtype) {
        snprintf(msg, len, "result is %s; the case's dtype is %s", nx_dtype_name(gd),
                 nx_dtype_name(float_dtype));
        return false;
    }
    int64_t n = nx_tensor_numel(want), worst = -1;
    double worst_x = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = gc_at(got, i), w = gc_at(want, i);
        double x;
        if (exact && !nx_dtype_is_float(gd) && !nx_dtype_is_float(wd)) {
            bool gn, wn;
            uint64_t gm, wm;
            int_at(got, i, &gn, &gm);
            int_at(want, i, &wn, &wm);
            x = gn == wn && gm == wm ? 0 : INFINITY;
        } else
            x = exact ? (g == w ? 0 : INFINITY) : excess(g, w, rtol, atol);
        if (x > 0 && (worst < 0 || x > worst_x)) {
            worst = i;
            worst_x = x;
        }
    }
    if (worst < 0)
        return true;
    double g = gc_at(got, worst), w = gc_at(want, worst);
    if (exact)
        snprintf(msg, len, "worst element %lld of %lld is %.17g, reference %.17g (%s vs %s: exact)",
                 (long long)worst, (long long)n, g, w, nx_dtype_name(gd), nx_dtype_name(wd));
    else
        snprintf(msg, len,
                 "worst element %lld of %lld is %.17g, reference %.17g (|diff| %.3g > atol %g + "
                 "rtol %g * |ref|)",
                 (long long)worst, (long long)n, g, w, fabs(g - w), atol, rtol);
    return false;
}

const nx_divergent_op *gc_divergent(const char *site)
{
    size_t n = 0;
    const nx_divergent_op *rows = nx_divergent_ops(&n);
    for (size_t i = 0; site && i < n; i++)
        if (strcmp(rows[i].op, site) == 0)
            return &rows[i];
    return NULL;
}

bool gc_cuda_usable(nx_ctx *ctx)
{
    nx_system_info info;
    if (nx_system_info_get(ctx, &info) != NX_OK || !info.nvrtc_found)
        return false;
    for (int i = 0; i < info.gpu_count && i < NX_MAX_GPUS; i++)
        if (info.gpus[i].usable)
            return true;
    return false;
}
