/* The op table and the one runner behind every public op (ops/op.h, include/nitrix-op.h).
 *
 * The table is ops/ops.def expanded twice: once into the descriptors' addresses, once into the
 * rows' text. The public rows (nx_op_info) join the two: the row gives the name, family, summary,
 * inputs, outputs, differentiable flag and driver site; the descriptor gives the option schema
 * and the aliases. They are assembled once, on first use, into static storage (no allocation).
 *
 * The runner: argument checks -> desc->check -> placement -> key -> cache -> run. Compiled
 * programs live in the context's cache under a key built from the schema (every option by value),
 * the inputs' dtypes and shapes, the resolved backend, the reproducible mode, the stage and
 * whether the program is a vjp; an op adds only what the schema cannot see. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "program/program.h"
#include "ir/ir.h"
#include "nitrix-ops.h"
#include "ops/op.h"

/* ---- the table -----------------------------------------------------------------------------*/

typedef struct op_row {
    const char *name, *family, *inputs, *outputs;
    bool diff;
    const char *driver, *summary;
} op_row;

static const op_row rows[] = {
#define NX_OP(name, family, inputs, outputs, diff, driver, summary)                                \
    {#name, #family, inputs, outputs, diff, driver, summary},
#include "ops.def"
#undef NX_OP
    {NULL, NULL, NULL, NULL, false, NULL, NULL},
};

static const nx_op_desc *const descs[] = {
#define NX_OP(name, family, inputs, outputs, diff, driver, summary) &nx_op_##name,
#include "ops.def"
#undef NX_OP
    NULL,
};

#define NROWS (sizeof rows / sizeof rows[0] - 1)
#define NAMES_CAP 256 /* bytes of one row's input or output names */

/* The public rows, assembled once. Slot NROWS is a placeholder so an empty table still declares
 * arrays of positive size. */
static nx_op_info infos[NROWS + 1];
static const nx_op_info *info_ptrs[NROWS + 1];
static char name_text[NROWS + 1][2][NAMES_CAP];
static const char *name_ptrs[NROWS + 1][2][NX_OP_MAX_IO + 1];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* Splits "x structure" into words in place; at most NX_OP_MAX_IO of them (the self-check test
 * compares the count with the row's text, so a longer list is caught there). A word ending in
 * `?` is an optional input: the mark is dropped from the name and *nrequired gets the index of
 * the first one. Optional inputs are trailing: every input from the first `?` on is optional.
 * nrequired may be NULL. */
static int split_names(const char *text, char *buf, const char **out, int *nrequired)
{
    snprintf(buf, NAMES_CAP, "%s", text ? text : "");
    int n = 0, req = -1;
    char *p = buf;
    while (*p && n < NX_OP_MAX_IO) {
        while (*p == ' ')
            *p++ = '\0';
        if (!*p)
            break;
        out[n++] = p;
        while (*p && *p != ' ')
            p++;
        if (p[-1] == '?') {
            p[-1] = '\0';
            if (req < 0)
                req = n - 1;
        }
    }
    out[n] = NULL;
    if (nrequired)
        *nrequired = req < 0 ? n : req;
    return n;
}

static void table_init(void)
{
    for (size_t i = 0; i < NROWS; i++) {
        const op_row *r = &rows[i];
        const nx_op_desc *d = descs[i];
        nx_op_info *info = &infos[i];
        info->name = r->name;
        info->family = r->family;
        info->summary = r->summary;
        info->ninputs = split_names(r->inputs, name_text[i][0], name_ptrs[i][0],
                                    &info->nrequired);
        info->inputs = name_ptrs[i][0];
        info->noutputs = split_names(r->outputs, name_text[i][1], name_ptrs[i][1], NULL);
        info->outputs = name_ptrs[i][1];
        info->nopts = d->info.nopts;
        info->opts = d->info.opts;
        info->differentiable = r->diff;
        info->driver_site = r->driver;
        info->aliases = d->info.aliases;
        info_ptrs[i] = info;
    }
}

static void table(void)
{
    pthread_once(&table_once, table_init);
}

const nx_op_info *const *nx_ops(size_t *count)
{
    table();
    if (count)
        *count = NROWS;
    return info_ptrs;
}

const nx_op_desc *const *nx_op_descs(size_t *count)
{
    if (count)
        *count = NROWS;
    return descs;
}

static int row_of(const nx_op_desc *d)
{
    for (size_t i = 0; i < NROWS; i++)
        if (descs[i] == d)
            return (int)i;
    return -1;
}

const nx_op_info *nx_op_desc_info(const nx_op_desc *d)
{
    table();
    int i = row_of(d);
    return i < 0 ? NULL : &infos[i];
}

static int find_row(const char *name)
{
    if (!name)
        return -1;
    for (size_t i = 0; i < NROWS; i++) {
        if (strcasecmp(name, rows[i].name) == 0)
            return (int)i;
        for (const char *const *a = descs[i]->info.aliases; a && *a; a++)
            if (strcasecmp(name, *a) == 0)
                return (int)i;
    }
    return -1;
}

const nx_op_info *nx_op_find(const char *name)
{
    table();
    int i = find_row(name);
    return i < 0 ? NULL : &infos[i];
}

const nx_op_desc *nx_op_desc_find(const char *name)
{
    int i = find_row(name);
    return i < 0 ? NULL : descs[i];
}

bool nx_op_tolerance(const nx_op_desc *d, nx_dtype dtype, const char *backend, const char *driver,
                     double *rtol, double *atol)
{
    int best = -1, best_score = -1;
    for (int i = 0; d && i < d->ntols; i++) {
        const nx_op_tol *t = &d->tols[i];
        if (t->dtype != dtype)
            continue;
        if (t->backend && (!backend || strcasecmp(t->backend, backend) != 0))
            continue;
        if (t->driver && (!driver || strcasecmp(t->driver, driver) != 0))
            continue;
        /* A named backend outranks a named driver: the backend decides the arithmetic. */
        int score = (t->backend ? 2 : 0) + (t->driver ? 1 : 0);
        if (score > best_score) {
            best = i;
            best_score = score;
        }
    }
    if (best < 0)
        return false;
    if (rtol)
        *rtol = d->tols[best].rtol;
    if (atol)
        *atol = d->tols[best].atol;
    return true;
}

bool nx_op_tolerance_get(const char *name, nx_dtype dtype, const char *backend,
                         const char *driver, double *rtol, double *atol)
{
    const nx_op_desc *d = name ? nx_op_desc_find(name) : NULL;
    return d && nx_op_tolerance(d, dtype, backend, driver, rtol, atol);
}

/* ---- keys ----------------------------------------------------------------------------------*/

/* A tensor option becomes part of what the program computes (a structuring element's values
 * become graph constants), so its bytes are keyed. A device tensor is keyed by its address:
 * reading it back would cost a copy, and an op reading a device tensor's values must copy it
 * anyway. */
static void key_tensor_value(nx_rt_cache_blob *b, const char *name, const nx_tensor *t)
{
    nx_rt_cache_blob_tensor(b, name, t);
    if (!t)
        return;
    if (nx_tensor_device(t) != NX_DEVICE_HOST) {
        uintptr_t addr = (uintptr_t)t;
        nx_rt_cache_blob_bytes(b, name, &addr, sizeof addr);
        return;
    }
    nx_tensor *c = NULL;
    if (nx_tensor_contiguous(t, &c) != NX_OK) {
        b->failed = true;
        return;
    }
    nx_rt_cache_blob_bytes(b, name, nx_tensor_data(c),
                           (size_t)nx_tensor_numel(c) * nx_dtype_size(nx_tensor_dtype(c)));
    nx_tensor_free(c);
}

static void key_option(nx_rt_cache_blob *b, const nx_op_opt *o, const nx_op_field *f,
                       const void *opts)
{
    const char *p = (const char *)opts + f->offset;
    switch (o->type) {
    case NX_OPT_STRING: {
        const char *s;
        memcpy(&s, p, sizeof s);
        nx_rt_cache_blob_str(b, o->name, s ? s : "\x01(absent)");
        break;
    }
    case NX_OPT_SEMIRING: {
        /* A built-in's name says everything; a user semiring's identity is the op's key(). */
        const nx_semiring *sr;
        memcpy(&sr, p, sizeof sr);
        nx_semiring_info si = {0};
        if (sr)
            nx_semiring_get_info(sr, &si);
        nx_rt_cache_blob_str(b, o->name, !sr ? "\x01(absent)" : si.name ? si.name : "");
        nx_rt_cache_blob_i64(b, o->name, sr ? (int64_t)si.kind : -1);
        break;
    }
    case NX_OPT_TENSOR: {
        const nx_tensor *t;
        memcpy(&t, p, sizeof t);
        key_tensor_value(b, o->name, t);
        break;
    }
    default:
        nx_rt_cache_blob_bytes(b, o->name, p, f->size);
        break;
    }
    if (f->count_offset != NX_OP_NO_FIELD) {
        int k;
        memcpy(&k, (const char *)opts + f->count_offset, sizeof k);
        nx_rt_cache_blob_i64(b, "count", k);
    }
}

static void key_call(nx_rt_cache_blob *b, const nx_op_args *c, const char *stage)
{
    const nx_op_desc *d = c->desc;
    nx_rt_cache_blob_str(b, "op", c->info->name);
    nx_rt_cache_blob_str(b, "stage", stage ? stage : "");
    nx_rt_cache_blob_i64(b, "vjp", c->dy != NULL);
    for (int i = 0; d->fields && i < d->info.nopts; i++)
        key_option(b, &d->info.opts[i], &d->fields[i], c->opts);
    for (int i = 0; i < c->info->ninputs; i++)
        nx_rt_cache_blob_tensor(b, "in", c->in[i]);
    for (int i = 0; c->dy && i < c->info->noutputs; i++)
        nx_rt_cache_blob_tensor(b, "dy", c->dy[i]);
    nx_rt_cache_blob_i64(b, "backend", c->backend);
    nx_rt_cache_blob_i64(b, "reproducible", nx_ctx_reproducible(c->ctx));
    if (d->key)
        d->key(b, c);
}

/* ---- programs ------------------------------------------------------------------------------*/

/* What the cache holds for an op: the program and, for a vjp, which of its inputs (in declared
 * order) were parameters, so the gradients can be handed back per input. */
typedef struct op_prog {
    nx_ctx *ctx;
    nx_program *p;
    int ninputs;   /* the stage's own inputs (before the cotangents) */
    int nwrt;      /* gradients the program gives */
    int wrt[NX_OP_MAX_IO * 2]; /* input index of each gradient */
} op_prog;

static void op_prog_destroy(void *user, void *obj)
{
    (void)user;
    op_prog *o = obj;
    nx_program_free(o->p);
    nx_rt_free(o->ctx, o, sizeof *o);
}

typedef struct stage_call {
    const nx_op_args *c;
    nx_op_stage_fn build;
    const void *user;
    int nout;
} stage_call;

/* For a vjp: cotangent inputs after the stage's own, and the gradients of its parameters. */
static nx_status add_vjp(nx_graph *g, const nx_op_args *c, int nout, nx_node *outs,
                         op_prog *o)
{
    nx_node wrt[NX_OP_MAX_IO * 2], dy[NX_OP_MAX_IO];
    o->ninputs = (int)g->ninputs;
    o->nwrt = 0;
    for (uint32_t i = 0; i < g->ninputs; i++) {
        const nx_ir_node *n = nx_ir_node_at(&g->s, g->inputs[i]);
        if (n->op != NX_PRIM_PARAMETER)
            continue;
        if (o->nwrt >= NX_OP_MAX_IO * 2)
            return nx_rt_error(c->ctx, NX_ERR_INTERNAL, "%s: more than %d parameters", c->who,
                               NX_OP_MAX_IO * 2);
        o->wrt[o->nwrt] = (int)i;
        wrt[o->nwrt++] = g->inputs[i];
    }
    /* An integer or bool output (an op's indices or pads) carries no gradient: its cotangent is
     * still an input of the program, and zero (NX_NONE) to nx_graph_vjp. */
    for (int i = 0; i < nout; i++) {
        const nx_tensor *t = c->dy[i];
        dy[i] = nx_input(g, "dy", nx_tensor_dtype(t), nx_tensor_ndim(t), nx_tensor_shape(t));
        if (!nx_dtype_is_float(nx_tensor_dtype(t)))
            dy[i] = NX_NONE;
    }
    if (nx_graph_status(g) != NX_OK)
        return nx_graph_status(g);
    if (o->nwrt == 0)
        return nx_rt_error(c->ctx, NX_ERR_UNSUPPORTED,
                           "%s: no input of this call carries a gradient (integer inputs "
                           "only); expected a float input to differentiate",
                           c->who);
    /* an integer or bool output (an index, a status such as cholesky's info) carries no
     * gradient: its cotangent input is declared, so the program's arity is the same, and read
     * as zero */
    nx_node cot[NX_OP_MAX_IO];
    for (int i = 0; i < nout; i++)
        cot[i] = nx_ir_is_float(nx_tensor_dtype(c->dy[i])) ? dy[i] : NX_NONE;
    nx_node grads[NX_OP_MAX_IO * 2];
    nx_status st = nx_graph_vjp(g, nout, outs, cot, o->nwrt, wrt, grads);
    if (st == NX_OK)
        memcpy(outs, grads, (size_t)o->nwrt * sizeof(nx_node));
    return st;
}

static nx_status compile_stage(const stage_call *s, op_prog *o)
{
    const nx_op_args *c = s->c;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(c->ctx, &g);
    if (st != NX_OK)
        return st;
    nx_node outs[NX_OP_MAX_IO * 2] = {0};
    st = s->build(g, c, s->user, s->nout, outs);
    if (st == NX_OK && nx_graph_status(g) != NX_OK)
        st = nx_graph_status(g);
    for (int i = 0; st == NX_OK && i < s->nout; i++)
        if (outs[i] == NX_NONE)
            st = nx_rt_error(c->ctx, NX_ERR_INTERNAL, "%s: the builder left output %d unset",
                             c->who, i);
    int n = s->nout;
    o->ninputs = (int)g->ninputs;
    if (st == NX_OK && c->dy) {
        st = add_vjp(g, c, s->nout, outs, o);
        n = o->nwrt;
    }
    if (st == NX_OK) {
        nx_compile_opts co = {.backend = c->backend, .n_outputs = n, .outputs = outs};
        st = nx_graph_compile(g, &co, &o->p);
    }
    nx_graph_free(g);
    return st;
}

static nx_status stage_program(const nx_op_args *c, const char *stage,
                               void (*key)(nx_rt_cache_blob *b, const void *user),
                               nx_op_stage_fn build, const void *user, int nout, op_prog **out)
{
    *out = NULL;
    if (nout < 1 || nout > NX_OP_MAX_IO)
        return nx_rt_error(c->ctx, NX_ERR_INTERNAL, "%s: stage %s has %d outputs; expected 1..%d",
                           c->who, stage ? stage : "", nout, NX_OP_MAX_IO);
    nx_rt_cache_blob b;
    nx_rt_cache_blob_init(&b, c->ctx);
    key_call(&b, c, stage);
    if (key)
        key(&b, user);
    nx_rt_cache_key k;
    nx_rt_cache *cache = NULL;
    nx_status st = nx_rt_cache_blob_key(&b, &k);
    if (st != NX_OK)
        st = nx_rt_nomem(c->ctx, "op program: cache key", b.len);
    else
        st = nx_rt_cache_of(c->ctx, &cache);
    op_prog *o = st == NX_OK ? nx_rt_cache_find(cache, &k) : NULL;
    if (st == NX_OK && !o) {
        o = nx_rt_calloc(c->ctx, 1, sizeof *o);
        if (!o)
            st = nx_rt_nomem(c->ctx, "op program", sizeof *o);
        else {
            o->ctx = c->ctx;
            stage_call s = {.c = c, .build = build, .user = user, .nout = nout};
            nx_rt_progress_stage(c->progress, "compiling");
            st = compile_stage(&s, o);
            nx_rt_progress_stage(c->progress, "running");
            void *winner = NULL;
            if (st == NX_OK)
                st = nx_rt_cache_insert(cache, &k, o, op_prog_destroy, NULL, &winner);
            if (st != NX_OK)
                op_prog_destroy(NULL, o);
            o = st == NX_OK ? winner : NULL;
        }
    }
    nx_rt_cache_blob_free(&b);
    *out = o;
    return st;
}

nx_status nx_op_program(const nx_op_args *c, const char *stage,
                        void (*key)(nx_rt_cache_blob *b, const void *user), nx_op_stage_fn build,
                        const void *user, int nout, nx_program **out)
{
    if (!out)
        return nx_rt_error(c ? c->ctx : NULL, NX_ERR_INVALID_ARG, "nx_op_program: out is NULL");
    *out = NULL;
    if (!c || !build)
        return nx_rt_error(c ? c->ctx : NULL, NX_ERR_INVALID_ARG,
                           "nx_op_program: the call and the builder must be non-NULL");
    op_prog *o = NULL;
    nx_status st = stage_program(c, stage, key, build, user, nout, &o);
    if (st == NX_OK)
        *out = o->p;
    return st;
}

/* The whole op as one program: the descriptor's builder. */
static nx_status whole_build(nx_graph *g, const nx_op_args *c, const void *user, int nout,
                             nx_node *outs)
{
    (void)user;
    (void)nout;
    return c->desc->build(g, c, outs);
}

static nx_status run_whole(const nx_op_args *c, nx_tensor **out)
{
    int nin = c->info->ninputs, nout = c->info->noutputs;
    op_prog *o = NULL;
    nx_status st = stage_program(c, NULL, NULL, whole_build, NULL, nout, &o);
    if (st != NX_OK)
        return st;
    /* The builder declares the inputs that are present, in row order: absent optional inputs
     * (NULL) are no program inputs, and row[k] maps the program's k-th input back. */
    const nx_tensor *args[NX_OP_MAX_IO * 2];
    int row[NX_OP_MAX_IO], npresent = 0;
    for (int i = 0; i < nin; i++)
        if (c->in[i]) {
            row[npresent] = i;
            args[npresent++] = c->in[i];
        }
    if (o->ninputs != npresent)
        return nx_rt_error(c->ctx, NX_ERR_INTERNAL,
                           "%s: the builder declared %d inputs; the call has %d", c->who,
                           o->ninputs, npresent);
    for (int i = 0; c->dy && i < nout; i++)
        args[npresent + i] = c->dy[i];
    if (!c->dy)
        return nx_program_run(o->p, args, out);
    nx_tensor *grads[NX_OP_MAX_IO * 2] = {0};
    if ((st = nx_program_run(o->p, args, grads)) != NX_OK)
        return st;
    for (int i = 0; i < o->nwrt; i++)
        out[row[o->wrt[i]]] = grads[i];
    return NX_OK;
}

/* ---- the runner ----------------------------------------------------------------------------*/

/* Placement: the caller's backend, else the context's NITRIX_BACKEND, else auto. Device inputs
 * need the cuda backend (its plans read them in place and leave the results on the device). */
static nx_status place(nx_op_args *c, nx_backend requested)
{
    if ((unsigned)requested >= NX_BACKEND_COUNT)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "%s: backend %d is not a backend; expected auto, cpu, cuda or ref",
                           c->who, (int)requested);
    if (c->desc->flags & NX_OP_HOST) {
        c->backend = requested != NX_BACKEND_AUTO ? requested : nx_ctx_backend(c->ctx);
        return NX_OK;
    }
    nx_status st = nx_program_resolve_backend(c->ctx, requested, &c->backend);
    if (st != NX_OK)
        return st;
    if (c->backend == NX_BACKEND_CUDA)
        return NX_OK;
    const nx_tensor *const *lists[2] = {c->in, c->dy};
    const char *const *names[2] = {c->info->inputs, NULL};
    int counts[2] = {c->info->ninputs, c->dy ? c->info->noutputs : 0};
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < counts[l]; i++)
            if (lists[l][i] && nx_tensor_device(lists[l][i]) != NX_DEVICE_HOST)
                return nx_rt_error(c->ctx, NX_ERR_UNSUPPORTED,
                                   "%s: %s%s is a CUDA device tensor but the op runs on the %s "
                                   "backend; expected host tensors, or the cuda backend",
                                   c->who, l ? "d" : "", l ? c->info->outputs[i] : names[l][i],
                                   nx_backend_name(c->backend));
    return NX_OK;
}

