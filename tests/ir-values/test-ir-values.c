/* Values of every graph IR primitive on the reference interpreter, checked against fixtures from
 * NumPy/scipy in float64 (tools/gen-ir-fixtures.py). One cmocka test per manifest case: build the
 * graph through the public builders, verify, compile for NX_BACKEND_REF, run on host tensors
 * (inputs may be strided, reversed, permuted or stride-0 views), and compare every element with
 * |got - want| <= atol + rtol*|want| (NaN equals NaN; 0 0 means exact).
 *
 * Cases listed in known-failures.txt (each with a reference into the IR bug notes) are run and
 * reported but skipped rather than failed; one that starts passing is reported too.
 *
 * Usage: test-ir-values [FILTER]   runs only cases whose name contains FILTER. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"
#include "testutil.h"

#define MAX_OUT 4
#define MSG 1024

static mf_manifest manifest;

/* ------------------------------------------------------------------------------------------------
 * Graph construction, one builder per manifest op
 * ----------------------------------------------------------------------------------------------*/

typedef struct build {
    nx_graph *g;
    const mf_case *c;
    nx_node in[MF_MAX_ARRAYS];
    nx_node out[MAX_OUT];
    int nout;
} build;

static const struct {
    const char *name;
    nx_node (*fn)(nx_graph *, nx_node);
} unary_ops[] = {
    {"neg", nx_neg},     {"abs", nx_abs},     {"exp", nx_exp},     {"log", nx_log},
    {"log1p", nx_log1p}, {"expm1", nx_expm1}, {"sqrt", nx_sqrt},   {"rsqrt", nx_rsqrt},
    {"sin", nx_sin},     {"cos", nx_cos},     {"tanh", nx_tanh},   {"erf", nx_erf},
    {"floor", nx_floor}, {"ceil", nx_ceil},   {"round", nx_round}, {"sign", nx_sign},
    {"isnan", nx_isnan}, {"not", nx_not},
};

static const struct {
    const char *name;
    nx_binary_builder fn;
} binary_ops[] = {
    {"add", nx_add}, {"sub", nx_sub},         {"mul", nx_mul},         {"div", nx_div},
    {"pow", nx_pow}, {"minimum", nx_minimum}, {"maximum", nx_maximum}, {"atan2", nx_atan2},
    {"mod", nx_mod}, {"eq", nx_eq},           {"ne", nx_ne},           {"lt", nx_lt},
    {"le", nx_le},   {"gt", nx_gt},           {"ge", nx_ge},           {"and", nx_and},
    {"or", nx_or},
};

static bool monoid_of(const char *name, nx_monoid *m)
{
    static const char *names[NX_MONOID_COUNT] = {"sum",       "prod",   "max",   "min",
                                                 "logsumexp", "argmax", "argmin"};
    for (int i = 0; i < NX_MONOID_COUNT; i++) {
        if (strcmp(name, names[i]) == 0) {
            *m = (nx_monoid)i;
            return true;
        }
    }
    return false;
}

static bool pad_mode_of(const char *name, nx_pad_mode *m)
{
    static const char *names[NX_PAD_MODE_COUNT] = {
        [NX_PAD_CONSTANT] = "constant", [NX_PAD_REFLECT] = "reflect", [NX_PAD_MIRROR] = "mirror",
        [NX_PAD_NEAREST] = "nearest",   [NX_PAD_WRAP] = "wrap"};
    for (int i = 0; i < NX_PAD_MODE_COUNT; i++) {
        if (strcmp(name, names[i]) == 0) {
            *m = (nx_pad_mode)i;
            return true;
        }
    }
    return false;
}

static nx_binary_builder binary_of(const char *name)
{
    for (size_t i = 0; i < sizeof binary_ops / sizeof *binary_ops; i++) {
        if (strcmp(name, binary_ops[i].name) == 0)
            return binary_ops[i].fn;
    }
    return NULL;
}

/* int attrs into an int array (axes, perm) */
static int attr_axes(const mf_case *c, const char *key, int *axes)
{
    int64_t v[NX_MAX_DIMS];
    int n = mf_attr_ints(c, key, v, NX_MAX_DIMS);
    for (int i = 0; i < n; i++)
        axes[i] = (int)v[i];
    return n;
}

static nx_dtype attr_dtype(const mf_case *c)
{
    nx_dtype d = NX_DTYPE_COUNT;
    return mf_dtype(mf_attr_word(c, "dtype"), &d) ? d : NX_DTYPE_COUNT;
}

static bool b_reduce(build *b)
{
    int axes[NX_MAX_DIMS];
    int n = attr_axes(b->c, "axes", axes);
    nx_monoid m;
    if (n < 0 || !monoid_of(mf_attr_word(b->c, "monoid"), &m))
        return false;
    b->out[0] = nx_reduce(b->g, b->in[0], n, axes, m, mf_attr_int(b->c, "keepdims", 0) != 0);
    return true;
}

/* User monoids (the generator's gen_reduce and gen_custom_monoids give their meaning). */
static void monoid_sum_like(nx_graph *g, nx_monoid_def *m, int i, nx_dtype dt)
{
    m->a[i] = nx_placeholder(g, dt);
    m->b[i] = nx_placeholder(g, dt);
    m->combine[i] = nx_add(g, m->a[i], m->b[i]);
    m->identity[i] = nx_scalar(g, dt, 0.0);
}

static bool make_monoid(nx_graph *g, const char *name, nx_dtype dt, nx_monoid_def *m)
{
    memset(m, 0, sizeof *m);
    m->x = nx_placeholder(g, dt);
    m->ncarry = 1;
    if (strcmp(name, "mean2") == 0) {
        /* carry (sum, count), finalize sum / count */
        m->ncarry = 2;
        monoid_sum_like(g, m, 0, dt);
        monoid_sum_like(g, m, 1, dt);
        m->lift[0] = m->x;
        m->lift[1] = nx_scalar(g, dt, 1.0);
        m->finalize = nx_div(g, m->a[0], m->a[1]);
    } else if (strcmp(name, "sumsq") == 0) {
        monoid_sum_like(g, m, 0, dt);
        m->lift[0] = nx_mul(g, m->x, m->x);
    } else if (strcmp(name, "wrapsum") == 0) {
        monoid_sum_like(g, m, 0, dt); /* lift NX_NONE: the element itself */
    } else if (strcmp(name, "count_pos") == 0) {
        monoid_sum_like(g, m, 0, dt);
        m->lift[0] = nx_cast(g, nx_gt(g, m->x, nx_scalar(g, dt, 0.0)), dt);
    } else if (strcmp(name, "absmax") == 0 || strcmp(name, "selmax") == 0) {
        m->a[0] = nx_placeholder(g, dt);
        m->b[0] = nx_placeholder(g, dt);
        bool sel = name[0] == 's';
        m->lift[0] = sel ? NX_NONE : nx_abs(g, m->x);
        m->combine[0] = sel ? nx_select(g, nx_gt(g, m->a[0], m->b[0]), m->a[0], m->b[0])
                            : nx_maximum(g, m->a[0], m->b[0]);
        m->identity[0] = nx_scalar(g, dt, sel ? -INFINITY : 0.0);
    } else if (strcmp(name, "stats4") == 0) {
        /* (sum, sum of squares, min, max), finalize their sum */
        m->ncarry = 4;
        monoid_sum_like(g, m, 0, dt);
        monoid_sum_like(g, m, 1, dt);
        for (int i = 2; i < 4; i++) {
            m->a[i] = nx_placeholder(g, dt);
            m->b[i] = nx_placeholder(g, dt);
            m->identity[i] = nx_scalar(g, dt, i == 2 ? INFINITY : -INFINITY);
        }
        m->combine[2] = nx_minimum(g, m->a[2], m->b[2]);
        m->combine[3] = nx_maximum(g, m->a[3], m->b[3]);
        m->lift[0] = m->lift[2] = m->lift[3] = m->x;
        m->lift[1] = nx_mul(g, m->x, m->x);
        m->finalize = nx_add(g, nx_add(g, m->a[0], m->a[1]), nx_add(g, m->a[2], m->a[3]));
    } else {
        return false;
    }
    return true;
}

