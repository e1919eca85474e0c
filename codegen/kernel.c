/* Kernel IR: building, validation, loop masks, printing, canonical bytes and the reference
 * interpreter (codegen/kernel.h, docs/kernel-ir.md). */
#include <math.h>
#include <string.h>

#include "codegen/kernel.h"

/* ---- building ------------------------------------------------------------------------------*/

nx_status nx_kernel_new(nx_ctx *ctx, nx_kernel_kind kind, const char *name, nx_kernel **out)
{
    nx_kernel *k = nx_rt_calloc(ctx, 1, sizeof *k);
    if (!k)
        return nx_rt_nomem(ctx, "kernel", sizeof *k);
    k->ctx = ctx;
    k->kind = (uint8_t)kind;
    snprintf(k->name, sizeof k->name, "%s", name ? name : "k");
    *out = k;
    return NX_OK;
}

void nx_kernel_free(nx_kernel *k)
{
    if (!k)
        return;
    nx_rt_free(k->ctx, k->inst, k->inst_cap * sizeof *k->inst);
    nx_rt_free(k->ctx, k, sizeof *k);
}

int nx_kernel_buffer(nx_kernel *k, nx_kbuf_role role, nx_dtype dtype, int ndim,
                     const int64_t *shape, uint32_t slot)
{
    if (k->nbufs >= NX_KERNEL_MAX_BUFFERS || ndim < 0 || ndim > NX_MAX_DIMS)
        return -1;
    nx_kbuf *b = &k->bufs[k->nbufs];
    memset(b, 0, sizeof *b);
    b->role = (uint8_t)role;
    b->dtype = (uint8_t)dtype;
    b->ndim = (uint8_t)ndim;
    for (int d = 0; d < ndim; d++)
        b->shape[d] = shape[d];
    b->slot = slot;
    return k->nbufs++;
}

void nx_kernel_space(nx_kernel *k, int ndim, const int64_t *shape)
{
    k->ndim = ndim;
    k->nloops = ndim;
    for (int d = 0; d < ndim; d++)
        k->extent[d] = shape[d];
}

int nx_kernel_loop(nx_kernel *k, int64_t n)
{
    if (k->nloops >= NX_KERNEL_MAX_LOOPS)
        return -1;
    k->extent[k->nloops] = n;
    return k->nloops++;
}

int32_t nx_kernel_emit(nx_kernel *k, nx_kinst inst)
{
    if ((size_t)k->ninst == k->inst_cap) {
        size_t cap = k->inst_cap ? 2 * k->inst_cap : 32;
        nx_kinst *p = nx_rt_alloc(k->ctx, cap * sizeof *p);
        if (!p) {
            k->nomem = true;
            nx_rt_nomem(k->ctx, "kernel body", cap * sizeof *p);
            return -1;
        }
        if (k->ninst)
            memcpy(p, k->inst, (size_t)k->ninst * sizeof *p);
        nx_rt_free(k->ctx, k->inst, k->inst_cap * sizeof *k->inst);
        k->inst = p;
        k->inst_cap = cap;
    }
    k->inst[k->ninst] = inst;
    return k->ninst++;
}

int32_t nx_kernel_const_i(nx_kernel *k, nx_dtype dtype, int64_t v)
{
    nx_kinst in = {.op = NX_KOP_CONST, .dtype = (uint8_t)dtype, .a = {-1, -1, -1}, .i = v};
    if (nx_ir_is_float(dtype))
        in.f = (double)v, in.i = 0;
    return nx_kernel_emit(k, in);
}

int32_t nx_kernel_const_f(nx_kernel *k, nx_dtype dtype, double v)
{
    nx_kinst in = {.op = NX_KOP_CONST, .dtype = (uint8_t)dtype, .a = {-1, -1, -1}, .f = v};
    if (!nx_ir_is_float(dtype)) {
        nx_ir_val x = nx_ir_from_double(v, dtype);
        in.i = x.i, in.f = 0;
    }
    return nx_kernel_emit(k, in);
}

int32_t nx_kernel_idx(nx_kernel *k, int loop)
{
    nx_kinst in = {.op = NX_KOP_IDX, .dtype = NX_DTYPE_I64, .a = {loop, -1, -1}};
    return nx_kernel_emit(k, in);
}

int32_t nx_kernel_load(nx_kernel *k, int buf, int32_t offset)
{
    if (offset < 0 || buf < 0 || buf >= k->nbufs)
        return -1;
    nx_kinst in = {.op = NX_KOP_LOAD, .dtype = k->bufs[buf].dtype, .a = {buf, offset, -1}};
    return nx_kernel_emit(k, in);
}