typedef struct run_args {
    const nx_op_desc *d;
    const char *who;
    const nx_tensor *const *in;
    const void *opts;
    const nx_tensor *const *dy;
    nx_backend backend; /* used when the option struct has no backend field */
    nx_tensor **out;
} run_args;

static nx_status check_tensors(nx_ctx *ctx, const char *who, const char *what,
                               const nx_tensor *const *ts, int n, const char *const *names,
                               const char *prefix)
{
    if (n > 0 && !ts)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL; expected %d tensors", who,
                           what, n);
    for (int i = 0; i < n; i++)
        if (!ts[i])
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s%s is NULL", who, prefix,
                               names[i]);
    return NX_OK;
}

static nx_status run(nx_ctx *ctx, const run_args *a)
{
    const nx_op_desc *d = a->d;
    const nx_op_info *info = d ? nx_op_desc_info(d) : NULL;
    char who[96];
    if (a->who)
        snprintf(who, sizeof who, "%s", a->who);
    else
        snprintf(who, sizeof who, "nx_%s%s", info ? info->name : "op", a->dy ? "_vjp" : "");
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!a->out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who, a->dy ? "dx" : "out");
    if (!info)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: the descriptor is not in the op table",
                           who);
    int nres = a->dy ? info->ninputs : info->noutputs;
    for (int i = 0; i < nres; i++)
        a->out[i] = NULL;
    if (a->dy && !info->differentiable)
        return nx_rt_error(ctx, NX_ERR_UNSUPPORTED, "%s: %s is not differentiable", who,
                           info->name);
    /* Optional inputs (after nrequired) may be NULL: absent. */
    nx_status st = info->ninputs > 0 && !a->in
                       ? nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: inputs is NULL; expected %d "
                                     "tensors", who, info->ninputs)
                       : check_tensors(ctx, who, "inputs", a->in, info->nrequired, info->inputs,
                                       "");
    if (st == NX_OK && a->dy)
        st = check_tensors(ctx, who, "dy", a->dy, info->noutputs, info->outputs, "d");
    if (st != NX_OK)
        return st;
    void *zeroed = NULL;
    const void *opts = a->opts;
    if (!opts) {
        /* A zeroed struct is every default. */
        zeroed = nx_rt_calloc(ctx, 1, d->opts_size ? d->opts_size : 1);
        if (!zeroed)
            return nx_rt_nomem(ctx, who, d->opts_size);
        opts = zeroed;
    }
    nx_backend requested = a->backend;
    if (d->backend_offset != NX_OP_NO_FIELD)
        memcpy(&requested, (const char *)opts + d->backend_offset, sizeof requested);
    nx_op_args c = {.desc = d,
                    .ctx = ctx,
                    .in = a->in,
                    .opts = opts,
                    .backend = NX_BACKEND_AUTO,
                    .dy = a->dy,
                    .who = who,
                    .info = info};
    /* The outermost op call of this thread keeps the progress record; an op called from an op's
     * run opens none (c.progress NULL): the outer record's lines cover its time. */
    nx_rt_progress progress;
    bool outermost = !nx_rt_progress_current();
    if (outermost) {
        nx_rt_progress_begin(&progress, ctx, info->name);
        c.progress = &progress;
    }
    if (d->check)
        st = d->check(&c);
    if (st == NX_OK)
        st = place(&c, requested);
    if (st == NX_OK) {
        nx_rt_progress_stage(c.progress, "running");
        nx_tensor *res[NX_OP_MAX_IO] = {0};
        if (d->run)
            st = d->run(&c, res);
        else if (d->build)
            st = run_whole(&c, res);
        else
            st = nx_rt_error(ctx, NX_ERR_INTERNAL, "%s: the op has neither a builder nor a run",
                             who);
        for (int i = 0; i < nres; i++) {
            if (st == NX_OK)
                a->out[i] = res[i];
            else
                nx_tensor_free(res[i]);
        }
    }
    if (outermost)
        nx_rt_progress_end(&progress);
    if (zeroed)
        nx_rt_free(ctx, zeroed, d->opts_size ? d->opts_size : 1);
    return st;
}