static bool b_reduce_custom(build *b)
{
    int axes[NX_MAX_DIMS];
    int n = attr_axes(b->c, "axes", axes);
    nx_monoid_def m;
    if (n < 0 || !make_monoid(b->g, mf_attr_word(b->c, "monoid"), nx_node_dtype(b->g, b->in[0]),
                              &m))
        return false;
    b->out[0] = nx_reduce_custom(b->g, b->in[0], n, axes, &m, mf_attr_int(b->c, "keepdims", 0));
    return true;
}

static bool b_scan(build *b)
{
    nx_monoid m;
    if (!monoid_of(mf_attr_word(b->c, "monoid"), &m))
        return false;
    b->out[0] = nx_scan(b->g, b->in[0], (int)mf_attr_int(b->c, "axis", 0), m,
                        mf_attr_int(b->c, "reverse", 0) != 0);
    return true;
}

static bool b_scan_linear(build *b)
{
    b->out[0] = nx_scan_linear(b->g, b->in[0], b->in[1], (int)mf_attr_int(b->c, "axis", 0),
                               mf_attr_int(b->c, "reverse", 0) != 0);
    return true;
}

static bool b_scan_iir(build *b)
{
    const mf_attr *a = mf_attr_get(b->c, "coef");
    double coef[NX_SCAN_IIR_MAX_ORDER];
    if (!a || a->nvals < 1 || a->nvals > NX_SCAN_IIR_MAX_ORDER)
        return false;
    for (int j = 0; j < a->nvals; j++)
        coef[j] = strtod(a->vals[j], NULL);
    b->out[0] = nx_scan_iir(b->g, b->in[0], (int)mf_attr_int(b->c, "axis", 0),
                            mf_attr_int(b->c, "reverse", 0) != 0, a->nvals, coef);
    return true;
}

static bool b_sort(build *b)
{
    int axis = (int)mf_attr_int(b->c, "axis", 0);
    bool desc = mf_attr_int(b->c, "descending", 0) != 0;
    if (strcmp(b->c->op, "sort") == 0)
        b->out[0] = nx_sort(b->g, b->in[0], axis, desc);
    else
        b->out[0] = nx_argsort(b->g, b->in[0], axis, desc);
    return true;
}

static bool b_topk(build *b)
{
    nx_topk(b->g, b->in[0], mf_attr_int(b->c, "k", 1), (int)mf_attr_int(b->c, "axis", 0),
            mf_attr_int(b->c, "largest", 1) != 0, &b->out[0], &b->out[1]);
    b->nout = 2;
    return true;
}

static bool b_select(build *b)
{
    if (strcmp(b->c->op, "where") == 0)
        b->out[0] = nx_where(b->g, b->in[0], b->in[1], b->in[2]);
    else
        b->out[0] = nx_select(b->g, b->in[0], b->in[1], b->in[2]);
    return true;
}

static bool b_cast(build *b)
{
    b->out[0] = nx_cast(b->g, b->in[0], attr_dtype(b->c));
    return true;
}

static bool b_reshape(build *b)
{
    int64_t shape[NX_MAX_DIMS];
    int n = mf_attr_ints(b->c, "shape", shape, NX_MAX_DIMS);
    b->out[0] = nx_reshape(b->g, b->in[0], n, shape);
    return n >= 0;
}

static bool b_permute(build *b)
{
    int perm[NX_MAX_DIMS];
    int n = attr_axes(b->c, "perm", perm);
    b->out[0] = nx_permute(b->g, b->in[0], perm);
    return n >= 0;
}

static bool b_broadcast(build *b)
{
    int64_t shape[NX_MAX_DIMS];
    int n = mf_attr_ints(b->c, "shape", shape, NX_MAX_DIMS);
    b->out[0] = nx_broadcast(b->g, b->in[0], n, shape);
    return n >= 0;
}

static bool b_slice(build *b)
{
    int64_t start[NX_MAX_DIMS], stop[NX_MAX_DIMS], step[NX_MAX_DIMS];
    int n0 = mf_attr_ints(b->c, "start", start, NX_MAX_DIMS);
    int n1 = mf_attr_ints(b->c, "stop", stop, NX_MAX_DIMS);
    int n2 = mf_attr_ints(b->c, "step", step, NX_MAX_DIMS);
    b->out[0] = nx_slice(b->g, b->in[0], start, stop, n2 < 0 ? NULL : step);
    return n0 >= 0 && n1 >= 0;
}

static bool b_pad(build *b)
{
    int64_t lo[NX_MAX_DIMS], hi[NX_MAX_DIMS];
    nx_pad_mode mode;
    if (mf_attr_ints(b->c, "lo", lo, NX_MAX_DIMS) < 0 ||
        mf_attr_ints(b->c, "hi", hi, NX_MAX_DIMS) < 0 ||
        !pad_mode_of(mf_attr_word(b->c, "mode"), &mode))
        return false;
    b->out[0] = nx_pad(b->g, b->in[0], lo, hi, mode, mf_attr_double(b->c, "cval", 0.0));
    return true;
}

static bool b_reverse(build *b)
{
    int axes[NX_MAX_DIMS];
    int n = attr_axes(b->c, "axes", axes);
    b->out[0] = nx_reverse(b->g, b->in[0], n, axes);
    return n >= 0;
}

static bool b_concat(build *b)
{
    b->out[0] = nx_concat(b->g, b->c->nin, b->in, (int)mf_attr_int(b->c, "axis", 0));
    return true;
}

static bool b_window(build *b)
{
    int64_t w[NX_MAX_DIMS], s[NX_MAX_DIMS], d[NX_MAX_DIMS];
    int nw = mf_attr_ints(b->c, "window", w, NX_MAX_DIMS);
    int ns = mf_attr_ints(b->c, "stride", s, NX_MAX_DIMS);
    int nd = mf_attr_ints(b->c, "dilation", d, NX_MAX_DIMS);
    b->out[0] = nx_window(b->g, b->in[0], w, ns < 0 ? NULL : s, nd < 0 ? NULL : d);
    return nw >= 0;
}

