/* The op table's self-check (ops/ops.def, ops/op.h): every row has a descriptor with a builder or
 * a runner, a golden folder holding at least one case of the op, tolerances for the case dtypes,
 * and (when differentiable) a float64 case for the FD gradient test; every schema is well formed
 * (field sizes match the option types, defaults parse, ENUM lists are not empty, INTS/FLOATS
 * counts are positive) and every name and alias is unique in the table, ignoring case. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "corpus.h"
#include "testutil.h"

/* The size each option type's field must have (ops/op.h, nx_op_field). */
static size_t field_size(const nx_op_opt *o)
{
    switch (o->type) {
    case NX_OPT_INT:
        return sizeof(int64_t);
    case NX_OPT_INTS:
        return (size_t)o->max_count * sizeof(int64_t);
    case NX_OPT_FLOAT:
        return sizeof(double);
    case NX_OPT_FLOATS:
        return (size_t)o->max_count * sizeof(double);
    case NX_OPT_BOOL:
        return sizeof(bool);
    case NX_OPT_ENUM:
    case NX_OPT_BORDER:
    case NX_OPT_DTYPE:
        return sizeof(int);
    case NX_OPT_STRING:
        return sizeof(const char *);
    case NX_OPT_SEMIRING:
        return sizeof(const void *);
    case NX_OPT_TENSOR:
        return sizeof(const nx_tensor *);
    default:
        return 0;
    }
}

static int check_schema(const nx_op_desc *d, const nx_op_info *info)
{
    int bad = 0;
    if (info->nopts > 0 && !d->fields) {
        printf("%s: %d options but no fields\n", info->name, info->nopts);
        return 1;
    }
    for (int i = 0; i < info->nopts; i++) {
        const nx_op_opt *o = &info->opts[i];
        const nx_op_field *f = &d->fields[i];
        bool list = o->type == NX_OPT_INTS || o->type == NX_OPT_FLOATS;
        if (!o->name || !*o->name || !o->help || !*o->help) {
            printf("%s: option %d has no name or no help\n", info->name, i);
            bad++;
            continue;
        }
        if ((unsigned)o->type >= NX_OPT_TYPE_COUNT || (list ? o->max_count < 1 : 0)) {
            printf("%s.%s: type %d / max_count %d is not valid\n", info->name, o->name,
                   (int)o->type, o->max_count);
            bad++;
            continue;
        }
        if (f->size != field_size(o)) {
            printf("%s.%s: field is %zu bytes; type %d needs %zu\n", info->name, o->name, f->size,
                   (int)o->type, field_size(o));
            bad++;
        }
        if (f->offset == NX_OP_NO_FIELD || f->offset + f->size > d->opts_size) {
            printf("%s.%s: field at %zu (+%zu) lies outside the %zu-byte option struct\n",
                   info->name, o->name, f->offset, f->size, d->opts_size);
            bad++;
        }
        if (o->type == NX_OPT_ENUM && (!o->allowed || !*o->allowed || strstr(o->allowed, "||"))) {
            printf("%s.%s: ENUM without a list of allowed names\n", info->name, o->name);
            bad++;
        }
        for (int j = 0; j < i; j++)
            if (strcasecmp(info->opts[j].name, o->name) == 0) {
                printf("%s: option %s is declared twice\n", info->name, o->name);
                bad++;
            }
    }
    return bad;
}

/* Each default must parse and mean what a zeroed option struct means: on one golden case of the
 * op, the call with `name=<default>` added gives exactly the result of the call without it (for
 * every option with a default that the case does not set). */
