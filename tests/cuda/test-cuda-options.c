/* The CUDA code generator's options (nx_ctx_opts.cuda_codegen, NITRIX_PTX_*; docs/cuda.md "Code
 * generator options"):
 *   - the variables are read once, when the context is created; explicit options win over them;
 *     ignore_env leaves them unread;
 *   - a bad value, in a variable or in the options, fails creation with NX_ERR_INVALID_ARG and a
 *     message naming the variable (or field) and the values it takes;
 *   - every option that changes the emitted source is in the kernel cache key: each one set
 *     alone gives a key of its own, and the source a window kernel gets changes with them;
 *   - where a driver answers (the fake driver in the suite): two contexts that share a disk cache
 *     but differ in one option store two kernels, and a third with the first one's options stores
 *     none. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/ptx/emit-lib.h"
#include "codegen/ptx/emit-tile.h"
#include "testutil.h"

static const char *const VARS[] = {
    "NITRIX_PTX_SPLIT",         "NITRIX_PTX_NARROW",      "NITRIX_PTX_MINMAX",
    "NITRIX_PTX_ROWS",          "NITRIX_PTX_STENCIL",     "NITRIX_PTX_ILP",
    "NITRIX_PTX_STENCIL_SHELL", "NITRIX_PTX_STENCIL_TZ",  "NITRIX_PTX_STENCIL_DEPTH",
    "NITRIX_PTX_STENCIL_RY",    "NITRIX_PTX_STENCIL_PB",  "NITRIX_PTX_PAIR_ROWS",
};
#define NVARS (sizeof VARS / sizeof VARS[0])

static void clear_env(void)
{
    for (size_t i = 0; i < NVARS; i++)
        unsetenv(VARS[i]);
}

static nx_ctx *ctx_with(const nx_cuda_codegen_opts *cg)
{
    nx_ctx *ctx = NULL;
    nx_ctx_opts o = {.cuda_codegen = cg};
    if (nx_ctx_new(&o, &ctx) != NX_OK)
        fail_msg("nx_ctx_new: %s", nx_ctx_last_error(NULL));
    return ctx;
}

static void test_env_read_at_creation(void **state)
{
    (void)state;
    clear_env();
    setenv("NITRIX_PTX_PAIR_ROWS", "4", 1);
    setenv("NITRIX_PTX_NARROW", "off", 1);
    setenv("NITRIX_PTX_ROWS", "1", 1);
    setenv("NITRIX_PTX_STENCIL_TZ", "8", 1);
    nx_ctx *ctx = ctx_with(NULL);
    clear_env(); /* read once: the context keeps what it saw */
    const nx_cuda_codegen_opts *o = nx_rt_cuda_codegen(ctx);
    assert_int_equal(o->pair_rows, 4);
    assert_int_equal(o->narrow, NX_CUDA_OFF);
    assert_int_equal(o->rows, NX_CUDA_ON);
    assert_int_equal(o->stencil_tz, 8);
    assert_int_equal(o->split, NX_CUDA_DEFAULT);
    int flags = nx_ptx_general_flags(ctx);
    assert_int_equal(flags & NX_PTX_NARROW, 0);
    assert_int_equal(flags & (NX_PTX_ROWS | NX_PTX_ROWS_ALL), NX_PTX_ROWS | NX_PTX_ROWS_ALL);
    assert_int_equal(flags & NX_PTX_SPLIT, NX_PTX_SPLIT);
    nx_ctx_free(ctx);

    /* a context made now sees the defaults */
    ctx = ctx_with(NULL);
    o = nx_rt_cuda_codegen(ctx);
    assert_int_equal(o->pair_rows, 0);
    assert_int_equal(o->narrow, NX_CUDA_DEFAULT);
    nx_ctx_free(ctx);

    /* explicit options win; a 0 field leaves the variable's value */
    setenv("NITRIX_PTX_PAIR_ROWS", "2", 1);
    setenv("NITRIX_PTX_SPLIT", "0", 1);
    nx_cuda_codegen_opts cg = {.pair_rows = 8};
    ctx = ctx_with(&cg);
    assert_int_equal(nx_rt_cuda_codegen(ctx)->pair_rows, 8);
    assert_int_equal(nx_rt_cuda_codegen(ctx)->split, NX_CUDA_OFF);
    nx_ctx_free(ctx);

    /* ignore_env: the variables are not read (not even checked) */
    setenv("NITRIX_PTX_STENCIL_RY", "banana", 1);
    nx_ctx_opts io = {.ignore_env = true};
    assert_int_equal(nx_ctx_new(&io, &ctx), NX_OK);
    assert_int_equal(nx_rt_cuda_codegen(ctx)->pair_rows, 0);
    assert_int_equal(nx_rt_cuda_codegen(ctx)->split, NX_CUDA_DEFAULT);
    nx_ctx_free(ctx);
    clear_env();
}

