/* The op `broadcast_ignoring` (spec §4.12, api-a §9; hypercoil's and nitrix's _internal/util.py):
 * a and b broadcast against each other (NumPy's rules, the shorter shape promoted with leading 1s)
 * on every axis except `ignore_axes`, where each keeps its own extent (a matrix's last two axes
 * under broadcast batch axes, say). The ignored axes count in the promoted rank r = max(rank a,
 * rank b); negative counts from the end (default -1). Two broadcasts in a graph: autodiff gives
 * both gradients (summed back over the broadcast axes). */
#include "ops/numerics/numerics.h"

typedef struct bi_args {
    nx_backend backend;
    int64_t ignore[NX_MAX_DIMS];
    int nignore;
} bi_args;

static nx_status shapes(const nx_op_args *c, int *r, int64_t *sa, int64_t *sb, int64_t *ta,
                        int64_t *tb)
{
    const bi_args *o = c->opts;
    const nx_tensor *a = c->in[0], *b = c->in[1];
    int na = nx_tensor_ndim(a), nb = nx_tensor_ndim(b);
    *r = na > nb ? na : nb;
    if (*r == 0)
        return nx_rt_error(c->ctx, NX_ERR_SHAPE, "%s: a and b are 0-d; expected an axis to keep",
                           c->who);
    bool ign[NX_MAX_DIMS] = {false};
    for (int i = 0; i < o->nignore; i++) {
        int k;
        nx_status st = nx_num_axis(c, o->ignore[i], *r, "ignore_axes", &k);
        if (st != NX_OK)
            return st;
        ign[k] = true;
    }
    for (int k = 0; k < *r; k++) {
        sa[k] = k < *r - na ? 1 : nx_tensor_shape(a)[k - (*r - na)];
        sb[k] = k < *r - nb ? 1 : nx_tensor_shape(b)[k - (*r - nb)];
        if (ign[k]) {
            ta[k] = sa[k];
            tb[k] = sb[k];
            continue;
        }
        if (sa[k] != sb[k] && sa[k] != 1 && sb[k] != 1)
            return nx_rt_error(c->ctx, NX_ERR_SHAPE,
                               "%s: a's extent %lld and b's %lld disagree at axis %d of the "
                               "promoted rank %d and neither is 1; expected broadcastable shapes "
                               "outside ignore_axes",
                               c->who, (long long)sa[k], (long long)sb[k], k, *r);
        ta[k] = tb[k] = sa[k] == 1 ? sb[k] : sa[k];
    }
    return NX_OK;
}

static nx_status check(const nx_op_args *c)
{
    nx_status st = nx_num_check_storable(c, 0);
    if (st == NX_OK)
        st = nx_num_check_storable(c, 1);
    int r;
    int64_t sa[NX_MAX_DIMS], sb[NX_MAX_DIMS], ta[NX_MAX_DIMS], tb[NX_MAX_DIMS];
    if (st == NX_OK)
        st = shapes(c, &r, sa, sb, ta, tb);
    return st;
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    int r;
    int64_t sa[NX_MAX_DIMS], sb[NX_MAX_DIMS], ta[NX_MAX_DIMS], tb[NX_MAX_DIMS];
    nx_status st = shapes(c, &r, sa, sb, ta, tb);
    if (st != NX_OK)
        return st;
    nx_node a = nx_num_declare(g, c, 0), b = nx_num_declare(g, c, 1);
    outs[0] = nx_broadcast(g, nx_reshape(g, a, r, sa), r, ta);
    outs[1] = nx_broadcast(g, nx_reshape(g, b, r, sb), r, tb);
    return nx_graph_status(g);
}

static const nx_op_opt opts[] = {
    {"ignore_axes", NX_OPT_INTS, "-1", NULL, NX_MAX_DIMS,
     "axes of the promoted rank that keep their own extents; negative counts from the end"},
};

static const nx_op_field fields[] = {
    {offsetof(bi_args, ignore), offsetof(bi_args, nignore), sizeof(int64_t) * NX_MAX_DIMS},
};

static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 0, 0},
    {NX_DTYPE_F64, NULL, NULL, 0, 0},
};

const nx_op_desc nx_op_broadcast_ignoring = {
    .info = {.nopts = 1, .opts = opts},
    .opts_size = sizeof(bi_args),
    .fields = fields,
    .backend_offset = offsetof(bi_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