static bool b_gather(build *b)
{
    b->out[0] = nx_gather(b->g, b->in[0], b->in[1], (int)mf_attr_int(b->c, "axis", 0));
    return true;
}

static bool b_scatter(build *b)
{
    nx_monoid m;
    if (!monoid_of(mf_attr_word(b->c, "monoid"), &m))
        return false;
    b->out[0] =
        nx_scatter(b->g, b->in[0], b->in[1], b->in[2], (int)mf_attr_int(b->c, "axis", 0), m);
    return true;
}

static bool b_iota(build *b)
{
    int64_t shape[NX_MAX_DIMS];
    int n = mf_attr_ints(b->c, "shape", shape, NX_MAX_DIMS);
    b->out[0] = nx_iota(b->g, attr_dtype(b->c), n, shape, (int)mf_attr_int(b->c, "axis", 0));
    return n >= 0;
}

static bool b_scalar(build *b)
{
    b->out[0] = nx_scalar(b->g, attr_dtype(b->c), mf_attr_double(b->c, "value", 0.0));
    return true;
}

static bool b_parameter_add(build *b)
{
    b->out[0] = nx_add(b->g, b->in[0], b->in[1]);
    return true;
}

static bool b_matmul(build *b)
{
    b->out[0] = nx_matmul(b->g, b->in[0], b->in[1]);
    return true;
}

static bool b_einsum(build *b)
{
    nx_monoid plus;
    nx_binary_builder times = binary_of(mf_attr_word(b->c, "times"));
    if (!monoid_of(mf_attr_word(b->c, "plus"), &plus) || !times)
        return false;
    b->out[0] = nx_einsum(b->g, mf_attr_word(b->c, "spec"), b->in[0], b->in[1], plus, times);
    return true;
}

static bool b_mean_var(build *b)
{
    int axes[NX_MAX_DIMS];
    int n = attr_axes(b->c, "axes", axes);
    bool keep = mf_attr_int(b->c, "keepdims", 0) != 0;
    if (strcmp(b->c->op, "mean") == 0)
        b->out[0] = nx_mean(b->g, b->in[0], n, axes, keep);
    else
        b->out[0] = nx_var(b->g, b->in[0], n, axes, (int)mf_attr_int(b->c, "ddof", 0), keep);
    return n >= 0;
}

static bool b_softmax(build *b)
{
    b->out[0] = nx_softmax(b->g, b->in[0], (int)mf_attr_int(b->c, "axis", 0));
    return true;
}

/* Grey dilation/erosion as scipy.ndimage computes it: reduce(window(pad(x))). */
static bool b_compose_morph(build *b)
{
    int64_t size[NX_MAX_DIMS], lo[NX_MAX_DIMS];
    int n = mf_attr_ints(b->c, "size", size, NX_MAX_DIMS);
    nx_pad_mode mode;
    nx_monoid m;
    if (n < 0 || !pad_mode_of(mf_attr_word(b->c, "mode"), &mode) ||
        !monoid_of(mf_attr_word(b->c, "monoid"), &m))
        return false;
    int axes[NX_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        lo[i] = size[i] / 2;
        axes[i] = n + i;
    }
    nx_node p = nx_pad(b->g, b->in[0], lo, lo, mode, mf_attr_double(b->c, "cval", 0.0));
    b->out[0] = nx_reduce(b->g, nx_window(b->g, p, size, NULL, NULL), n, axes, m, false);
    return true;
}

/* scipy.ndimage.correlate1d along the last axis of a 2-D x with a 5-tap w. */
static bool b_compose_correlate1d(build *b)
{
    nx_pad_mode mode;
    if (!pad_mode_of(mf_attr_word(b->c, "mode"), &mode))
        return false;
    int64_t lo[2] = {0, 2}, win[2] = {1, 5};
    int axes[2] = {2, 3};
    nx_node p = nx_pad(b->g, b->in[0], lo, lo, mode, mf_attr_double(b->c, "cval", 0.0));
    nx_node prod = nx_mul(b->g, nx_window(b->g, p, win, NULL, NULL), b->in[1]);
    b->out[0] = nx_reduce(b->g, prod, 2, axes, NX_MONOID_SUM, false);
    return true;
}

/* A chain of movement steps "sK NAME INTS..." applied in order (the generator's chain_step). */
/* Step NAME with integer parameters vals[first..] of a. */
static nx_node chain_step(nx_graph *g, nx_node x, const mf_attr *a, int first)
{
    int64_t v[MF_MAX_VALS];
    int nv = a->nvals - first, nd = nx_node_ndim(g, x);
    const char *name = a->vals[0];
    for (int i = 0; i < nv; i++)
        v[i] = strtoll(a->vals[i + first], NULL, 10);
    int ax[NX_MAX_DIMS];
    for (int i = 0; i < nv && i < NX_MAX_DIMS; i++)
        ax[i] = (int)v[i];
    if (nd < 0)
        return NX_NONE;
    if (strcmp(name, "reverse") == 0)
        return nx_reverse(g, x, nv, ax);
    if (strcmp(name, "permute") == 0)
        return nx_permute(g, x, ax);
    if (strcmp(name, "broadcast") == 0)
        return nx_broadcast(g, x, nv, v);
    if (strcmp(name, "reshape") == 0)
        return nx_reshape(g, x, nv, v);
    if (strcmp(name, "reducemax") == 0)
        return nx_reduce(g, x, 1, ax, NX_MONOID_MAX, false);
    if (strcmp(name, "concatself") == 0)
        return nx_concat(g, 2, (nx_node[]){x, x}, ax[0]);
    if (strcmp(name, "gather") == 0) {
        int64_t n = nv - 1;
        return nx_gather(g, x, nx_constant(g, NX_DTYPE_I64, 1, &n, v + 1), ax[0]);
    }
    if (strcmp(name, "slice") == 0) {
        int64_t start[NX_MAX_DIMS], stop[NX_MAX_DIMS], step[NX_MAX_DIMS];
        for (int i = 0; i < nd; i++)
            start[i] = v[3 * i], stop[i] = v[3 * i + 1], step[i] = v[3 * i + 2];
        return nx_slice(g, x, start, stop, step);
    }
    if (strcmp(name, "pad") == 0) {
        /* The generator numbers modes constant, reflect, mirror, nearest, wrap. */
        static const nx_pad_mode gen_order[] = {NX_PAD_CONSTANT, NX_PAD_REFLECT, NX_PAD_MIRROR,
                                                NX_PAD_NEAREST, NX_PAD_WRAP};
        if (v[0] < 0 || v[0] >= NX_PAD_MODE_COUNT)
            return NX_NONE;
        return nx_pad(g, x, v + 1, v + 1 + nd, gen_order[v[0]], 0.5);
    }
    if (strcmp(name, "window") == 0)
        return nx_window(g, x, v, v + nd, v + 2 * nd);
    return NX_NONE;
}