static void test_bad_env(void **state)
{
    (void)state;
    static const struct {
        const char *var, *value, *expect;
    } cases[] = {
        {"NITRIX_PTX_SPLIT", "maybe", "0, 1, false, true, no, yes, off or on"},
        {"NITRIX_PTX_ROWS", "2", "0, 1, false, true, no, yes, off or on"},
        {"NITRIX_PTX_STENCIL_SHELL", "x", "0, 1, false, true, no, yes, off or on"},
        {"NITRIX_PTX_STENCIL_TZ", "65", "an integer from 1 to 64"},
        {"NITRIX_PTX_STENCIL_TZ", "0", "an integer from 1 to 64"},
        {"NITRIX_PTX_STENCIL_DEPTH", "9", "an integer from 1 to 8"},
        {"NITRIX_PTX_STENCIL_RY", "2x", "an integer from 1 to 4"},
        {"NITRIX_PTX_STENCIL_PB", "-1", "an integer from 1 to 4"},
        {"NITRIX_PTX_PAIR_ROWS", "3", "1, 2, 4, 8 or 16"},
        {"NITRIX_PTX_PAIR_ROWS", "32", "1, 2, 4, 8 or 16"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clear_env();
        setenv(cases[i].var, cases[i].value, 1);
        nx_ctx *ctx = (nx_ctx *)&ctx; /* any non-NULL: creation must clear it */
        assert_int_equal(nx_ctx_new(NULL, &ctx), NX_ERR_INVALID_ARG);
        assert_null(ctx);
        const char *msg = nx_ctx_last_error(NULL);
        char named[96];
        snprintf(named, sizeof named, "%s='%s'", cases[i].var, cases[i].value);
        if (!strstr(msg, named) || !strstr(msg, cases[i].expect))
            fail_msg("%s=%s: message \"%s\" lacks \"%s\" or \"%s\"", cases[i].var,
                     cases[i].value, msg, named, cases[i].expect);
    }
    clear_env();
}

static void test_bad_opts(void **state)
{
    (void)state;
    clear_env();
    static const struct {
        nx_cuda_codegen_opts cg;
        const char *expect;
    } cases[] = {
        {{.split = 3}, "cuda_codegen.split is 3; expected NX_CUDA_OFF or NX_CUDA_ON"},
        {{.rows = -1}, "cuda_codegen.rows is -1"},
        {{.stencil_ry = 5}, "cuda_codegen.stencil_ry is 5; expected an integer from 1 to 4"},
        {{.stencil_tz = 100}, "cuda_codegen.stencil_tz is 100"},
        {{.pair_rows = 6}, "cuda_codegen.pair_rows is 6; expected 1, 2, 4, 8 or 16"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nx_ctx *ctx = NULL;
        nx_ctx_opts o = {.cuda_codegen = &cases[i].cg};
        assert_int_equal(nx_ctx_new(&o, &ctx), NX_ERR_INVALID_ARG);
        assert_null(ctx);
        if (!strstr(nx_ctx_last_error(NULL), cases[i].expect))
            fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, nx_ctx_last_error(NULL),
                     cases[i].expect);
    }
}

/* One option each away from the defaults. */
static const nx_cuda_codegen_opts ONE_EACH[] = {
    {.split = NX_CUDA_OFF},    {.narrow = NX_CUDA_OFF},       {.minmax = NX_CUDA_OFF},
    {.rows = NX_CUDA_OFF},     {.rows = NX_CUDA_ON},          {.stencil = NX_CUDA_OFF},
    {.ilp = NX_CUDA_OFF},      {.stencil_shell = NX_CUDA_ON}, {.stencil_tz = 8},
    {.stencil_tz = 4},         {.stencil_depth = 2},          {.stencil_ry = 1},
    {.stencil_pb = 2},         {.pair_rows = 2},              {.pair_rows = 16},
};
#define NONE_EACH (sizeof ONE_EACH / sizeof ONE_EACH[0])

static void test_key_per_option(void **state)
{
    (void)state;
    clear_env();
    char keys[NONE_EACH + 1][160];
    nx_ctx *ctx = ctx_with(NULL);
    nx_ptx_codegen_key(ctx, keys[NONE_EACH], sizeof keys[0]);
    nx_ctx_free(ctx);
    for (size_t i = 0; i < NONE_EACH; i++) {
        ctx = ctx_with(&ONE_EACH[i]);
        nx_ptx_codegen_key(ctx, keys[i], sizeof keys[i]);
        nx_ctx_free(ctx);
    }
    for (size_t i = 0; i <= NONE_EACH; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(keys[i], keys[j]))
                fail_msg("options %zu and %zu share the key \"%s\"", j, i, keys[i]);
    /* a switch set to what its default does is the same form: one key */
    nx_cuda_codegen_opts on = {.split = NX_CUDA_ON, .narrow = NX_CUDA_ON, .stencil = NX_CUDA_ON};
    char key[160];
    ctx = ctx_with(&on);
    assert_string_equal(nx_ptx_codegen_key(ctx, key, sizeof key), keys[NONE_EACH]);
    nx_ctx_free(ctx);
}

/* out[i] = max_{d in -1..1} in[clamp(i0 + d, 0, n0 - 1), i1, i2] over a 24 x 20 x 40 volume: a
 * window MIN/MAX network (the stencil generator's) with i64 index arithmetic (the narrow one's). */
static nx_kernel *window_kernel(nx_ctx *ctx)
{
    static const int64_t shape[3] = {24, 20, 40};
    nx_kernel *k = NULL;
    assert_int_equal(nx_kernel_new(ctx, NX_KERNEL_LOOP, "window", &k), NX_OK);
    int out = nx_kernel_buffer(k, NX_KBUF_OUT, NX_DTYPE_F32, 3, shape, 1);
    int in = nx_kernel_buffer(k, NX_KBUF_IN, NX_DTYPE_F32, 3, shape, 0);
    nx_kernel_space(k, 3, shape);
    int32_t i0 = nx_kernel_idx(k, 0), i1 = nx_kernel_idx(k, 1), i2 = nx_kernel_idx(k, 2);
    int32_t plane = nx_kernel_prim(k, NX_PRIM_ADD, NX_DTYPE_I64,
                                   nx_kernel_prim(k, NX_PRIM_MUL, NX_DTYPE_I64, i1,
                                                  nx_kernel_const_i(k, NX_DTYPE_I64, 40), -1),
                                   i2, -1);
    int32_t acc = -1;
    for (int d = -1; d <= 1; d++) {
        int32_t q = nx_kernel_prim(k, NX_PRIM_ADD, NX_DTYPE_I64, i0,
                                   nx_kernel_const_i(k, NX_DTYPE_I64, d), -1);
        q = nx_kernel_prim(k, NX_PRIM_MAX, NX_DTYPE_I64, q, nx_kernel_const_i(k, NX_DTYPE_I64, 0),
                           -1);
        q = nx_kernel_prim(k, NX_PRIM_MIN, NX_DTYPE_I64, q,
                           nx_kernel_const_i(k, NX_DTYPE_I64, 23), -1);
        int32_t at = nx_kernel_prim(k, NX_PRIM_ADD, NX_DTYPE_I64,
                                    nx_kernel_prim(k, NX_PRIM_MUL, NX_DTYPE_I64, q,
                                                   nx_kernel_const_i(k, NX_DTYPE_I64, 800), -1),
                                    plane, -1);
        int32_t v = nx_kernel_load(k, in, at);
        acc = acc < 0 ? v : nx_kernel_prim(k, NX_PRIM_MAX, NX_DTYPE_F32, acc, v, -1);
    }
    assert_true(nx_kernel_store(k, out, acc));
    assert_int_equal(nx_kernel_validate(k), NX_OK);
    return k;
}

static char *emit(nx_ctx *ctx, size_t *len)
{
    nx_kernel *k = window_kernel(ctx);
    char *src = NULL;
    nx_ptx_launch l;
    if (nx_ptx_emit(k, "k", false, &src, len, &l) != NX_OK)
        fail_msg("emit: %s", nx_ctx_last_error(ctx));
    nx_kernel_free(k);
    if (nx_rt_nvrtc_get()->ok) {
        nx_ptx_image img;
        nx_ptx_target t = {80, NX_PTX_KIND_PTX};
        if (nx_ptx_compile(ctx, src, "options.cu", t, NULL, 0, &img) != NX_OK)
            fail_msg("NVRTC: %s\n%s", nx_ctx_last_error(ctx), src);
        nx_ptx_image_free(ctx, &img);
    }
    return src;
}

/* The same kernel IR emitted under options that apply to it gives other source: the options
 * reach the emitter through the context it is given. */
static void test_source_follows_options(void **state)
{
    (void)state;
    clear_env();
    nx_ctx *base = ctx_with(NULL);
    size_t blen = 0;
    char *bsrc = emit(base, &blen);
    assert_non_null(strstr(bsrc, "__shared__ float sm[2]")); /* the stencil form */
    static const nx_cuda_codegen_opts differ[] = {
        {.stencil = NX_CUDA_OFF},
        {.stencil = NX_CUDA_OFF, .narrow = NX_CUDA_OFF},
        {.stencil = NX_CUDA_OFF, .split = NX_CUDA_OFF},
        {.stencil_tz = 4},
        {.stencil_ry = 1},
        {.stencil_shell = NX_CUDA_ON},
    };
    char *prev = NULL;
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++) {
        nx_ctx *ctx = ctx_with(&differ[i]);
        size_t len = 0;
        char *src = emit(ctx, &len);
        if (!strcmp(src, bsrc) || (prev && !strcmp(src, prev)))
            fail_msg("options %zu: the same source as the defaults or the options before", i);
        if (i == 0 && strstr(src, "__shared__ float sm[2]"))
            fail_msg("stencil off: still the stencil form:\n%s", src);
        if (i == 1 && strstr(src, "int i0;"))
            fail_msg("narrow off: int loop indices:\n%s", src);
        free(prev);
        prev = strdup(src);
        assert_non_null(prev);
        nx_rt_free(ctx, src, len);
        nx_ctx_free(ctx);
    }
    free(prev);
    nx_rt_free(base, bsrc, blen);
    nx_ctx_free(base);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strlen(e->d_name) > 4 && !strcmp(e->d_name + strlen(e->d_name) - 4, ".nxk");
    closedir(d);
    return n;
}