void nx_op_progress(const nx_op_args *c, int64_t done, int64_t total)
{
    if (c)
        nx_rt_progress_step(c->progress, done, total);
}

nx_status nx_op_run_as(nx_ctx *ctx, const nx_op_desc *d, const char *who,
                       const nx_tensor *const *in, const void *opts, nx_tensor **out)
{
    run_args a = {.d = d, .who = who, .in = in, .opts = opts, .out = out};
    return run(ctx, &a);
}

nx_status nx_op_run_vjp_as(nx_ctx *ctx, const nx_op_desc *d, const char *who,
                           const nx_tensor *const *in, const void *opts,
                           const nx_tensor *const *dy, nx_tensor **dx)
{
    if (!dy) {
        if (dx && d && nx_op_desc_info(d))
            for (int i = 0; i < nx_op_desc_info(d)->ninputs; i++)
                dx[i] = NULL;
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: dy is NULL; expected one cotangent "
                           "per output", who ? who : "nx_op_run_vjp");
    }
    run_args a = {.d = d, .who = who, .in = in, .opts = opts, .dy = dy, .out = dx};
    return run(ctx, &a);
}

nx_status nx_op_run(nx_ctx *ctx, const nx_op_desc *d, const nx_tensor *const *in,
                    const void *opts, nx_tensor **out)
{
    return nx_op_run_as(ctx, d, NULL, in, opts, out);
}