static bool b_chain(build *b)
{
    nx_node x = b->in[0];
    for (int k = 0; k < MF_MAX_ATTRS; k++) {
        char key[16];
        snprintf(key, sizeof key, "s%d", k);
        const mf_attr *a = mf_attr_get(b->c, key);
        if (!a)
            break;
        if (a->nvals < 1)
            return false;
        x = chain_step(b->g, x, a, 1);
    }
    b->out[0] = x;
    return true;
}

/* ------------------------------------------------------------------------------------------------
 * Random DAGs: attrs n0, n1, ... each "OP ARGS", operands named iK (input K) or nK (node K);
 * attr outs names the outputs. The generator's dag_step is the reference for the grammar.
 * ----------------------------------------------------------------------------------------------*/

static nx_node dag_ref(const build *b, const nx_node *nodes, int nn, const char *tok)
{
    char *end = NULL;
    long k = strtol(tok + 1, &end, 10);
    if (end == tok + 1 || *end != '\0' || k < 0)
        return NX_NONE;
    if (tok[0] == 'i' && k < b->c->nin)
        return b->in[k];
    if (tok[0] == 'n' && k < nn)
        return nodes[k];
    return NX_NONE;
}

static nx_node dag_node(build *b, const nx_node *nodes, int nn, const mf_attr *a)
{
    nx_graph *g = b->g;
    const char *op = a->vals[0];
    int n = a->nvals;
#define REF(i) ((i) < n ? dag_ref(b, nodes, nn, a->vals[i]) : NX_NONE)
#define INT(i) ((i) < n ? (int)strtol(a->vals[i], NULL, 10) : 0)
    for (size_t i = 0; i < sizeof unary_ops / sizeof *unary_ops; i++) {
        if (strcmp(op, unary_ops[i].name) == 0)
            return unary_ops[i].fn(g, REF(1));
    }
    nx_binary_builder bin = binary_of(op);
    if (bin)
        return bin(g, REF(1), REF(2));
    nx_monoid m;
    if (strcmp(op, "select") == 0)
        return nx_select(g, REF(1), REF(2), REF(3));
    if (strcmp(op, "cast") == 0) {
        nx_dtype d = NX_DTYPE_COUNT;
        return mf_dtype(a->vals[1], &d) ? nx_cast(g, REF(2), d) : NX_NONE;
    }
    if (strcmp(op, "reduce") == 0 && monoid_of(a->vals[1], &m)) {
        int axes[NX_MAX_DIMS], k = 0;
        for (int i = 4; i < n && k < NX_MAX_DIMS; i++)
            axes[k++] = INT(i);
        return nx_reduce(g, REF(3), k, axes, m, INT(2) != 0);
    }
    if (strcmp(op, "scan") == 0 && monoid_of(a->vals[1], &m))
        return nx_scan(g, REF(4), INT(3), m, INT(2) != 0);
    if (strcmp(op, "sort") == 0)
        return nx_sort(g, REF(3), INT(2), INT(1) != 0);
    if (strcmp(op, "argsort") == 0)
        return nx_argsort(g, REF(3), INT(2), INT(1) != 0);
    if (strcmp(op, "gather") == 0)
        return nx_gather(g, REF(2), REF(3), INT(1));
    if (strcmp(op, "scatter") == 0 && monoid_of(a->vals[2], &m))
        return nx_scatter(g, REF(3), REF(4), REF(5), INT(1), m);
    if (strcmp(op, "concat") == 0)
        return nx_concat(g, 2, (nx_node[]){REF(2), REF(3)}, INT(1));
    /* movement: NAME REF PARAMS... */
    return n >= 2 ? chain_step(g, REF(1), a, 2) : NX_NONE;
#undef REF
#undef INT
}

static bool b_dag(build *b)
{
    nx_node nodes[MF_MAX_ATTRS];
    int nn = 0;
    for (int k = 0; k < MF_MAX_ATTRS; k++) {
        char key[16];
        snprintf(key, sizeof key, "n%d", k);
        const mf_attr *a = mf_attr_get(b->c, key);
        if (!a)
            break;
        if (a->nvals < 1)
            return false;
        nodes[nn] = dag_node(b, nodes, nn, a);
        nn++;
    }
    const mf_attr *outs = mf_attr_get(b->c, "outs");
    if (!outs || outs->nvals > MAX_OUT)
        return false;
    b->nout = outs->nvals;
    for (int k = 0; k < outs->nvals; k++)
        b->out[k] = dag_ref(b, nodes, nn, outs->vals[k]);
    return true;
}

/* rowsum(x)[i] = sum_j x[i, j] as an extern op whose reference insists on contiguous input, as
 * the header promises it. */
static nx_status rowsum_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                              const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                              int64_t out_shape[NX_MAX_DIMS])
{
    (void)user;
    if (n_in != 1 || ndims[0] != 2)
        return NX_ERR_SHAPE;
    *out_dtype = dtypes[0];
    *out_ndim = 1;
    out_shape[0] = shapes[0][0];
    return NX_OK;
}

static nx_status rowsum_reference(void *user, nx_ctx *ctx, int n_in, const nx_tensor *const *ins,
                                  nx_tensor *out)
{
    (void)user;
    (void)ctx;
    const nx_tensor *x = ins[0];
    if (n_in != 1 || !nx_tensor_is_contiguous(x) || !nx_tensor_is_contiguous(out) ||
        nx_tensor_ndim(x) != 2 || nx_tensor_ndim(out) != 1 ||
        nx_tensor_shape(out)[0] != nx_tensor_shape(x)[0] ||
        nx_tensor_dtype(out) != nx_tensor_dtype(x))
        return NX_ERR_INVALID_ARG;
    int64_t n = nx_tensor_shape(x)[0], m = nx_tensor_shape(x)[1];
    bool f32 = nx_tensor_dtype(x) == NX_DTYPE_F32;
    for (int64_t i = 0; i < n; i++) {
        double s = 0;
        for (int64_t j = 0; j < m; j++)
            s += f32 ? ((const float *)nx_tensor_data(x))[i * m + j]
                     : ((const double *)nx_tensor_data(x))[i * m + j];
        if (f32)
            ((float *)nx_tensor_data(out))[i] = (float)s;
        else
            ((double *)nx_tensor_data(out))[i] = s;
    }
    return NX_OK;
}

static const nx_extern_def rowsum_def = {
    .name = "rowsum", .shape = rowsum_shape, .reference = rowsum_reference};

static bool b_extern_rowsum(build *b)
{
    nx_node x = b->in[0];
    if (strcmp(b->c->op, "extern_rowsum_chain") == 0) {
        /* exp(rowsum(reverse(x, 0) * 2)) */
        int axis = 0;
        nx_node two = nx_scalar(b->g, nx_node_dtype(b->g, x), 2.0);
        x = nx_mul(b->g, nx_reverse(b->g, x, 1, &axis), two);
        b->out[0] = nx_exp(b->g, nx_extern(b->g, &rowsum_def, 1, &x));
        return true;
    }
    b->out[0] = nx_extern(b->g, &rowsum_def, 1, &x);
    return true;
}

