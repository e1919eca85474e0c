/* Leaves: input, parameter, constant (and scalar), iota, placeholder.
 *
 *   input/parameter  y = the program's positional argument (never merged by hash-consing)
 *   constant         y = the bytes copied into the graph (equal bytes: one node)
 *   iota             y[i_0..i_{n-1}] = i_axis
 *   placeholder      a scalar variable of a custom monoid (never merged) */
#include <inttypes.h>
#include <string.h>

#include "ir.h"

/* ---- shared leaf checks --------------------------------------------------------------------*/

static nx_status check_decl(nx_ir_check *ck, int64_t dtype, int64_t ndim, const int64_t *shape)
{
    char db[32];
    if (!nx_ir_dtype_ok(dtype))
        return nx_ir_fail(ck, NX_ERR_DTYPE, "dtype %s is not a dtype",
                          nx_ir_dtype_str(db, sizeof db, dtype));
    if (ndim < 0 || ndim > NX_MAX_DIMS)
        return nx_ir_fail(ck, NX_ERR_SHAPE, "ndim is %lld; expected 0 to %d", (long long)ndim,
                          NX_MAX_DIMS);
    if (ndim > 0 && !shape)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "shape is NULL with ndim %lld", (long long)ndim);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return nx_ir_fail(ck, NX_ERR_SHAPE, "extent %d is %lld; expected >= 0", i,
                              (long long)shape[i]);
    }
    int64_t numel, bytes;
    if (!nx_shape_numel((int)ndim, shape, &numel) ||
        !nx_mul_i64(numel, (int64_t)nx_dtype_size((nx_dtype)dtype), &bytes) ||
        bytes > INT64_MAX / 2) {
        char sb[160];
        return nx_ir_fail(ck, NX_ERR_SHAPE, "shape %s of %s overflows the address space",
                          nx_shape_str(sb, sizeof sb, (int)ndim, shape),
                          nx_dtype_name((nx_dtype)dtype));
    }
    return NX_OK;
}

static void set_sig(nx_ir_sig *out, int64_t dtype, int64_t ndim, const int64_t *shape)
{
    out->dtype = (nx_dtype)dtype;
    out->ndim = (int)ndim;
    for (int i = 0; i < ndim; i++)
        out->shape[i] = shape[i];
}

nx_status nx_ir_shape_leaf(nx_ir_check *ck, const nx_ir_store *s, const nx_ir_proto *p,
                           nx_ir_sig *out)
{
    (void)s;
    const int64_t *a = p->attrs;
    if (p->op == NX_PRIM_PLACEHOLDER) {
        if (p->nattrs != 2 || !nx_ir_dtype_ok(a[0]))
            return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "a placeholder has attributes [dtype, id]");
        out->dtype = (nx_dtype)a[0];
        out->ndim = 0;
        return NX_OK;
    }
    if (p->nattrs < 2 || a[1] < 0 || a[1] > NX_MAX_DIMS)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "malformed leaf attributes");
    int64_t ndim = a[1];
    int extra = p->op == NX_PRIM_CONSTANT ? 0 : 1;
    if (p->nattrs != 2 + ndim + extra)
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "%d attributes; expected %lld", p->nattrs,
                          (long long)(2 + ndim + extra));
    nx_status st = check_decl(ck, a[0], ndim, a + 2);
    if (st != NX_OK)
        return st;
    int64_t numel = nx_ir_numel((int)ndim, a + 2);
    if (p->op == NX_PRIM_CONSTANT && p->nblob != (size_t)numel * nx_dtype_size((nx_dtype)a[0]))
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "constant holds %zu bytes; expected %lld",
                          p->nblob, (long long)numel * (long long)nx_dtype_size((nx_dtype)a[0]));
    if (p->op == NX_PRIM_IOTA) {
        int64_t axis = a[2 + ndim];
        if (ndim == 0 || axis < 0 || axis >= ndim)
            return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "axis %lld is out of range for %lld dims",
                              (long long)axis, (long long)ndim);
    }
    if ((p->op == NX_PRIM_INPUT || p->op == NX_PRIM_PARAMETER) &&
        (a[2 + ndim] < 0 || p->nblob == 0 || ((const char *)p->blob)[p->nblob - 1] != '\0'))
        return nx_ir_fail(ck, NX_ERR_INVALID_ARG, "malformed input attributes");
    set_sig(out, a[0], ndim, a + 2);
    return NX_OK;
}

/* ---- builders ------------------------------------------------------------------------------*/