nx_status nx_op_run_vjp(nx_ctx *ctx, const nx_op_desc *d, const nx_tensor *const *in,
                        const void *opts, const nx_tensor *const *dy, nx_tensor **dx)
{
    return nx_op_run_vjp_as(ctx, d, NULL, in, opts, dy, dx);
}

/* ---- options as text -----------------------------------------------------------------------*/

/* Option names match ignoring case, with '-' standing for '_' (command-line spelling). */
static bool same_key(const char *a, const char *b)
{
    for (;; a++, b++) {
        int x = *a == '-' ? '_' : tolower((unsigned char)*a);
        int y = *b == '-' ? '_' : tolower((unsigned char)*b);
        if (x != y)
            return false;
        if (!x)
            return true;
    }
}

/* The index of word in "a|b|c" (any case), or -1. */
static int enum_index(const char *allowed, const char *word)
{
    size_t wl = strlen(word);
    int i = 0;
    for (const char *p = allowed; p && *p; i++) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == wl && strncasecmp(p, word, len) == 0)
            return i;
        if (!e)
            break;
        p = e + 1;
    }
    return -1;
}

/* Inclusive "lo:hi" bounds of a number option (either side may be empty); true when v is in. */
static bool in_range(const char *allowed, double v)
{
    if (!allowed || !strchr(allowed, ':'))
        return true;
    char *end = NULL;
    double lo = strtod(allowed, &end);
    if (end != allowed && v < lo)
        return false;
    const char *h = strchr(allowed, ':') + 1;
    double hi = strtod(h, &end);
    return end == h || v <= hi;
}