/* Pairs of nodes that differ in one detail (see gen_hashcons in the generator). */
static bool b_concat_self(build *b)
{
    b->out[0] =
        nx_concat(b->g, 2, (nx_node[]){b->in[0], b->in[0]}, (int)mf_attr_int(b->c, "axis", 0));
    return true;
}

static bool b_gather_const(build *b)
{
    int64_t idx[MF_MAX_VALS];
    int64_t n = mf_attr_ints(b->c, "index", idx, MF_MAX_VALS);
    if (n < 0)
        return false;
    nx_node i = nx_constant(b->g, NX_DTYPE_I64, 1, &n, idx);
    b->out[0] = nx_gather(b->g, b->in[0], i, (int)mf_attr_int(b->c, "axis", 0));
    return true;
}

static bool b_hashcons(build *b)
{
    nx_graph *g = b->g;
    const char *k = mf_attr_word(b->c, "kind");
    nx_node x = b->in[0], y = b->in[1], *o = b->out;
    int a0 = 0, a1 = 1;
    int64_t lo1[1] = {1}, lo2[1] = {2}, n2 = 2, n3[2] = {3, 3};
    b->nout = 2;
    if (strcmp(k, "scalar_signed_zero") == 0) {
        nx_node one = nx_scalar(g, NX_DTYPE_F64, 1.0);
        o[0] = nx_div(g, one, nx_scalar(g, NX_DTYPE_F64, 0.0));
        o[1] = nx_div(g, one, nx_scalar(g, NX_DTYPE_F64, -0.0));
    } else if (strcmp(k, "scalar_dtype") == 0) {
        o[0] = nx_cast(g, nx_scalar(g, NX_DTYPE_F32, 0.1), NX_DTYPE_F64);
        o[1] = nx_scalar(g, NX_DTYPE_F64, 0.1);
    } else if (strcmp(k, "inputs_same_name") == 0) {
        o[0] = nx_sub(g, x, y);
        o[1] = nx_sub(g, y, x);
    } else if (strcmp(k, "input_parameter") == 0) {
        o[0] = nx_add(g, nx_mul(g, x, nx_scalar(g, NX_DTYPE_F64, 10.0)), y);
        b->nout = 1;
    } else if (strcmp(k, "constant_dtype") == 0) {
        int32_t bits[2] = {1065353216, 3};
        o[0] = nx_cast(g, nx_constant(g, NX_DTYPE_I32, 1, &n2, bits), NX_DTYPE_F64);
        o[1] = nx_cast(g, nx_constant(g, NX_DTYPE_F32, 1, &n2, bits), NX_DTYPE_F64);
    } else if (strcmp(k, "constant_data") == 0) {
        double d0[3] = {1, 2, 3}, d1[3] = {1, 2, 4};
        int64_t n = 3;
        o[0] = nx_constant(g, NX_DTYPE_F64, 1, &n, d0);
        o[1] = nx_constant(g, NX_DTYPE_F64, 1, &n, d1);
    } else if (strcmp(k, "pad_cval_signed_zero") == 0) {
        nx_node one = nx_scalar(g, NX_DTYPE_F64, 1.0);
        o[0] = nx_div(g, one, nx_pad(g, x, lo1, lo1, NX_PAD_CONSTANT, 0.0));
        o[1] = nx_div(g, one, nx_pad(g, x, lo1, lo1, NX_PAD_CONSTANT, -0.0));
    } else if (strcmp(k, "pad_modes") == 0) {
        o[0] = nx_pad(g, x, lo2, lo2, NX_PAD_REFLECT, 0.0);
        o[1] = nx_pad(g, x, lo2, lo2, NX_PAD_MIRROR, 0.0);
    } else if (strcmp(k, "reduce_axes") == 0) {
        o[0] = nx_reduce(g, x, 1, &a0, NX_MONOID_SUM, false);
        o[1] = nx_reduce(g, x, 1, &a1, NX_MONOID_SUM, false);
    } else if (strcmp(k, "reduce_monoids") == 0) {
        o[0] = nx_reduce(g, x, 1, &a1, NX_MONOID_MAX, false);
        o[1] = nx_reduce(g, x, 1, &a1, NX_MONOID_MIN, false);
    } else if (strcmp(k, "permute_square") == 0) {
        o[0] = nx_permute(g, x, (int[]){1, 0});
        o[1] = nx_permute(g, x, (int[]){0, 1});
    } else if (strcmp(k, "reverse_axes") == 0) {
        o[0] = nx_reverse(g, x, 1, &a0);
        o[1] = nx_reverse(g, x, 1, &a1);
    } else if (strcmp(k, "sort_dirs") == 0) {
        o[0] = nx_sort(g, x, 0, false);
        o[1] = nx_sort(g, x, 0, true);
    } else if (strcmp(k, "scan_dirs") == 0) {
        o[0] = nx_scan(g, x, 0, NX_MONOID_SUM, false);
        o[1] = nx_scan(g, x, 0, NX_MONOID_SUM, true);
    } else if (strcmp(k, "arg_monoids") == 0) {
        o[0] = nx_reduce(g, x, 1, &a1, NX_MONOID_ARGMAX, false);
        o[1] = nx_reduce(g, x, 1, &a1, NX_MONOID_ARGMIN, false);
    } else if (strcmp(k, "iota_axes") == 0) {
        o[0] = nx_iota(g, NX_DTYPE_I32, 2, n3, 0);
        o[1] = nx_iota(g, NX_DTYPE_I32, 2, n3, 1);
    } else if (strcmp(k, "gather_axes") == 0) {
        int64_t idx[2] = {2, 0};
        nx_node i = nx_constant(g, NX_DTYPE_I64, 1, &n2, idx);
        o[0] = nx_permute(g, nx_gather(g, x, i, 0), (int[]){1, 0});
        o[1] = nx_gather(g, x, i, 1);
    } else if (strcmp(k, "slice_steps") == 0) {
        int64_t start = 0, s1 = 2, s2 = 3, st2 = 2;
        o[0] = nx_slice(g, x, &start, &s1, NULL);
        o[1] = nx_slice(g, x, &start, &s2, &st2);
    } else if (strcmp(k, "topk_largest") == 0) {
        nx_topk(g, x, 2, 0, true, &o[0], NULL);
        nx_topk(g, x, 2, 0, false, &o[1], NULL);
    } else if (strcmp(k, "einsum_specs") == 0) {
        o[0] = nx_einsum(g, "ij,jk->ik", x, y, NX_MONOID_SUM, nx_mul);
        o[1] = nx_einsum(g, "ij,kj->ik", x, y, NX_MONOID_SUM, nx_mul);
    } else if (strcmp(k, "einsum_times") == 0) {
        o[0] = nx_einsum(g, "ij,jk->ik", x, y, NX_MONOID_MAX, nx_add);
        o[1] = nx_einsum(g, "ij,jk->ik", x, y, NX_MONOID_MAX, nx_mul);
    } else if (strcmp(k, "cast_dtypes") == 0) {
        o[0] = nx_cast(g, nx_cast(g, x, NX_DTYPE_I32), NX_DTYPE_F64);
        o[1] = nx_cast(g, nx_cast(g, x, NX_DTYPE_F32), NX_DTYPE_F64);
    } else {
        return false;
    }
    return true;
}

