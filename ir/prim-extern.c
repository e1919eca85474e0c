/* Extern: a call to a library routine (LAPACK, FFT, ...) declared by an nx_extern_def, which
 * brings its own shape rule, reference implementation and (optionally) adjoint.
 *
 *   extern   y = def->reference(x_0, ..., x_{n-1})
 *
 * Equal calls (same def, same inputs) are one node: an extern must be a pure function.
 * Attributes: [def], or [def, dev] for nx_extern_device (dev: the nx_extern_device_def whose CUDA
 * C the CUDA backend compiles, codegen/ptx/emit-extern.c; every other backend ignores it). */
#include <string.h>

#include "ir.h"
#include "ir/adjoint.h"

#define EXTERN_MAX_IN 64

static const nx_extern_def *def_of(const int64_t *attrs)
{
    return (const nx_extern_def *)(intptr_t)attrs[0];
}

nx_status nx_ir_shape_extern(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                             nx_ir_sig *out)
{
    (void)s;
    if (p->nattrs < 1 || p->nattrs > 2 || !p->attrs[0] || (p->nattrs == 2 && !p->attrs[1]))
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "%d attributes; expected [def] or [def, dev]",
                          p->nattrs);
    const nx_extern_def *def = def_of(p->attrs);
    if (p->nops > EXTERN_MAX_IN)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "'%s' has %d inputs; expected at most %d",
                          def->name, p->nops, EXTERN_MAX_IN);
    nx_dtype dt[EXTERN_MAX_IN];
    int nd[EXTERN_MAX_IN];
    const int64_t *sh[EXTERN_MAX_IN];
    for (int i = 0; i < p->nops; i++) {
        dt[i] = p->ins[i].dtype;
        nd[i] = p->ins[i].ndim;
        sh[i] = p->ins[i].shape;
    }
    nx_dtype od = NX_DTYPE_COUNT;
    int ond = -1;
    int64_t osh[NX_MAX_DIMS] = {0};
    nx_status st = def->shape(def->user, p->nops, dt, nd, sh, &od, &ond, osh);
    if (st != NX_OK)
        return nx_ir_fail(ck, st, "'%s': its shape rule rejected the inputs (%s)", def->name,
                          nx_status_str(st));
    int64_t numel;
    if (!nx_ir_dtype_ok(od) || ond < 0 || ond > NX_MAX_DIMS || !nx_shape_numel(ond, osh, &numel))
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG,
                          "'%s': its shape rule answered dtype %d, ndim %d; expected a dtype and "
                          "0 to %d extents >= 0",
                          def->name, (int)od, ond, NX_MAX_DIMS);
    out->dtype = od;
    out->ndim = ond;
    memcpy(out->shape, osh, (size_t)ond * sizeof *osh);
    return NX_OK;
}

static nx_node make_extern(nx_graph *g, const char *fn, const nx_extern_def *def,
                           const nx_extern_device_def *dev, int n_in, const nx_node *ins)
{
    if (!g)
        return NX_NONE;
    if (!def || !def->name || !def->shape || !def->reference)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "%s: def%s lacks a name, shape rule or reference; "
                                 "expected all three",
                                 fn, def ? "" : " (NULL)");
    if (dev && !dev->source)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "%s: '%s' has a device definition without a source callback; "
                                 "expected dev->source set (or dev NULL)",
                                 fn, def->name);
    if (n_in < 0 || (n_in > 0 && !ins))
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "%s: '%s' given %d inputs%s; expected n_in >= 0 nodes", fn,
                                 def->name, n_in, ins ? "" : " (NULL)");
    int64_t attrs[2] = {(int64_t)(intptr_t)def, (int64_t)(intptr_t)dev};
    return nx_ir_make(g, fn, NX_PRIM_EXTERN, n_in, ins, dev ? 2 : 1, attrs, 0, NULL);
}

nx_node nx_extern(nx_graph *g, const nx_extern_def *def, int n_in, const nx_node *ins)
{
    return make_extern(g, "nx_extern", def, NULL, n_in, ins);
}

nx_node nx_extern_device(nx_graph *g, const nx_extern_def *def, const nx_extern_device_def *dev,
                         int n_in, const nx_node *ins)
{
    return make_extern(g, "nx_extern_device", def, dev, n_in, ins);
}

nx_status nx_ir_ref_extern(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                           nx_tensor *out)
{
    const nx_extern_def *def = def_of(nx_ir_node_attrs(ev->s, n));
    nx_status st = def->reference(def->user, ev->ctx, (int)n->nops, ins, out);
    if (st != NX_OK)
        return nx_rt_error(ev->ctx, st, "interpreter: extern '%s' failed in its reference (%s)",
                           def->name, nx_status_str(st));
    return NX_OK;
}

void nx_ir_attrs_extern(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    fprintf(f, "[name=%s%s]", def_of(nx_ir_node_attrs(s, n))->name,
            n->nattrs == 2 ? ", device" : "");
}

/* ---- adjoint ----------------------------------------------------------------------------*/

/* The definition's own vjp callback; NULL is NX_ERR_UNSUPPORTED (checked by passes/autodiff). */
nx_status nx_ir_vjp_extern(nx_graph *g, nx_node y, nx_node dy, nx_node *dx)
{
    nx_ir_ad_view v;
    nx_ir_ad_view_of(g, y, &v);
    const nx_extern_def *def = (const nx_extern_def *)(intptr_t)v.a[0];
    nx_status st = def->vjp(def->user, g, (int)v.n.nops, v.ops, y, dy, dx);
    if (st != NX_OK && g->status == NX_OK)
        return nx_rt_error(nx_graph_ctx(g), st, "nx_graph_vjp: the vjp of extern %s failed: %s",
                           def->name ? def->name : "(unnamed)", nx_ctx_last_error(nx_graph_ctx(g)));
    return st;
}