int32_t nx_kernel_prim(nx_kernel *k, int prim, nx_dtype dtype, int32_t a, int32_t b, int32_t c)
{
    if (a < 0)
        return -1;
    nx_kinst in = {.op = NX_KOP_PRIM, .dtype = (uint8_t)dtype, .prim = (uint16_t)prim,
                   .a = {a, b, c}};
    return nx_kernel_emit(k, in);
}

int32_t nx_kernel_reduce(nx_kernel *k, int monoid, nx_dtype dtype, int32_t x, uint32_t loops)
{
    if (x < 0)
        return -1;
    nx_kinst in = {.op = NX_KOP_REDUCE, .dtype = (uint8_t)dtype, .prim = (uint16_t)monoid,
                   .a = {x, -1, -1}, .i = (int64_t)loops};
    return nx_kernel_emit(k, in);
}

bool nx_kernel_store(nx_kernel *k, int buf, int32_t value)
{
    if (value < 0 || k->nstores >= NX_KERNEL_MAX_BUFFERS)
        return false;
    k->stores[k->nstores++] = (nx_kstore){buf, value};
    return true;
}

/* ---- validation ----------------------------------------------------------------------------*/

/* Operand count of a PRIM instruction; 0 for codes that are not elementwise. */
static int prim_arity(int prim)
{
    return nx_ir_prim_elementwise(prim) ? nx_ir_prims[prim].arity : 0;
}

static bool is_compare(int prim)
{
    return nx_ir_prim_class(prim) == NX_PCLASS_COMPARE;
}

void nx_kernel_loop_masks(const nx_kernel *k, uint32_t *mask)
{
    for (int id = 0; id < k->ninst; id++) {
        const nx_kinst *in = &k->inst[id];
        uint32_t m = 0;
        switch (in->op) {
        case NX_KOP_IDX:
            m = 1u << in->a[0];
            break;
        case NX_KOP_LOAD:
            m = mask[in->a[1]];
            break;
        case NX_KOP_PRIM:
            for (int j = 0; j < prim_arity(in->prim); j++)
                m |= mask[in->a[j]];
            break;
        case NX_KOP_REDUCE:
            m = mask[in->a[0]] & ~(uint32_t)in->i;
            break;
        default:
            break;
        }
        mask[id] = m;
    }
}

#define BAD(...) nx_rt_error(k->ctx, NX_ERR_INTERNAL, __VA_ARGS__)

static nx_status check_prim(const nx_kernel *k, int id, const nx_kinst *in)
{
    int ar = prim_arity(in->prim);
    if (ar == 0)
        return BAD("kernel %s: %%%d: prim %d is not elementwise", k->name, id, in->prim);
    for (int j = 0; j < ar; j++)
        if (in->a[j] < 0 || in->a[j] >= id)
            return BAD("kernel %s: %%%d: operand %d is %%%d; expected an earlier instruction",
                       k->name, id, j, in->a[j]);
    nx_dtype d0 = k->inst[in->a[0]].dtype;
    if (in->prim == NX_PRIM_SELECT) {
        if (d0 != NX_DTYPE_BOOL || k->inst[in->a[1]].dtype != in->dtype ||
            k->inst[in->a[2]].dtype != in->dtype)
            return BAD("kernel %s: %%%d: select needs a bool condition and arms of its dtype",
                       k->name, id);
        return NX_OK;
    }
    if (ar == 2 && k->inst[in->a[1]].dtype != d0)
        return BAD("kernel %s: %%%d: %s of %s and %s; expected equal dtypes", k->name, id,
                   nx_ir_prim_name(in->prim), nx_dtype_name(d0),
                   nx_dtype_name(k->inst[in->a[1]].dtype));
    bool to_bool = is_compare(in->prim) || in->prim == NX_PRIM_ISNAN;
    if (to_bool && in->dtype != NX_DTYPE_BOOL)
        return BAD("kernel %s: %%%d: %s gives bool", k->name, id, nx_ir_prim_name(in->prim));
    if (!to_bool && in->prim != NX_PRIM_CAST && in->dtype != d0)
        return BAD("kernel %s: %%%d: %s of %s gives %s; expected the operand's dtype", k->name, id,
                   nx_ir_prim_name(in->prim), nx_dtype_name(d0), nx_dtype_name(in->dtype));
    return NX_OK;
}