static int check_defaults(nx_ctx *ctx, const gc_case *c, const nx_op_info *info)
{
    int bad = 0;
    nx_tensor *in[NX_OP_MAX_IO] = {0}, *base[NX_OP_MAX_IO] = {0};
    if (gc_load(ctx, c, false, in) != NX_OK ||
        gc_run(ctx, c, info, "ref", NULL, (const nx_tensor *const *)in, base) != NX_OK) {
        printf("%s: case %s does not run on ref: %s\n", info->name, c->name,
               nx_ctx_last_error(ctx));
        gc_free(c->nin, in);
        return 1;
    }
    for (int i = 0; i < info->nopts; i++) {
        const nx_op_opt *o = &info->opts[i];
        if (!o->def || o->def[0] == '(' || gc_option(c, o->name) || c->nopt >= GC_MAX_OPTS)
            continue;
        gc_case with = *c;
        snprintf(with.key[with.nopt], sizeof with.key[0], "%s", o->name);
        snprintf(with.val[with.nopt++], sizeof with.val[0], "%s", o->def);
        nx_tensor *got[NX_OP_MAX_IO] = {0};
        char msg[512] = "";
        if (gc_run(ctx, &with, info, "ref", NULL, (const nx_tensor *const *)in, got) != NX_OK) {
            printf("%s.%s: default '%s' given explicitly fails: %s\n", info->name, o->name, o->def,
                   nx_ctx_last_error(ctx));
            bad++;
        }
        for (int k = 0; got[0] && k < info->noutputs; k++)
            if (!gc_compare(got[k], base[k], nx_tensor_dtype(base[k]), 0, 0, msg, sizeof msg)) {
                printf("%s.%s: default '%s' given explicitly differs from the zeroed struct's "
                       "result (%s)\n", info->name, o->name, o->def, msg);
                bad++;
                break;
            }
        gc_free(info->noutputs, got);
    }
    gc_free(c->nin, in);
    gc_free(info->noutputs, base);
    return bad;
}

static void test_table(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    size_t n = 0, nd = 0;
    const nx_op_info *const *ops = nx_ops(&n);
    const nx_op_desc *const *descs = nx_op_descs(&nd);
    assert_true(n > 0);
    assert_int_equal(nd, n);
    gc_case *cases = NULL;
    int nc = gc_cases(&cases);
    assert_true(nc > 0);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const nx_op_info *info = ops[i];
        const nx_op_desc *d = descs[i];
        if (!d || nx_op_desc_info(d) != info) {
            printf("row %zu (%s) has no descriptor\n", i, info->name);
            bad++;
            continue;
        }
        if (!d->build && !d->run) {
            printf("%s: the descriptor has neither build nor run\n", info->name);
            bad++;
        }
        if (!d->check) {
            printf("%s: the descriptor has no check\n", info->name);
            bad++;
        }
        bad += check_schema(d, info);
        /* names: unique across the table, aliases included, ignoring case */
        for (size_t j = 0; j < n; j++) {
            const char *const *al = ops[j]->aliases;
            if (j != i && strcasecmp(ops[j]->name, info->name) == 0) {
                printf("%s: the name is used by row %zu too\n", info->name, j);
                bad++;
            }
            for (int a = 0; al && al[a]; a++)
                if (strcasecmp(al[a], info->name) == 0 ||
                    (j < i && info->aliases && nx_op_find(al[a]) != ops[j])) {
                    printf("%s: alias %s of %s collides\n", info->name, al[a], ops[j]->name);
                    bad++;
                }
        }
        /* golden cases, their tolerances, and an f64 case for the gradient test */
        int ncase = 0, nf64 = 0;
        for (int c = 0; c < nc; c++) {
            nx_dtype dt;
            if (cases[c].err[0] || gc_desc(&cases[c]) != d || !gc_dtype(&cases[c], &dt))
                continue;
            if (!ncase++)
                bad += check_defaults(ctx, &cases[c], info);
            nf64 += dt == NX_DTYPE_F64;
            if (!nx_op_tolerance(d, dt, NULL, NULL, NULL, NULL) &&
                !nx_op_tolerance(d, dt, "ref", NULL, NULL, NULL)) {
                printf("%s: case %s (%s) resolves no tolerance\n", info->name, cases[c].name,
                       cases[c].dtype);
                bad++;
            }
        }
        if (!d->golden || !ncase) {
            printf("%s: no golden case (golden folder '%s'; add one with its generator)\n",
                   info->name, d->golden ? d->golden : "(none)");
            bad++;
        }
        if (info->differentiable && !nf64) {
            printf("%s: differentiable but no float64 golden case for the FD gradient test\n",
                   info->name);
            bad++;
        }
        if (info->driver_site && !gc_divergent(info->driver_site)) {
            printf("%s: driver site '%s' has no row in runtime/divergent.def\n", info->name,
                   info->driver_site);
            bad++;
        }
    }
    printf("op table: %zu rows, %d golden cases, %d problems\n", n, nc, bad);
    free(cases);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_table)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