/* Stores k's kernel through the context's disk cache. Under the fake driver the module does not
 * load, but the compiled image is stored first. */
static void get_kernel(nx_ctx *ctx)
{
    nx_kernel *k = window_kernel(ctx);
    const nx_ptx_kernel *pk = NULL;
    nx_status st = nx_ptx_kernel_get(ctx, k, false, &pk, NULL);
    if (st != NX_OK && !strstr(nx_ctx_last_error(ctx), "loads no module"))
        fail_msg("nx_ptx_kernel_get: %s", nx_ctx_last_error(ctx));
    nx_kernel_free(k);
}

static void test_cache_entries(void **state)
{
    (void)state;
    clear_env();
    if (nx_rt_cuda_available(NULL) != NX_OK || !nx_rt_nvrtc_get()->ok) {
        print_message("skipped: no driver or no NVRTC (%s)\n", nx_ctx_last_error(NULL));
        skip();
    }
    char dir[] = "/tmp/nx-cuda-options-XXXXXX";
    assert_non_null(mkdtemp(dir));
    nx_cuda_codegen_opts narrow_off = {.narrow = NX_CUDA_OFF};
    nx_ctx_opts o = {.cache_dir = dir};
    nx_ctx *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(nx_ctx_new(&o, &a), NX_OK);
    get_kernel(a);
    assert_int_equal(count_entries(dir), 1);
    o.cuda_codegen = &narrow_off;
    assert_int_equal(nx_ctx_new(&o, &b), NX_OK);
    get_kernel(b);
    assert_int_equal(count_entries(dir), 2); /* not the first context's kernel */
    o.cuda_codegen = NULL;
    assert_int_equal(nx_ctx_new(&o, &c), NX_OK);
    get_kernel(c);
    assert_int_equal(count_entries(dir), 2); /* the first one's, found again */
    nx_ctx_free(a);
    nx_ctx_free(b);
    nx_ctx_free(c);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[sizeof dir + 256 + 2];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.')
            unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_read_at_creation),
        cmocka_unit_test(test_bad_env),
        cmocka_unit_test(test_bad_opts),
        cmocka_unit_test(test_key_per_option),
        cmocka_unit_test(test_source_follows_options),
        cmocka_unit_test(test_cache_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