static nx_status check_reduce(const nx_kernel *k, int id, const nx_kinst *in, uint32_t *seen)
{
    uint32_t loops = (uint32_t)in->i;
    uint32_t red_all = ((k->nloops >= 32 ? 0 : (1u << k->nloops)) - 1) & ~((1u << k->ndim) - 1);
    if (in->a[0] < 0 || in->a[0] >= id)
        return BAD("kernel %s: %%%d: reduce operand %%%d is not earlier", k->name, id, in->a[0]);
    if (!loops || (loops & ~red_all) || (loops & *seen))
        return BAD("kernel %s: %%%d: reduce over loop mask 0x%x; expected reduction loops not "
                   "reduced elsewhere",
                   k->name, id, loops);
    *seen |= loops;
    nx_dtype xd = k->inst[in->a[0]].dtype;
    bool arg = in->prim == NX_MONOID_ARGMAX || in->prim == NX_MONOID_ARGMIN;
    if (in->prim >= NX_MONOID_COUNT)
        return BAD("kernel %s: %%%d: monoid %d", k->name, id, in->prim);
    if (arg && ((loops & (loops - 1)) || in->dtype != NX_DTYPE_I64))
        return BAD("kernel %s: %%%d: argmax/argmin fold one loop into i64", k->name, id);
    if (!arg && in->dtype != xd)
        return BAD("kernel %s: %%%d: reduce of %s gives %s", k->name, id, nx_dtype_name(xd),
                   nx_dtype_name(in->dtype));
    return NX_OK;
}

static nx_status check_inst(const nx_kernel *k, int id, uint32_t *seen)
{
    const nx_kinst *in = &k->inst[id];
    if (in->dtype >= NX_DTYPE_COUNT)
        return BAD("kernel %s: %%%d: dtype %d", k->name, id, in->dtype);
    switch (in->op) {
    case NX_KOP_CONST:
        return NX_OK;
    case NX_KOP_IDX:
        if (in->a[0] < 0 || in->a[0] >= k->nloops || in->dtype != NX_DTYPE_I64)
            return BAD("kernel %s: %%%d: idx of loop %d; expected i64 of a loop below %d",
                       k->name, id, in->a[0], k->nloops);
        return NX_OK;
    case NX_KOP_LOAD:
        if (in->a[0] < 0 || in->a[0] >= k->nbufs ||
            (k->bufs[in->a[0]].role != NX_KBUF_IN &&
             !(k->has_epilogue && in->a[0] == k->epi_source)) ||
            in->dtype != k->bufs[in->a[0]].dtype)
            return BAD("kernel %s: %%%d: load from buffer %d; expected an input buffer of its "
                       "dtype",
                       k->name, id, in->a[0]);
        if (in->a[1] < 0 || in->a[1] >= id || k->inst[in->a[1]].dtype != NX_DTYPE_I64)
            return BAD("kernel %s: %%%d: load offset must be an earlier i64", k->name, id);
        return NX_OK;
    case NX_KOP_PRIM:
        return check_prim(k, id, in);
    case NX_KOP_REDUCE:
        return check_reduce(k, id, in, seen);
    default:
        return BAD("kernel %s: %%%d: op %d", k->name, id, in->op);
    }
}

/* A reduction loop's index may be read only under that loop's REDUCE. REDUCE clears its own
 * loops from the mask, so a value used outside the REDUCE of a loop it depends on carries that
 * loop up to the stores (nesting under the owning REDUCE is legal and clears it on the way). */
static nx_status check_scopes(const nx_kernel *k, const uint32_t *mask)
{
    uint32_t space = (1u << k->ndim) - 1;
    for (int s = 0; s < k->nstores; s++)
        if (mask[k->stores[s].value] & ~space)
            return nx_rt_error(k->ctx, NX_ERR_INTERNAL,
                               "kernel %s: store %d reads a reduction loop's index outside its "
                               "reduce",
                               k->name, s);
    return NX_OK;
}