static const struct {
    const char *op;
    bool (*fn)(build *b);
} builders[] = {
    {"reduce", b_reduce},
    {"reduce_custom", b_reduce_custom},
    {"scan", b_scan},
    {"scan_linear", b_scan_linear},
    {"scan_iir", b_scan_iir},
    {"sort", b_sort},
    {"argsort", b_sort},
    {"topk", b_topk},
    {"select", b_select},
    {"where", b_select},
    {"cast", b_cast},
    {"reshape", b_reshape},
    {"permute", b_permute},
    {"broadcast", b_broadcast},
    {"slice", b_slice},
    {"pad", b_pad},
    {"reverse", b_reverse},
    {"concat", b_concat},
    {"window", b_window},
    {"gather", b_gather},
    {"scatter", b_scatter},
    {"iota", b_iota},
    {"scalar", b_scalar},
    {"parameter_add", b_parameter_add},
    {"matmul", b_matmul},
    {"einsum", b_einsum},
    {"mean", b_mean_var},
    {"var", b_mean_var},
    {"softmax", b_softmax},
    {"compose_morph", b_compose_morph},
    {"compose_correlate1d", b_compose_correlate1d},
    {"chain", b_chain},
    {"extern_rowsum", b_extern_rowsum},
    {"extern_rowsum_chain", b_extern_rowsum},
    {"hashcons", b_hashcons},
    {"concat_self", b_concat_self},
    {"gather_const", b_gather_const},
    {"dag", b_dag},
};

/* Builds the case's outputs; false when the manifest names an op or attribute this test does
 * not know (a manifest error, not an implementation error). */
static bool build_graph(build *b)
{
    const char *op = b->c->op;
    b->nout = 1;
    for (size_t i = 0; i < sizeof unary_ops / sizeof *unary_ops; i++) {
        if (strcmp(op, unary_ops[i].name) == 0) {
            b->out[0] = unary_ops[i].fn(b->g, b->in[0]);
            return true;
        }
    }
    nx_binary_builder bin = binary_of(op);
    if (bin) {
        b->out[0] = bin(b->g, b->in[0], b->in[1]);
        return true;
    }
    for (size_t i = 0; i < sizeof builders / sizeof *builders; i++) {
        if (strcmp(op, builders[i].op) == 0)
            return builders[i].fn(b);
    }
    return false;
}

/* ------------------------------------------------------------------------------------------------
 * Inputs, outputs, comparison
 * ----------------------------------------------------------------------------------------------*/

/* The view an input describes, over the blob: shape and strides in elements, offset in elements
 * from the base's first element. Computed here, not with the runtime's view functions, so that a
 * runtime bug cannot masquerade as an interpreter bug. */
typedef struct geom {
    int ndim;
    int64_t shape[NX_MAX_DIMS], strides[NX_MAX_DIMS], offset;
} geom;

static bool view_geom(const mf_array *a, geom *v)
{
    v->ndim = a->ndim;
    v->offset = 0;
    int64_t s = 1;
    for (int i = a->ndim - 1; i >= 0; i--) {
        v->shape[i] = a->shape[i];
        v->strides[i] = s;
        s *= a->shape[i];
    }
    for (int k = 0; k < a->nviews; k++) {
        const mf_view *w = &a->views[k];
        if (w->kind == MF_EXPAND) {
            int64_t axis = w->v[0];
            if (axis < 0 || axis >= v->ndim || v->shape[axis] != 1 || w->v[1] < 0)
                return false;
            v->shape[axis] = w->v[1];
            v->strides[axis] = 0;
            continue;
        }
        if (w->kind == MF_PERM) {
            geom t = *v;
            for (int i = 0; i < v->ndim; i++) {
                if (w->v[i] < 0 || w->v[i] >= v->ndim)
                    return false;
                v->shape[i] = t.shape[w->v[i]];
                v->strides[i] = t.strides[w->v[i]];
            }
            continue;
        }
        int64_t axis = w->v[0], start = w->v[1], count = w->v[2], step = w->v[3];
        if (axis < 0 || axis >= v->ndim || count < 0)
            return false;
        int64_t last = start + (count - 1) * step;
        if (count > 0 &&
            (start < 0 || start >= v->shape[axis] || last < 0 || last >= v->shape[axis]))
            return false;
        v->offset += start * v->strides[axis];
        v->strides[axis] *= step;
        v->shape[axis] = count;
    }
    return true;
}

static const char *dt_name(nx_dtype d)
{
    const char *n = nx_dtype_name(d);
    return n ? n : "?";
}

static void shape_text(char *buf, size_t len, int ndim, const int64_t *shape)
{
    int k = snprintf(buf, len, "[");
    for (int i = 0; i < ndim && k < (int)len; i++)
        k += snprintf(buf + k, len - (size_t)k, i ? ",%lld" : "%lld", (long long)shape[i]);
    if (k < (int)len)
        snprintf(buf + k, len - (size_t)k, "]");
}

static void index_text(char *buf, size_t len, int ndim, const int64_t *shape, int64_t flat)
{
    int64_t idx[NX_MAX_DIMS];
    for (int i = ndim - 1; i >= 0; i--) {
        idx[i] = shape[i] ? flat % shape[i] : 0;
        flat = shape[i] ? flat / shape[i] : 0;
    }
    shape_text(buf, len, ndim, idx);
    buf[0] = '(';
    size_t l = strlen(buf);
    if (l > 0)
        buf[l - 1] = ')';
}

/* IEEE binary16 and bfloat16 decoded here rather than with the library's converters, which are
 * under test elsewhere. */
static double half_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m | 0x400, e - 25);
    return h & 0x8000 ? -v : v;
}

static double bf16_value(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static bool is_float_dtype(nx_dtype d)
{
    return d == NX_DTYPE_F32 || d == NX_DTYPE_F64 || d == NX_DTYPE_F16 || d == NX_DTYPE_BF16;
}

static double load_float(const void *p, nx_dtype d, int64_t i)
{
    switch (d) {
    case NX_DTYPE_F32:
        return ((const float *)p)[i];
    case NX_DTYPE_F16:
        return half_value(((const uint16_t *)p)[i]);
    case NX_DTYPE_BF16:
        return bf16_value(((const uint16_t *)p)[i]);
    default:
        return ((const double *)p)[i];
    }
}

static int64_t load_int(const void *p, nx_dtype d, int64_t i)
{
    switch (d) {
    case NX_DTYPE_I8:
        return ((const int8_t *)p)[i];
    case NX_DTYPE_I16:
        return ((const int16_t *)p)[i];
    case NX_DTYPE_I32:
        return ((const int32_t *)p)[i];
    case NX_DTYPE_I64:
        return ((const int64_t *)p)[i];
    case NX_DTYPE_U8:
        return ((const uint8_t *)p)[i];
    default:
        return ((const uint8_t *)p)[i]; /* bool: read the raw byte, must be 0 or 1 */
    }
}

static bool close_enough(double got, double want, double rtol, double atol)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got))
        return got == want;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* Compares one output with its expected array; a message naming the op, dtype, shape and the
 * first bad index on failure. */
