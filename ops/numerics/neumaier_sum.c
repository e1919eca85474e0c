/* The op `neumaier_sum` (spec §4.12, api-a §9): Neumaier's improved Kahan-Babuska summation of
 * x over `axis` (every axis when not given), left to right along the flattened axes:
 *     t = s + x_i,  c += (s - t) + x_i if |s| >= |x_i| else (x_i - t) + s,  s = t;  y = s + c,
 * which, unlike Kahan's, keeps the error of a term larger than the running sum (the result is as
 * if computed in twice the precision, then rounded: error <= eps |y| + O(n eps^2) sum|x_i|). The
 * recurrence is an extern primitive with device code and a registered adjoint (compensated.c says
 * why); the gradient is the cotangent, broadcast. */
#include "ops/numerics/numerics.h"

static nx_status check(const nx_op_args *c)
{
    return nx_num_comp_check(c, NX_NUM_NEUMAIER);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    return nx_num_comp_build(g, c, NX_NUM_NEUMAIER, outs);
}

static const nx_op_field fields[] = {
    {offsetof(nx_num_sum_args, axis.axis), offsetof(nx_num_sum_args, axis.naxis),
     sizeof(int64_t) * NX_MAX_DIMS},
};

/* f64 against the exact sum (math.fsum / fractions) of ill-conditioned data: 1e-11 relative by
 * the api's oracle; f32 within a few f32 ulp of the exact sum */
static const nx_op_tol tols[] = {
    {NX_DTYPE_F32, NULL, NULL, 3e-7, 1e-7},
    {NX_DTYPE_F64, NULL, NULL, 1e-11, 0},
};

const nx_op_desc nx_op_neumaier_sum = {
    .info = {.nopts = 1, .opts = nx_num_comp_opts},
    .opts_size = sizeof(nx_num_sum_args),
    .fields = fields,
    .backend_offset = offsetof(nx_num_sum_args, backend),
    .check = check,
    .build = build,
    .golden = "numerics",
    .tols = tols,
    .ntols = 2,
};