/* The LOOP fields: a LOOP kernel's body, or a library kernel's prologue (store_role VALUE). */
static nx_status check_loop_kernel(const nx_kernel *k, int store_role)
{
    if (k->ndim < 0 || k->ndim > NX_MAX_DIMS || k->nloops < k->ndim ||
        k->nloops > NX_KERNEL_MAX_LOOPS)
        return BAD("kernel %s: %d dims and %d loops", k->name, k->ndim, k->nloops);
    for (int l = 0; l < k->nloops; l++)
        if (k->extent[l] < 0)
            return BAD("kernel %s: loop %d has extent %lld", k->name, l,
                       (long long)k->extent[l]);
    uint32_t seen = 0;
    for (int id = 0; id < k->ninst; id++) {
        nx_status st = check_inst(k, id, &seen);
        if (st != NX_OK)
            return st;
    }
    uint32_t red_all = ((1u << k->nloops) - 1) & ~((1u << k->ndim) - 1);
    if (seen != red_all)
        return BAD("kernel %s: reduction loops 0x%x are reduced, 0x%x exist", k->name, seen,
                   red_all);
    if (k->nstores < 1)
        return BAD("kernel %s: no store", k->name);
    for (int s = 0; s < k->nstores; s++) {
        const nx_kstore *st = &k->stores[s];
        if (st->buf < 0 || st->buf >= k->nbufs || k->bufs[st->buf].role != store_role ||
            st->value < 0 || st->value >= k->ninst ||
            k->inst[st->value].dtype != k->bufs[st->buf].dtype)
            return BAD("kernel %s: store %d: expected an output buffer and a value of its dtype",
                       k->name, s);
    }
    for (int b = 0; b < k->nbufs; b++) {
        const nx_kbuf *kb = &k->bufs[b];
        if (kb->role != store_role)
            continue;
        bool same = kb->ndim == k->ndim;
        for (int d = 0; same && d < k->ndim; d++)
            same = kb->shape[d] == k->extent[d];
        if (!same)
            return BAD("kernel %s: output buffer %d's shape differs from the space", k->name, b);
    }
    uint32_t small[64];
    uint32_t *mask = small;
    size_t bytes = (size_t)k->ninst * sizeof *mask;
    if (k->ninst > 64 && !(mask = nx_rt_alloc(k->ctx, bytes)))
        return nx_rt_nomem(k->ctx, "kernel validation", bytes);
    nx_kernel_loop_masks(k, mask);
    nx_status st = check_scopes(k, mask);
    if (mask != small)
        nx_rt_free(k->ctx, mask, bytes);
    return st;
}

/* A library kernel's prologue or epilogue: one VALUE buffer (the operand the prologue stores, or
 * the result the epilogue reads), one store, no reduction loop, then the body as a loop kernel's
 * (storing into the value, or into the epilogue's OUT buffer). */
static nx_status check_fused(const nx_kernel *k, int values)
{
    bool epi = k->has_epilogue;
    int buf = epi ? k->epi_source : k->pro_operand;
    if (values != 1 || buf < 0 || buf >= k->nbufs || k->bufs[buf].role != NX_KBUF_VALUE ||
        k->nloops != k->ndim || k->nstores != 1)
        return BAD("kernel %s: %s must have one value buffer (buffer %d), one store and no "
                   "reduction loop",
                   k->name, epi ? "an epilogue" : "a prologue", buf);
    return check_loop_kernel(k, epi ? NX_KBUF_OUT : NX_KBUF_VALUE);
}

/* A library kernel's attributes as codegen/kernel.h lays them out for its primitive, and the
 * operands the host and device routines read them with: the ranges the graph's shape rules
 * enforce, checked again here because the routines index with them unchecked. */
static nx_status check_library_attrs(const nx_kernel *k)
{
    const int64_t *a = k->attrs;
    int n = k->nattrs, nd = k->nbufs ? k->bufs[0].ndim : 0;
    int64_t axis = n ? a[0] : -1;
    bool flag1 = n > 1 && (a[1] == 0 || a[1] == 1);
    switch (k->lib_prim) {
    case NX_PRIM_SCAN:
        if (n != 3 || k->nbufs < 2 || axis < 0 || axis >= nd || a[1] < 0 ||
            a[1] > NX_MONOID_LOGSUMEXP || (a[2] != 0 && a[2] != 1))
            return BAD("kernel %s: scan attributes; expected [axis < %d, monoid SUM..LOGSUMEXP, "
                       "reverse 0|1] over one input",
                       k->name, nd);
        return NX_OK;
    case NX_PRIM_SCAN_LINEAR: {
        int nb = k->nbufs > 1 && k->bufs[1].ndim > nd ? k->bufs[1].ndim : nd;
        if (n != 2 || k->nbufs < 3 || axis < 0 || axis >= nb || !flag1)
            return BAD("kernel %s: scan_linear attributes; expected [axis < %d, reverse 0|1] over "
                       "inputs a, b",
                       k->name, nb);
        return NX_OK;
    }
    case NX_PRIM_SCAN_IIR:
        if (n < 4 || n > 3 + NX_SCAN_IIR_MAX_ORDER || a[2] != n - 3 || k->nbufs < 2 || axis < 0 ||
            axis >= nd || !flag1)
            return BAD("kernel %s: scan_iir attributes; expected [axis < %d, reverse 0|1, order "
                       "1..%d, order coefficient bits]",
                       k->name, nd, NX_SCAN_IIR_MAX_ORDER);
        for (int j = 0; j < a[2]; j++) {
            double c;
            memcpy(&c, &a[3 + j], sizeof c);
            if (!isfinite(c))
                return BAD("kernel %s: scan_iir coefficient c_%d is not finite", k->name, j + 1);
        }
        return NX_OK;
    case NX_PRIM_SORT:
    case NX_PRIM_ARGSORT:
        if (n != 3 || k->nbufs < 2 || axis < 0 || axis >= nd || !flag1 || a[2] < 0 ||
            a[2] > k->bufs[0].shape[axis])
            return BAD("kernel %s: sort attributes; expected [axis < %d, descending 0|1, k within "
                       "the axis]",
                       k->name, nd);
        return NX_OK;
    case NX_PRIM_SCATTER:
        if (n != 2 || k->nbufs < 4 || axis < 0 || axis >= nd ||
            (a[1] != NX_MONOID_SUM && a[1] != NX_MONOID_MAX && a[1] != NX_MONOID_MIN) ||
            (k->bufs[1].dtype != NX_DTYPE_I32 && k->bufs[1].dtype != NX_DTYPE_I64))
            return BAD("kernel %s: scatter attributes; expected [axis < %d, monoid SUM|MAX|MIN] "
                       "over x, an i32 or i64 idx and updates",
                       k->name, nd);
        return NX_OK;
    case NX_PRIM_EXTERN:
        if (n < 1 || n > 2 || !k->lib_ptr)
            return BAD("kernel %s: extern attributes; expected [def] or [def, dev] and the "
                       "definition recorded",
                       k->name);
        return NX_OK;
    default:
        return NX_OK; /* reduce_custom: its monoid is the graph node's (lib_node) */
    }
}