static bool check_output(const mf_case *c, int k, const nx_tensor *t, char *msg, size_t len)
{
    const mf_array *e = &c->out[k];
    char want_shape[96], got_shape[96];
    shape_text(want_shape, sizeof want_shape, e->ndim, e->shape);
    shape_text(got_shape, sizeof got_shape, nx_tensor_ndim(t), nx_tensor_shape(t));
    if (nx_tensor_dtype(t) != e->dtype || strcmp(want_shape, got_shape) != 0) {
        snprintf(msg, len, "%s: output %d is %s%s, expected %s%s", c->op, k,
                 dt_name(nx_tensor_dtype(t)), got_shape, dt_name(e->dtype), want_shape);
        return false;
    }
    if (!nx_tensor_is_contiguous(t)) {
        snprintf(msg, len, "%s: output %d is not C-contiguous", c->op, k);
        return false;
    }
    const void *got = nx_tensor_data(t);
    const unsigned char *want = manifest.blob + e->offset;
    int64_t n = nx_tensor_numel(t), bad = 0, first = -1;
    double gf = 0, wf = 0;
    int64_t gi = 0, wi = 0;
    bool is_float = is_float_dtype(e->dtype);
    for (int64_t i = 0; i < n; i++) {
        bool ok;
        if (is_float) {
            double gv = load_float(got, e->dtype, i), wv;
            memcpy(&wv, want + 8 * i, 8);
            ok = close_enough(gv, wv, c->rtol, c->atol);
            if (!ok && first < 0)
                gf = gv, wf = wv;
        } else {
            int64_t gv = load_int(got, e->dtype, i), wv;
            if (e->dtype == NX_DTYPE_BOOL)
                wv = want[i];
            else
                memcpy(&wv, want + 8 * i, 8);
            ok = gv == wv;
            if (!ok && first < 0)
                gi = gv, wi = wv;
        }
        if (!ok) {
            bad++;
            if (first < 0)
                first = i;
        }
    }
    if (bad == 0)
        return true;
    char where[96];
    index_text(where, sizeof where, e->ndim, e->shape, first);
    if (is_float)
        snprintf(msg, len,
                 "%s %s%s output %d: %lld of %lld elements differ; first at %s: got %.17g, "
                 "want %.17g (rtol %g, atol %g)",
                 c->op, dt_name(e->dtype), want_shape, k, (long long)bad, (long long)n, where, gf,
                 wf, c->rtol, c->atol);
    else
        snprintf(msg, len,
                 "%s %s%s output %d: %lld of %lld elements differ; first at %s: got %lld, "
                 "want %lld (exact)",
                 c->op, dt_name(e->dtype), want_shape, k, (long long)bad, (long long)n, where,
                 (long long)gi, (long long)wi);
    return false;
}

/* ------------------------------------------------------------------------------------------------
 * One case
 * ----------------------------------------------------------------------------------------------*/

typedef struct run_state {
    nx_ctx *ctx;
    nx_graph *g;
    nx_program *p;
    nx_tensor *in[MF_MAX_ARRAYS];
    nx_tensor *out[MAX_OUT];
} run_state;

static void release(run_state *s)
{
    for (int i = 0; i < MAX_OUT; i++)
        nx_tensor_free(s->out[i]);
    for (int i = 0; i < MF_MAX_ARRAYS; i++)
        nx_tensor_free(s->in[i]);
    nx_program_free(s->p);
    nx_graph_free(s->g);
}

static bool is_leaf_op(const char *op)
{
    return strcmp(op, "constant") == 0 || strcmp(op, "iota") == 0 || strcmp(op, "scalar") == 0;
}

/* Makes the graph leaves and the host tensors they are fed with. */
static bool make_inputs(const mf_case *c, run_state *s, build *b, char *msg, size_t len)
{
    if (strcmp(c->op, "constant") == 0) {
        const mf_array *a = &c->in[0];
        b->in[0] = b->out[0] =
            nx_constant(s->g, a->dtype, a->ndim, a->shape, manifest.blob + a->offset);
        b->nout = 1;
        return true;
    }
    if (is_leaf_op(c->op))
        return true;
    for (int k = 0; k < c->nin; k++) {
        const mf_array *a = &c->in[k];
        geom v;
        if (!view_geom(a, &v)) {
            snprintf(msg, len, "manifest: bad view on input %d", k);
            return false;
        }
        char name[16];
        snprintf(name, sizeof name, "x%d", k);
        /* hash-consing cases: equal names must still give distinct inputs */
        const char *kind = mf_attr_word(c, "kind");
        if (strcmp(kind, "inputs_same_name") == 0 || strcmp(kind, "input_parameter") == 0)
            snprintf(name, sizeof name, "x");
        bool param = (k == 0 && strcmp(c->op, "parameter_add") == 0) ||
                     (k == 1 && strcmp(kind, "input_parameter") == 0);
        b->in[k] = param ? nx_parameter(s->g, name, a->dtype, v.ndim, v.shape)
                         : nx_input(s->g, name, a->dtype, v.ndim, v.shape);
        void *base = manifest.blob + a->offset + v.offset * (int64_t)nx_dtype_size(a->dtype);
        nx_status st =
            nx_tensor_wrap(s->ctx, base, a->dtype, v.ndim, v.shape, v.strides, &s->in[k]);
        if (st != NX_OK) {
            snprintf(msg, len, "nx_tensor_wrap(input %d): %s", k, nx_ctx_last_error(s->ctx));
            return false;
        }
    }
    return true;
}

static bool check_nodes(const mf_case *c, const build *b, char *msg, size_t len)
{
    if (nx_graph_status(b->g) != NX_OK) {
        snprintf(msg, len, "%s: builder failed: %s: %s", c->op,
                 nx_status_str(nx_graph_status(b->g)), nx_graph_error(b->g));
        return false;
    }
    if (b->nout != c->nout) {
        snprintf(msg, len, "manifest: %s gives %d outputs, manifest has %d", c->op, b->nout,
                 c->nout);
        return false;
    }
    for (int k = 0; k < b->nout; k++) {
        const mf_array *e = &c->out[k];
        int64_t shape[NX_MAX_DIMS];
        int nd = nx_node_ndim(b->g, b->out[k]);
        if (b->out[k] == NX_NONE || nd < 0 || !nx_node_shape(b->g, b->out[k], shape)) {
            snprintf(msg, len, "%s: output %d is not a valid node", c->op, k);
            return false;
        }
        char want[96], got[96];
        shape_text(want, sizeof want, e->ndim, e->shape);
        shape_text(got, sizeof got, nd, shape);
        if (nx_node_dtype(b->g, b->out[k]) != e->dtype || strcmp(want, got) != 0) {
            snprintf(msg, len, "%s: node of output %d is %s%s, expected %s%s", c->op, k,
                     dt_name(nx_node_dtype(b->g, b->out[k])), got, dt_name(e->dtype), want);
            return false;
        }
    }
    nx_status st = nx_graph_verify(b->g);
    if (st != NX_OK) {
        snprintf(msg, len, "%s: nx_graph_verify rejected a built graph: %s: %s", c->op,
                 nx_status_str(st), nx_ctx_last_error(nx_graph_ctx(b->g)));
        return false;
    }
    return true;
}