static nx_node make_input(nx_graph *g, const char *fn, nx_prim op, const char *name, nx_dtype dtype,
                          int ndim, const int64_t *shape)
{
    if (!g)
        return NX_NONE;
    nx_ir_check ck = {.fn = fn};
    if (check_decl(&ck, dtype, ndim, shape) != NX_OK) {
        nx_ir_graph_fail(g, ck.status, ck.msg);
        return NX_NONE;
    }
    if (!nx_rt_grow(g->s.ctx, (void **)&g->inputs, &g->inputs_cap, (size_t)g->ninputs + 1,
                    sizeof *g->inputs))
        return nx_ir_graph_failf(g, NX_ERR_NOMEM, "%s: out of memory growing the input list", fn);
    int64_t attrs[3 + NX_MAX_DIMS];
    attrs[0] = dtype;
    attrs[1] = ndim;
    for (int i = 0; i < ndim; i++)
        attrs[2 + i] = shape[i];
    attrs[2 + ndim] = g->ninputs;
    if (!name)
        name = "";
    size_t len = strnlen(name, 255);
    char buf[256];
    memcpy(buf, name, len);
    buf[len] = '\0';
    nx_node id = nx_ir_make(g, fn, op, 0, NULL, 3 + ndim, attrs, len + 1, buf);
    if (id)
        g->inputs[g->ninputs++] = id;
    return id;
}

nx_node nx_input(nx_graph *g, const char *name, nx_dtype dtype, int ndim, const int64_t *shape)
{
    return make_input(g, "nx_input", NX_PRIM_INPUT, name, dtype, ndim, shape);
}

nx_node nx_parameter(nx_graph *g, const char *name, nx_dtype dtype, int ndim, const int64_t *shape)
{
    return make_input(g, "nx_parameter", NX_PRIM_PARAMETER, name, dtype, ndim, shape);
}

nx_node nx_constant(nx_graph *g, nx_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
    if (!g)
        return NX_NONE;
    nx_ir_check ck = {.fn = "nx_constant"};
    if (check_decl(&ck, dtype, ndim, shape) != NX_OK) {
        nx_ir_graph_fail(g, ck.status, ck.msg);
        return NX_NONE;
    }
    size_t bytes = (size_t)nx_ir_numel(ndim, shape) * nx_dtype_size(dtype);
    if (!data && bytes > 0)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_constant: data is NULL for %zu bytes; expected the values",
                                 bytes);
    int64_t attrs[2 + NX_MAX_DIMS];
    attrs[0] = dtype;
    attrs[1] = ndim;
    for (int i = 0; i < ndim; i++)
        attrs[2 + i] = shape[i];
    return nx_ir_make(g, "nx_constant", NX_PRIM_CONSTANT, 0, NULL, 2 + ndim, attrs, bytes, data);
}

nx_node nx_scalar(nx_graph *g, nx_dtype dtype, double value)
{
    if (!g)
        return NX_NONE;
    if (!nx_ir_dtype_ok(dtype))
        return nx_ir_graph_failf(g, NX_ERR_DTYPE, "nx_scalar: dtype %d is not a dtype", (int)dtype);
    uint8_t buf[8] = {0};
    nx_ir_put(buf, dtype, 0, nx_ir_from_double(value, dtype));
    int64_t attrs[2] = {dtype, 0};
    return nx_ir_make(g, "nx_scalar", NX_PRIM_CONSTANT, 0, NULL, 2, attrs, nx_dtype_size(dtype),
                      buf);
}

nx_node nx_iota(nx_graph *g, nx_dtype dtype, int ndim, const int64_t *shape, int axis)
{
    if (!g)
        return NX_NONE;
    nx_ir_check ck = {.fn = "nx_iota"};
    if (check_decl(&ck, dtype, ndim, shape) != NX_OK) {
        nx_ir_graph_fail(g, ck.status, ck.msg);
        return NX_NONE;
    }
    int ax;
    if (!nx_ir_axis(axis, ndim, &ax) || ndim == 0)
        return nx_ir_graph_failf(g, NX_ERR_INVALID_ARG,
                                 "nx_iota: axis %d is out of range for %d dims; expected %d to %d",
                                 axis, ndim, -ndim, ndim - 1);
    int64_t attrs[3 + NX_MAX_DIMS];
    attrs[0] = dtype;
    attrs[1] = ndim;
    for (int i = 0; i < ndim; i++)
        attrs[2 + i] = shape[i];
    attrs[2 + ndim] = ax;
    return nx_ir_make(g, "nx_iota", NX_PRIM_IOTA, 0, NULL, 3 + ndim, attrs, 0, NULL);
}