nx_status nx_kernel_validate(const nx_kernel *k)
{
    if (!k)
        return nx_rt_error(NULL, NX_ERR_INTERNAL, "kernel: NULL");
    for (int b = 0; b < k->nbufs; b++)
        if (k->bufs[b].dtype >= NX_DTYPE_COUNT || k->bufs[b].ndim > NX_MAX_DIMS)
            return BAD("kernel %s: buffer %d is malformed", k->name, b);
    int values = 0;
    for (int b = 0; b < k->nbufs; b++)
        values += k->bufs[b].role == NX_KBUF_VALUE;
    if (k->kind == NX_KERNEL_LIBRARY) {
        if (k->lib_prim >= NX_PRIM_COUNT || k->nattrs < 0 || k->nattrs > NX_KERNEL_MAX_ATTRS)
            return BAD("kernel %s: library primitive %d", k->name, k->lib_prim);
        if (k->has_prologue && k->has_epilogue)
            return BAD("kernel %s: both a prologue and an epilogue", k->name);
        nx_status st = check_library_attrs(k);
        if (st != NX_OK)
            return st;
        if (!k->has_prologue && !k->has_epilogue)
            return values ? BAD("kernel %s: a value buffer without a prologue or an epilogue",
                                k->name)
                          : NX_OK;
        return check_fused(k, values);
    }
    if (k->kind != NX_KERNEL_LOOP)
        return BAD("kernel %s: kind %d", k->name, k->kind);
    if (values || k->has_prologue || k->has_epilogue)
        return BAD("kernel %s: a loop kernel with a prologue, an epilogue or a value buffer",
                   k->name);
    return check_loop_kernel(k, NX_KBUF_OUT);
}

#undef BAD

/* ---- printing ------------------------------------------------------------------------------*/

static const char *monoid_name(int m)
{
    static const char *const names[] = {"sum", "prod", "max", "min", "logsumexp", "argmax",
                                        "argmin"};
    return m >= 0 && m < NX_MONOID_COUNT ? names[m] : "?";
}

static void print_shape(FILE *f, int ndim, const int64_t *shape)
{
    fputc('[', f);
    for (int d = 0; d < ndim; d++)
        fprintf(f, "%s%lld", d ? ", " : "", (long long)shape[d]);
    fputc(']', f);
}

static void print_inst(const nx_kernel *k, int id, FILE *f)
{
    const nx_kinst *in = &k->inst[id];
    fprintf(f, "  %%%d = ", id);
    switch (in->op) {
    case NX_KOP_CONST:
        if (nx_ir_is_float(in->dtype))
            fprintf(f, "const %.17g", in->f);
        else
            fprintf(f, "const %lld", (long long)in->i);
        break;
    case NX_KOP_IDX:
        fprintf(f, "idx %d", in->a[0]);
        break;
    case NX_KOP_LOAD:
        fprintf(f, "load b%d[%%%d]", in->a[0], in->a[1]);
        break;
    case NX_KOP_PRIM:
        fprintf(f, "%s", nx_ir_prim_name(in->prim));
        for (int j = 0; j < prim_arity(in->prim); j++)
            fprintf(f, "%s %%%d", j ? "," : "", in->a[j]);
        break;
    case NX_KOP_REDUCE:
        fprintf(f, "reduce %s %%%d over {", monoid_name(in->prim), in->a[0]);
        for (int l = 0, first = 1; l < NX_KERNEL_MAX_LOOPS; l++)
            if (in->i & (1LL << l)) {
                fprintf(f, "%s%d", first ? "" : ", ", l);
                first = 0;
            }
        fputc('}', f);
        break;
    default:
        fprintf(f, "op%d", in->op);
    }
    fprintf(f, " : %s\n", nx_dtype_name(in->dtype));
}