/* The backend under test: NX_TEST_BACKEND=cpu runs every case on the CPU backend (the same
 * fixtures and tolerances as the interpreter); unset or "ref": the reference interpreter. */
static nx_backend test_backend(void)
{
    const char *b = getenv("NX_TEST_BACKEND");
    if (b && strcmp(b, "cpu") == 0)
        return NX_BACKEND_CPU;
    if (b && strcmp(b, "cuda") == 0)
        return NX_BACKEND_CUDA;
    return NX_BACKEND_REF;
}

static bool run_graph(const mf_case *c, run_state *s, build *b, char *msg, size_t len)
{
    nx_backend want = test_backend();
    nx_compile_opts opts = {.backend = want, .n_outputs = b->nout, .outputs = b->out};
    /* NX_TEST_REPRODUCIBLE=1 compiles in reproducible mode (canonical fold order); the test
     * context ignores NITRIX_REPRODUCIBLE, so the scope is opened here. */
    const char *repro = getenv("NX_TEST_REPRODUCIBLE");
    bool scoped = repro && strcmp(repro, "1") == 0 &&
                  nx_ctx_reproducible_push(s->ctx, true) == NX_OK;
    nx_status st = nx_graph_compile(s->g, &opts, &s->p);
    if (scoped)
        nx_ctx_reproducible_pop(s->ctx);
    if (st != NX_OK) {
        snprintf(msg, len, "%s: nx_graph_compile on %s: %s: %s", c->op, nx_backend_name(want),
                 nx_status_str(st), nx_ctx_last_error(s->ctx));
        return false;
    }
    if (nx_program_backend(s->p) != want) {
        snprintf(msg, len, "%s: compiled for %s but the program runs on %s", c->op,
                 nx_backend_name(want), nx_backend_name(nx_program_backend(s->p)));
        return false;
    }
    nx_tensor *dummy[1] = {NULL};
    const nx_tensor *const *ins =
        is_leaf_op(c->op) ? (const nx_tensor *const *)dummy : (const nx_tensor *const *)s->in;
    st = nx_program_run(s->p, ins, s->out);
    if (st != NX_OK) {
        snprintf(msg, len, "%s: nx_program_run: %s: %s", c->op, nx_status_str(st),
                 nx_ctx_last_error(s->ctx));
        return false;
    }
    for (int k = 0; k < b->nout; k++) {
        if (!check_output(c, k, s->out[k], msg, len))
            return false;
    }
    return true;
}

/* Runs one case in a fresh context with the counting allocator, so leaks show up too. */
static bool run_case(const mf_case *c, char *msg, size_t len)
{
    nx_test_alloc ta = {0};
    run_state s = {0};
    s.ctx = nx_test_ctx(&ta);
    build b = {.c = c};
    bool ok = false;
    if (nx_graph_new(s.ctx, &s.g) != NX_OK) {
        snprintf(msg, len, "nx_graph_new: %s", nx_ctx_last_error(s.ctx));
        goto done;
    }
    b.g = s.g;
    if (!make_inputs(c, &s, &b, msg, len))
        goto done;
    if (strcmp(c->op, "constant") != 0 && !build_graph(&b)) {
        snprintf(msg, len, "manifest: unknown op or attribute in %s", c->op);
        goto done;
    }
    ok = check_nodes(c, &b, msg, len) && run_graph(c, &s, &b, msg, len);
done:
    release(&s);
    nx_ctx_free(s.ctx);
    if (ok && (ta.live != 0 || ta.size_errors != 0)) {
        snprintf(msg, len, "%s: %lld allocations (%lld bytes) leaked, %lld size mismatches", c->op,
                 (long long)ta.live, (long long)ta.live_bytes, (long long)ta.size_errors);
        ok = false;
    }
    return ok;
}

static void test_case(void **state)
{
    const mf_case *c = *state;
    char msg[MSG] = "";
    bool ok = run_case(c, msg, sizeof msg);
    if (c->known_bug) {
        if (ok)
            print_message("[   NOTE   ] %s passes now: remove it from known-failures.txt (%s)\n",
                          c->name, c->known_bug);
        else
            print_message("[  KNOWN   ] %s (%s): %s\n", c->name, c->known_bug, msg);
        skip();
    }
    if (!ok)
        fail_msg("%s: %s", c->name, msg);
}

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : NULL;
    char dir[4096], known[4096], err[512];
    snprintf(dir, sizeof dir, "%s/ir", nx_test_data_dir());
    snprintf(known, sizeof known, "%s", NX_KNOWN_FAILURES);
    if (!mf_load(dir, &manifest, err, sizeof err) ||
        !mf_load_known(known, &manifest, err, sizeof err)) {
        fprintf(stderr, "test-ir-values: %s\n", err);
        return 1;
    }
    struct CMUnitTest *tests = calloc((size_t)manifest.ncases + 1, sizeof *tests);
    if (!tests)
        return 1;
    size_t n = 0;
    for (int i = 0; i < manifest.ncases; i++) {
        if (filter && !strstr(manifest.cases[i].name, filter))
            continue;
        tests[n].name = manifest.cases[i].name;
        tests[n].test_func = test_case;
        tests[n].initial_state = &manifest.cases[i];
        n++;
    }
    /* NX_TEST_CASE_BUDGET=N (tests/meson.build sets it for sanitizer builds, where a case costs
     * several times more) runs at most N of the selected cases: every k-th, k = ceil(n / N), so
     * every op family keeps cases (the manifest groups them). The suite 'nightly' runs them all. */
    const char *budget_env = getenv("NX_TEST_CASE_BUDGET");
    long budget = budget_env ? strtol(budget_env, NULL, 10) : 0;
    if (budget > 0 && n > (size_t)budget) {
        size_t k = (n + (size_t)budget - 1) / (size_t)budget, kept = 0;
        for (size_t i = 0; i < n; i += k)
            tests[kept++] = tests[i];
        printf("test-ir-values: NX_TEST_CASE_BUDGET=%ld: %zu of %zu cases (one in %zu; the "
               "'nightly' suite runs them all)\n",
               budget, kept, n, k);
        n = kept;
    }
    int failed = _cmocka_run_group_tests("ir-values", tests, n, NULL, NULL);
    free(tests);
    mf_free(&manifest);
    return failed;
}