typedef struct text_call {
    nx_ctx *ctx;
    const char *op;
    const nx_op_opt *o;
    nx_tensor **owned; /* tensors read for TENSOR options, freed after the call */
    int nowned;
    bool check_only; /* nx_op_check_options: read no file */
} text_call;

static nx_status bad_value(const text_call *t, const char *value, const char *expected)
{
    return nx_rt_error(t->ctx, NX_ERR_INVALID_ARG, "%s: option %s='%s'; expected %s", t->op,
                       t->o->name, value, expected);
}

static nx_status parse_number(const text_call *t, const char *s, bool integer, double *out,
                              int64_t *iout)
{
    char *end = NULL;
    errno = 0;
    if (integer) {
        long long v = strtoll(s, &end, 10);
        if (end == s || *end || errno)
            return bad_value(t, s, "an integer");
        *iout = v;
        *out = (double)v;
    } else {
        double v = strtod(s, &end);
        if (end == s || *end)
            return bad_value(t, s, "a number");
        *out = v;
    }
    if (!in_range(t->o->allowed, *out)) {
        char want[128];
        snprintf(want, sizeof want, "a value in %s (inclusive)", t->o->allowed);
        return bad_value(t, s, want);
    }
    return NX_OK;
}

/* "1,2,3" into slots of an int64_t or double array; one value fills every slot. */
static nx_status parse_list(const text_call *t, const char *value, bool integer, char *dst,
                            int *count)
{
    int max = t->o->max_count > 0 ? t->o->max_count : 1, k = 0;
    char buf[64];
    const char *p = value;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (k == max) {
            char want[64];
            snprintf(want, sizeof want, "at most %d comma-separated values", max);
            return bad_value(t, value, want);
        }
        if (len >= sizeof buf)
            return bad_value(t, value, integer ? "comma-separated integers"
                                               : "comma-separated numbers");
        memcpy(buf, p, len);
        buf[len] = '\0';
        double v = 0;
        int64_t iv = 0;
        nx_status st = parse_number(t, buf, integer, &v, &iv);
        if (st != NX_OK)
            return st;
        if (integer)
            memcpy(dst + (size_t)k * sizeof(int64_t), &iv, sizeof iv);
        else
            memcpy(dst + (size_t)k * sizeof(double), &v, sizeof v);
        k++;
        if (!e)
            break;
        p = e + 1;
    }
    for (int i = 1; k == 1 && i < max; i++) {
        size_t w = integer ? sizeof(int64_t) : sizeof(double);
        memcpy(dst + (size_t)i * w, dst, w);
    }
    *count = k;
    return NX_OK;
}