void nx_kernel_print(const nx_kernel *k, FILE *f)
{
    if (k->kind == NX_KERNEL_LIBRARY) {
        fprintf(f, "kernel %s library %s attrs", k->name, nx_ir_prim_name(k->lib_prim));
        print_shape(f, k->nattrs, k->attrs);
        if (k->has_prologue) {
            fprintf(f, " prologue of operand %d space ", k->pro_operand);
            print_shape(f, k->ndim, k->extent);
        }
        if (k->has_epilogue) {
            fprintf(f, " epilogue of result %d space ", k->epi_source);
            print_shape(f, k->ndim, k->extent);
        }
        fputc('\n', f);
    } else {
        fprintf(f, "kernel %s loop space ", k->name);
        print_shape(f, k->ndim, k->extent);
        fprintf(f, " loops ");
        print_shape(f, k->nloops - k->ndim, k->extent + k->ndim);
        fputc('\n', f);
    }
    for (int b = 0; b < k->nbufs; b++) {
        const nx_kbuf *kb = &k->bufs[b];
        static const char *const roles[] = {"in ", "out", "val"};
        fprintf(f, "  buf %d %s %s", b, kb->role <= NX_KBUF_VALUE ? roles[kb->role] : "?",
                nx_dtype_name(kb->dtype));
        print_shape(f, kb->ndim, kb->shape);
        fprintf(f, " slot %u\n", (unsigned)kb->slot);
    }
    if (k->kind == NX_KERNEL_LIBRARY && !k->has_prologue && !k->has_epilogue)
        return;
    for (int id = 0; id < k->ninst; id++)
        print_inst(k, id, f);
    for (int s = 0; s < k->nstores; s++)
        fprintf(f, "  store b%d = %%%d\n", k->stores[s].buf, k->stores[s].value);
}

/* ---- identity ------------------------------------------------------------------------------*/

typedef struct bytes {
    nx_ctx *ctx;
    uint8_t *p;
    size_t len, cap;
    bool failed;
} bytes;

static void put(bytes *b, const void *v, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = nx_rt_alloc(b->ctx, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        if (b->len)
            memcpy(p, b->p, b->len);
        nx_rt_free(b->ctx, b->p, b->cap);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, v, n);
    b->len += n;
}

static void put_i64(bytes *b, int64_t v)
{
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)((uint64_t)v >> (8 * i));
    put(b, le, 8);
}

static void put_inst(bytes *b, const nx_kinst *in)
{
    put_i64(b, in->op | (in->dtype << 8) | ((int64_t)in->prim << 16));
    for (int j = 0; j < 3; j++)
        put_i64(b, in->a[j]);
    put_i64(b, in->i);
    int64_t fbits;
    memcpy(&fbits, &in->f, 8);
    put_i64(b, fbits);
}

nx_status nx_kernel_serialize(const nx_kernel *k, uint8_t **buf, size_t *len)
{
    bytes b = {.ctx = k->ctx};
    put(&b, "nxkir1", 6);
    put_i64(&b, k->kind);
    put_i64(&b, k->nbufs);
    for (int i = 0; i < k->nbufs; i++) {
        const nx_kbuf *kb = &k->bufs[i];
        put_i64(&b, kb->role | (kb->dtype << 8) | (kb->ndim << 16));
        for (int d = 0; d < kb->ndim; d++)
            put_i64(&b, kb->shape[d]);
    }
    if (k->kind == NX_KERNEL_LIBRARY) {
        put_i64(&b, k->lib_prim);
        put_i64(&b, k->nattrs);
        for (int i = 0; i < k->nattrs; i++)
            put_i64(&b, k->attrs[i]);
        put_i64(&b, k->has_prologue ? k->pro_operand : -1);
        put_i64(&b, k->has_epilogue ? k->epi_source : -1);
    }
    if (k->kind != NX_KERNEL_LIBRARY || k->has_prologue || k->has_epilogue) {
        put_i64(&b, k->ndim);
        put_i64(&b, k->nloops);
        for (int l = 0; l < k->nloops; l++)
            put_i64(&b, k->extent[l]);
        put_i64(&b, k->ninst);
        for (int i = 0; i < k->ninst; i++)
            put_inst(&b, &k->inst[i]);
        put_i64(&b, k->nstores);
        for (int s = 0; s < k->nstores; s++)
            put_i64(&b, ((int64_t)k->stores[s].buf << 32) | (uint32_t)k->stores[s].value);
    }
    if (b.failed) {
        nx_rt_free(k->ctx, b.p, b.cap);
        return nx_rt_nomem(k->ctx, "kernel serialisation", b.len);
    }
    /* Hand back an exact-size buffer so the caller frees with the length it gets. */
    uint8_t *out = nx_rt_alloc(k->ctx, b.len ? b.len : 1);
    if (!out) {
        nx_rt_free(k->ctx, b.p, b.cap);
        return nx_rt_nomem(k->ctx, "kernel serialisation", b.len);
    }
    memcpy(out, b.p, b.len);
    nx_rt_free(k->ctx, b.p, b.cap);
    *buf = out;
    *len = b.len;
    return NX_OK;
}