nx_node nx_placeholder(nx_graph *g, nx_dtype dtype)
{
    if (!g)
        return NX_NONE;
    if (!nx_ir_dtype_ok(dtype) || nx_ir_is_half(dtype))
        return nx_ir_graph_failf(g, NX_ERR_DTYPE,
                                 "nx_placeholder: dtype %d is not usable; expected f32, f64, an "
                                 "integer dtype or bool",
                                 (int)dtype);
    int64_t attrs[2] = {dtype, g->nplaceholders};
    nx_node id = nx_ir_make(g, "nx_placeholder", NX_PRIM_PLACEHOLDER, 0, NULL, 2, attrs, 0, NULL);
    if (id)
        g->nplaceholders++;
    return id;
}

/* ---- reference kernels ---------------------------------------------------------------------*/

nx_status nx_ir_ref_input(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                          nx_tensor *out)
{
    (void)ins;
    int64_t index = nx_ir_node_attrs(ev->s, n)[2 + n->ndim];
    const nx_tensor *t = ev->inputs[index];
    size_t bytes = (size_t)nx_tensor_numel(out) * nx_dtype_size(out->dtype);
    if (bytes)
        memcpy(nx_tensor_data(out), nx_tensor_data(t), bytes);
    return NX_OK;
}

nx_status nx_ir_ref_constant(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                             nx_tensor *out)
{
    (void)ins;
    if (n->nblob)
        memcpy(nx_tensor_data(out), nx_ir_node_blob(ev->s, n), n->nblob);
    return NX_OK;
}

nx_status nx_ir_ref_iota(const nx_ir_eval *ev, const nx_ir_node *n, const nx_tensor *const *ins,
                         nx_tensor *out)
{
    (void)ins;
    int axis = (int)nx_ir_node_attrs(ev->s, n)[2 + n->ndim];
    int64_t numel = nx_tensor_numel(out);
    int64_t idx[NX_MAX_DIMS] = {0};
    void *y = nx_tensor_data(out);
    for (int64_t i = 0; i < numel; i++) {
        nx_ir_put(y, out->dtype, i, nx_ir_from_double((double)idx[axis], out->dtype));
        nx_ir_next(n->ndim, n->shape, idx);
    }
    return NX_OK;
}

nx_status nx_ir_ref_placeholder(const nx_ir_eval *ev, const nx_ir_node *n,
                                const nx_tensor *const *ins, nx_tensor *out)
{
    (void)n;
    (void)ins;
    (void)out;
    return nx_rt_error(ev->ctx, NX_ERR_INTERNAL,
                       "interpreter: a placeholder was evaluated outside its monoid");
}

/* ---- printing ------------------------------------------------------------------------------*/

void nx_ir_attrs_none(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    (void)f;
    (void)s;
    (void)n;
}

/* Names are the caller's bytes: escape them so one node stays one line. */
static void print_name(FILE *f, const char *name)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20 || *c >= 0x7f)
            fprintf(f, "\\x%02x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

void nx_ir_attrs_input(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    const int64_t *a = nx_ir_node_attrs(s, n);
    fputs("[name=", f);
    print_name(f, (const char *)nx_ir_node_blob(s, n));
    fprintf(f, ", index=%lld]", (long long)a[2 + n->ndim]);
}

static void print_value(FILE *f, nx_dtype dt, nx_ir_val v)
{
    if (nx_ir_is_float(dt))
        fprintf(f, "%.9g", v.f);
    else
        fprintf(f, "%" PRId64, v.i);
}

void nx_ir_attrs_constant(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    int64_t numel = nx_ir_numel(n->ndim, n->shape);
    int64_t shown = numel <= 4 ? numel : 3;
    fputc('[', f);
    for (int64_t i = 0; i < shown; i++) {
        if (i)
            fputs(", ", f);
        print_value(f, (nx_dtype)n->dtype, nx_ir_get(nx_ir_node_blob(s, n), n->dtype, i));
    }
    if (shown < numel)
        fprintf(f, ", ... %lld values", (long long)numel);
    fputc(']', f);
}

void nx_ir_attrs_iota(FILE *f, const nx_ir_store *s, const nx_ir_node *n)
{
    fprintf(f, "[axis=%lld]", (long long)nx_ir_node_attrs(s, n)[2 + n->ndim]);
}