static nx_status parse_semiring(const text_call *t, const char *value, const nx_semiring **out)
{
    for (int k = 0; k < NX_SEMIRING_KIND_COUNT; k++) {
        const nx_semiring *sr = nx_semiring_builtin((nx_semiring_kind)k);
        if (!sr)
            continue;
        nx_semiring_info si;
        nx_semiring_get_info(sr, &si);
        if (si.name && strcasecmp(si.name, value) == 0) {
            *out = sr;
            return NX_OK;
        }
    }
    return bad_value(t, value,
                     "a built-in semiring: REAL, LOG, TROPICAL_MAX_PLUS, TROPICAL_MIN_PLUS, "
                     "BOOLEAN or EUCLIDEAN (any case)");
}

static nx_status parse_option(text_call *t, const nx_op_field *f, const char *value, void *opts)
{
    char *dst = (char *)opts + f->offset;
    const nx_op_opt *o = t->o;
    int count = 1, iv = 0;
    nx_status st = NX_OK;
    switch (o->type) {
    case NX_OPT_INT: {
        double v;
        int64_t i64 = 0;
        if ((st = parse_number(t, value, true, &v, &i64)) == NX_OK)
            memcpy(dst, &i64, sizeof i64);
        break;
    }
    case NX_OPT_FLOAT: {
        double v;
        int64_t unused;
        if ((st = parse_number(t, value, false, &v, &unused)) == NX_OK)
            memcpy(dst, &v, sizeof v);
        break;
    }
    case NX_OPT_INTS:
    case NX_OPT_FLOATS:
        st = parse_list(t, value, o->type == NX_OPT_INTS, dst, &count);
        if (st == NX_OK && f->count_offset != NX_OP_NO_FIELD)
            memcpy((char *)opts + f->count_offset, &count, sizeof count);
        break;
    case NX_OPT_BOOL: {
        static const char *const yes[] = {"true", "1", "yes", "on"}, *const no[] = {
                                                                         "false", "0", "no", "off"};
        int b = -1;
        for (int i = 0; i < 4; i++) {
            if (strcasecmp(value, yes[i]) == 0)
                b = 1;
            if (strcasecmp(value, no[i]) == 0)
                b = 0;
        }
        if (b < 0)
            return bad_value(t, value, "true or false (or 1/0, yes/no, on/off)");
        bool v = b;
        memcpy(dst, &v, sizeof v);
        break;
    }
    case NX_OPT_ENUM:
        iv = enum_index(o->allowed, value);
        if (iv < 0) {
            char want[256];
            snprintf(want, sizeof want, "one of %s (any case)", o->allowed ? o->allowed : "");
            return bad_value(t, value, want);
        }
        memcpy(dst, &iv, sizeof iv);
        break;
    case NX_OPT_BORDER: {
        nx_border b;
        if (nx_border_parse(t->ctx, value, &b) != NX_OK)
            return bad_value(t, value,
                             "a border mode: reflect, constant, nearest, mirror or wrap (any "
                             "case)");
        iv = (int)b;
        memcpy(dst, &iv, sizeof iv);
        break;
    }
    case NX_OPT_DTYPE: {
        nx_dtype dt;
        if (value[0] == '>' && !nx_dtype_from_name(value, &dt))
            return bad_value(t, value,
                             "a native or little-endian dtype: nitrix computes in little-endian "
                             "order, so big-endian '>' types are refused (write '<f4' or 'f4')");
        if (!nx_dtype_from_name(value, &dt))
            return bad_value(t, value,
                             "a dtype: nitrix's f32 f64 f16 bf16 i8 i16 i32 i64 u8 bool (any "
                             "case), or a NumPy spelling of one (float32, f4, '<f4', 'd', float, "
                             "double, half, int, b1, '?', ...)");
        iv = (int)dt;
        memcpy(dst, &iv, sizeof iv);
        break;
    }
    case NX_OPT_STRING:
        memcpy(dst, &value, sizeof value);
        break;
    case NX_OPT_SEMIRING: {
        const nx_semiring *sr = NULL;
        if ((st = parse_semiring(t, value, &sr)) == NX_OK)
            memcpy(dst, &sr, sizeof sr);
        break;
    }
    case NX_OPT_TENSOR: {
        /* Given as text, a tensor option is the path of a .npy file; "none" or "" is no tensor
         * (an optional tensor option left out: its default, a mask or an index array). */
        if (!*value || strcasecmp(value, "none") == 0) {
            const nx_tensor *none = NULL;
            memcpy(dst, &none, sizeof none);
            break;
        }
        if (t->check_only)
            break;
        nx_tensor *tt = NULL;
        if ((st = nx_npy_read(t->ctx, value, &tt)) != NX_OK)
            return st;
        t->owned[t->nowned++] = tt;
        memcpy(dst, &tt, sizeof tt);
        break;
    }
    default:
        return nx_rt_error(t->ctx, NX_ERR_INTERNAL, "%s: option %s has an unknown type %d",
                           t->op, o->name, (int)o->type);
    }
    return st;
}