uint64_t nx_kernel_hash(const nx_kernel *k)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (nx_kernel_serialize(k, &buf, &len) != NX_OK)
        return 0;
    uint64_t h = 1469598103934665603ull; /* FNV-1a: a name, not a cache key */
    for (size_t i = 0; i < len; i++)
        h = (h ^ buf[i]) * 1099511628211ull;
    nx_rt_free(k->ctx, buf, len ? len : 1);
    return h;
}

/* ---- the interpreter -----------------------------------------------------------------------*/

typedef struct interp {
    const nx_kernel *k;
    void *const *bufs;
    int64_t idx[NX_KERNEL_MAX_LOOPS];
    const uint32_t *mask;
    nx_ir_val *val;
    int64_t (*at)[NX_KERNEL_MAX_LOOPS]; /* loop indices each cached value was computed at */
    bool *valid;
    nx_status st;
} interp;

static nx_ir_val eval(interp *it, int32_t id);

static bool cached(const interp *it, int32_t id)
{
    if (!it->valid[id])
        return false;
    for (int l = 0; l < it->k->nloops; l++)
        if ((it->mask[id] >> l & 1) && it->at[id][l] != it->idx[l])
            return false;
    return true;
}

static nx_ir_val eval_reduce(interp *it, const nx_kinst *in)
{
    const nx_kernel *k = it->k;
    uint32_t loops = (uint32_t)in->i;
    nx_dtype xd = k->inst[in->a[0]].dtype;
    nx_ir_carry c = nx_ir_monoid_init(in->prim, xd);
    int ls[NX_KERNEL_MAX_LOOPS], n = 0;
    int64_t total = 1;
    for (int l = 0; l < k->nloops; l++)
        if (loops >> l & 1) {
            ls[n++] = l;
            it->idx[l] = 0;
            total *= k->extent[l];
        }
    for (int64_t pos = 0; pos < total && it->st == NX_OK; pos++) {
        nx_ir_monoid_step(&c, in->prim, xd, eval(it, in->a[0]), pos);
        for (int j = n - 1; j >= 0; j--) {
            if (++it->idx[ls[j]] < k->extent[ls[j]])
                break;
            it->idx[ls[j]] = 0;
        }
    }
    return nx_ir_monoid_finish(&c, in->prim, xd);
}

static nx_ir_val eval_load(interp *it, const nx_kinst *in)
{
    const nx_kbuf *kb = &it->k->bufs[in->a[0]];
    int64_t off = eval(it, in->a[1]).i;
    int64_t n = nx_ir_numel(kb->ndim, kb->shape);
    if (off < 0 || off >= n) {
        if (it->st == NX_OK)
            it->st = nx_rt_error(it->k->ctx, NX_ERR_INTERNAL,
                                 "kernel %s: load from buffer %d at %lld; expected [0, %lld)",
                                 it->k->name, in->a[0], (long long)off, (long long)n);
        return (nx_ir_val){0, 0};
    }
    return nx_ir_get(it->bufs[in->a[0]], kb->dtype, off);
}

static nx_ir_val eval_prim(interp *it, const nx_kinst *in)
{
    const nx_kernel *k = it->k;
    nx_dtype d0 = k->inst[in->a[0]].dtype;
    nx_ir_val x = eval(it, in->a[0]);
    if (in->prim == NX_PRIM_SELECT) {
        nx_ir_val a = eval(it, in->a[1]), b = eval(it, in->a[2]);
        return x.i ? a : b;
    }
    if (in->prim == NX_PRIM_CAST)
        return nx_ir_convert(x, d0, in->dtype);
    if (prim_arity(in->prim) == 1)
        return nx_ir_scalar_unary(in->prim, d0, in->dtype, x);
    return nx_ir_scalar_binary(in->prim, d0, in->dtype, x, eval(it, in->a[1]));
}

