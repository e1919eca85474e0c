/* The op `compensated_dot` (spec §4.12, api-a §9): Ogita, Rump and Oishi's Dot2 (SIAM J. Sci.
 * Comput. 26, 2005), the dot product sum_i a_i b_i over `axis` (every axis when not given) as if
 * computed in twice the precision and rounded: every product split exactly by TwoProduct (an fma;
 * in f32 the product is exact in double), the products summed by TwoSum with the errors carried,
 *     |y - a.b| <= eps |a.b| + gamma_n^2 sum|a_i b_i|.
 * The recurrence is an extern primitive with device code and a registered adjoint (compensated.c
 * says why); the gradients are cot * b and cot * a. a and b: equal shapes and float dtypes. */
#include "ops/numerics/numerics.h"

static nx_status check(const nx_op_args *c)
{
    return nx_num_comp_check(c, NX_NUM_DOT2);
}

static nx_status build(nx_graph *g, const nx_op_args *c, nx_node *outs)
{
    return nx_num_comp_build(g, c, NX_NUM_DOT2, outs);
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

const nx_op_desc nx_op_compensated_dot = {
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