static nx_status parse_backend(nx_ctx *ctx, const char *op, const char *value, nx_backend *out)
{
    for (int b = 0; b < NX_BACKEND_COUNT; b++)
        if (strcasecmp(value, nx_backend_name((nx_backend)b)) == 0) {
            *out = (nx_backend)b;
            return NX_OK;
        }
    return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                       "%s: option backend='%s'; expected auto, cpu, cuda or ref", op, value);
}

static nx_status unknown_option(nx_ctx *ctx, const nx_op_info *info, const char *key)
{
    char list[512] = "";
    size_t len = 0;
    for (int i = 0; i < info->nopts && len < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s, ", info->opts[i].name);
    if (len < sizeof list)
        snprintf(list + len, sizeof list - len, "backend");
    return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: no option named '%s'; expected one of %s",
                       info->name, key, list);
}

/* The option struct of a call given as text: a zeroed struct (every default) with each given
 * option parsed into its field. *opts is allocated from the context (size desc->opts_size). */
static nx_status parse_options(nx_ctx *ctx, const nx_op_desc *d, const nx_op_info *info, int nopt,
                               const char *const *keys, const char *const *values, void **opts,
                               nx_backend *backend, text_call *t)
{
    if (nopt < 0 || (nopt > 0 && (!keys || !values)))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: %d options with keys %s and values %s; expected a count >= 0 and "
                           "non-NULL arrays",
                           info->name, nopt, keys ? "given" : "NULL", values ? "given" : "NULL");
    *opts = nx_rt_calloc(ctx, 1, d->opts_size ? d->opts_size : 1);
    if (!*opts)
        return nx_rt_nomem(ctx, info->name, d->opts_size);
    bool given[64] = {false}, backend_given = false;
    for (int k = 0; k < nopt; k++) {
        if (!keys[k] || !values[k])
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: option %d has a NULL %s",
                               info->name, k, keys[k] ? "value" : "key");
        if (same_key(keys[k], "backend")) {
            if (backend_given)
                return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                                   "%s: option backend is given twice; expected it once",
                                   info->name);
            backend_given = true;
            nx_status st = parse_backend(ctx, info->name, values[k], backend);
            if (st != NX_OK)
                return st;
            if (d->backend_offset != NX_OP_NO_FIELD)
                memcpy((char *)*opts + d->backend_offset, backend, sizeof *backend);
            continue;
        }
        int i = 0;
        while (i < info->nopts && !same_key(keys[k], info->opts[i].name))
            i++;
        if (i == info->nopts)
            return unknown_option(ctx, info, keys[k]);
        if (i < 64 && given[i])
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "%s: option %s is given twice; expected it once", info->name,
                               info->opts[i].name);
        if (i < 64)
            given[i] = true;
        t->o = &info->opts[i];
        nx_status st = parse_option(t, &d->fields[i], values[k], *opts);
        if (st != NX_OK)
            return st;
    }
    for (int i = 0; i < info->nopts && i < 64; i++) {
        if (given[i])
            continue;
        if (!info->opts[i].def)
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: option %s is required (%s)",
                               info->name, info->opts[i].name,
                               info->opts[i].help ? info->opts[i].help : "no default");
        /* An option not given takes its schema default, parsed as if it had been given, so a
         * default need not be the struct's zero (use_median=true, half=1 with 0 valid). A
         * default in parentheses describes one the op computes ("(B's rows)"): the field stays
         * zero, and for INTS/FLOATS its count 0 says it was not given. */
        if (info->opts[i].def[0] == '(')
            continue;
        t->o = &info->opts[i];
        nx_status st = parse_option(t, &d->fields[i], info->opts[i].def, *opts);
        if (st != NX_OK)
            return st;
    }
    return NX_OK;
}