static nx_ir_val eval(interp *it, int32_t id)
{
    if (cached(it, id))
        return it->val[id];
    const nx_kinst *in = &it->k->inst[id];
    nx_ir_val v = {0, 0};
    switch (in->op) {
    case NX_KOP_CONST:
        v = (nx_ir_val){in->f, in->i};
        break;
    case NX_KOP_IDX:
        v.i = it->idx[in->a[0]];
        break;
    case NX_KOP_LOAD:
        v = eval_load(it, in);
        break;
    case NX_KOP_PRIM:
        v = eval_prim(it, in);
        break;
    case NX_KOP_REDUCE: {
        int64_t saved[NX_KERNEL_MAX_LOOPS];
        memcpy(saved, it->idx, sizeof saved);
        v = eval_reduce(it, in);
        memcpy(it->idx, saved, sizeof saved);
        break;
    }
    default:
        break;
    }
    it->val[id] = v;
    memcpy(it->at[id], it->idx, sizeof it->idx);
    it->valid[id] = true;
    return v;
}

static nx_status interp_alloc(interp *it, nx_ctx *ctx, size_t n)
{
    it->mask = nx_rt_calloc(ctx, n, sizeof *it->mask);
    it->val = nx_rt_calloc(ctx, n, sizeof *it->val);
    it->at = nx_rt_calloc(ctx, n, sizeof *it->at);
    it->valid = nx_rt_calloc(ctx, n, sizeof *it->valid);
    if (!it->mask || !it->val || !it->at || !it->valid)
        return nx_rt_nomem(ctx, "kernel interpreter", n * sizeof *it->at);
    return NX_OK;
}

static void interp_free(interp *it, nx_ctx *ctx, size_t n)
{
    nx_rt_free(ctx, (void *)it->mask, n * sizeof *it->mask);
    nx_rt_free(ctx, it->val, n * sizeof *it->val);
    nx_rt_free(ctx, it->at, n * sizeof *it->at);
    nx_rt_free(ctx, it->valid, n * sizeof *it->valid);
}

nx_status nx_kernel_interpret(const nx_kernel *k, void *const *bufs)
{
    nx_status st = nx_kernel_validate(k);
    if (st != NX_OK)
        return st;
    if (k->kind != NX_KERNEL_LOOP)
        return nx_rt_error(k->ctx, NX_ERR_INTERNAL,
                           "kernel %s: the interpreter runs loop kernels only", k->name);
    size_t n = (size_t)k->ninst + 1;
    interp it = {.k = k, .bufs = bufs};
    st = interp_alloc(&it, k->ctx, n);
    if (st == NX_OK) {
        nx_kernel_loop_masks(k, (uint32_t *)it.mask);
        int64_t numel = nx_ir_numel(k->ndim, k->extent);
        for (int64_t p = 0; p < numel && it.st == NX_OK; p++) {
            for (int s = 0; s < k->nstores; s++) {
                const nx_kstore *so = &k->stores[s];
                nx_ir_put(bufs[so->buf], k->bufs[so->buf].dtype, p, eval(&it, so->value));
            }
            nx_ir_next(k->ndim, k->extent, it.idx);
        }
        st = it.st;
    }
    interp_free(&it, k->ctx, n);
    return st;
}

/* ---- plans ---------------------------------------------------------------------------------*/

void nx_kplan_free(nx_kplan *p)
{
    if (!p)
        return;
    nx_ctx *ctx = p->ctx;
    for (int i = 0; i < p->nkernels; i++)
        nx_kernel_free(p->kernels[i]);
    nx_rt_free(ctx, p->kernels, (size_t)p->kernels_cap * sizeof *p->kernels);
    nx_rt_free(ctx, p->slots, (size_t)p->slots_cap * sizeof *p->slots);
    nx_rt_free(ctx, p->outputs, (size_t)p->noutputs * sizeof *p->outputs);
    nx_rt_free(ctx, p, sizeof *p);
}

void nx_kplan_print(const nx_kplan *p, FILE *f)
{
    static const char *const kinds[] = {"input", "constant", "temp"};
    fprintf(f, "plan: %d slots, %d kernels, %d outputs\n", p->nslots, p->nkernels, p->noutputs);
    for (int i = 0; i < p->nslots; i++) {
        const nx_kslot *s = &p->slots[i];
        fprintf(f, "slot %d %s %s", i, kinds[s->kind], nx_dtype_name(s->dtype));
        print_shape(f, s->ndim, s->shape);
        fprintf(f, "\n");
    }
    for (int i = 0; i < p->nkernels; i++)
        nx_kernel_print(p->kernels[i], f);
    for (int i = 0; i < p->noutputs; i++)
        fprintf(f, "output %d = slot %d\n", i, p->outputs[i]);
}