static nx_status call_text(nx_ctx *ctx, const char *name, int nin, const nx_tensor *const *in,
                           int nopt, const char *const *keys, const char *const *values,
                           int nres, const nx_tensor *const *dy, int ndy, nx_tensor **res)
{
    bool vjp = dy != NULL || ndy >= 0;
    const char *who = vjp ? "nx_op_vjp" : "nx_op_call";
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s: ctx is NULL", who);
    if (!res)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s is NULL", who, vjp ? "dx" : "out");
    const nx_op_desc *d = nx_op_desc_find(name);
    const nx_op_info *info = d ? nx_op_desc_info(d) : NULL;
    if (!info) {
        /* Without a row the result count is the caller's. */
        for (int i = 0; !vjp && i < nres; i++)
            res[i] = NULL;
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: no op named '%s'; expected a name of nx_ops() (`nitrix run "
                           "--list`)",
                           who, name ? name : "(null)");
    }
    /* A vjp writes one gradient per input given (nin of them: optional inputs left out get no
     * slot in the caller's dx). */
    int nclear = vjp ? (nin < 0 ? 0 : nin < info->ninputs ? nin : info->ninputs) : nres;
    for (int i = 0; i < nclear; i++)
        res[i] = NULL;
    if (nin < info->nrequired || nin > info->ninputs) {
        if (info->nrequired == info->ninputs)
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %d inputs given; expected %d",
                               info->name, nin, info->ninputs);
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %d inputs given; expected %d to %d",
                           info->name, nin, info->nrequired, info->ninputs);
    }
    /* Optional inputs left out of the list are absent (NULL). */
    const nx_tensor *padded[NX_OP_MAX_IO] = {0};
    for (int i = 0; i < nin; i++)
        padded[i] = in ? in[i] : NULL;
    if (in || nin == 0)
        in = padded;
    if (!vjp && nres != info->noutputs)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %d outputs asked for; expected %d",
                           info->name, nres, info->noutputs);
    if (vjp && ndy != info->noutputs)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: %d cotangents given; expected %d (one per output)", info->name,
                           ndy, info->noutputs);
    int ntensor = 0;
    for (int i = 0; i < info->nopts; i++)
        ntensor += info->opts[i].type == NX_OPT_TENSOR;
    nx_tensor *owned[64] = {0};
    text_call t = {.ctx = ctx, .op = info->name, .owned = owned};
    void *opts = NULL;
    nx_backend backend = NX_BACKEND_AUTO;
    nx_status st = ntensor <= 64 ? parse_options(ctx, d, info, nopt, keys, values, &opts,
                                                 &backend, &t)
                                 : nx_rt_error(ctx, NX_ERR_INTERNAL, "%s: too many tensor options",
                                               info->name);
    if (st == NX_OK) {
        nx_tensor *grads[NX_OP_MAX_IO] = {0}; /* the runner writes one per row input */
        run_args a = {.d = d,
                      .who = info->name,
                      .in = in,
                      .opts = opts,
                      .dy = dy,
                      .backend = backend,
                      .out = vjp ? grads : res};
        st = vjp && !dy ? nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: dy is NULL; expected %d "
                                      "cotangents", info->name, info->noutputs)
                        : run(ctx, &a);
        for (int i = 0; vjp && i < info->ninputs; i++) {
            if (i < nin)
                res[i] = grads[i];
            else
                nx_tensor_free(grads[i]); /* an absent input: none */
        }
    }
    for (int i = 0; i < t.nowned; i++)
        nx_tensor_free(owned[i]);
    if (opts)
        nx_rt_free(ctx, opts, d->opts_size ? d->opts_size : 1);
    return st;
}

nx_status nx_op_check_options(nx_ctx *ctx, const char *name, int nopt, const char *const *keys,
                              const char *const *values)
{
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "nx_op_check_options: ctx is NULL");
    const nx_op_desc *d = nx_op_desc_find(name);
    const nx_op_info *info = d ? nx_op_desc_info(d) : NULL;
    if (!info)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_op_check_options: no op named '%s'; expected a name of nx_ops()",
                           name ? name : "(null)");
    text_call t = {.ctx = ctx, .op = info->name, .check_only = true};
    void *opts = NULL;
    nx_backend backend = NX_BACKEND_AUTO;
    nx_status st = parse_options(ctx, d, info, nopt, keys, values, &opts, &backend, &t);
    if (opts)
        nx_rt_free(ctx, opts, d->opts_size ? d->opts_size : 1);
    return st;
}

nx_status nx_op_call(nx_ctx *ctx, const char *name, int nin, const nx_tensor *const *in, int nopt,
                     const char *const *keys, const char *const *values, int nout,
                     nx_tensor **out)
{
    return call_text(ctx, name, nin, in, nopt, keys, values, nout, NULL, -1, out);
}

nx_status nx_op_vjp(nx_ctx *ctx, const char *name, int nin, const nx_tensor *const *in, int nopt,
                    const char *const *keys, const char *const *values, int ndy,
                    const nx_tensor *const *dy, nx_tensor **dx)
{
    return call_text(ctx, name, nin, in, nopt, keys, values, 0, dy, ndy < 0 ? 0 : ndy, dx);
}
