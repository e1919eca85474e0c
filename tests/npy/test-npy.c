/* .npy I/O: NumPy-written fixtures (tools/gen-npy-fixtures.py) read back bit for bit and rewritten
 * byte for byte, round trips of every dtype and of strided views, malformed input, I/O errors and
 * allocation-failure sweeps. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "testutil.h"
#include "tensor.h"
#include "../data/npy/manifest.h"

#define NFIXTURES (sizeof npy_fixtures / sizeof *npy_fixtures)

/* ---- helpers ---------------------------------------------------------------------------------*/

static char *fixture_path(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/npy/%s", nx_test_data_dir(), name);
    return buf;
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void spit(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static char tmpdir[64];

static const char *tmp_path(const char *name)
{
    static char buf[256];
    if (!tmpdir[0]) {
        strcpy(tmpdir, "/tmp/nx-npy-test-XXXXXX");
        assert_non_null(mkdtemp(tmpdir));
    }
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* Element i of a C-contiguous host tensor as its little-endian bit pattern. */
static uint64_t elem_bits(const nx_tensor *t, int64_t i)
{
    size_t es = nx_dtype_size(nx_tensor_dtype(t));
    const uint8_t *p = (const uint8_t *)nx_tensor_data(t) + (size_t)i * es;
    uint64_t v = 0;
    for (size_t b = 0; b < es; b++)
        v |= (uint64_t)p[b] << (8 * b);
    return v;
}

static void expect_fixture(const npy_fixture *fx, const nx_tensor *t, const char *how)
{
    if (nx_tensor_dtype(t) != fx->dtype || nx_tensor_ndim(t) != fx->ndim)
        fail_msg("%s %s: dtype %s ndim %d; expected %s ndim %d", how, fx->file,
                 nx_dtype_name(nx_tensor_dtype(t)), nx_tensor_ndim(t), nx_dtype_name(fx->dtype),
                 fx->ndim);
    for (int i = 0; i < fx->ndim; i++)
        if (nx_tensor_shape(t)[i] != fx->shape[i])
            fail_msg("%s %s: extent %d is %lld; expected %lld", how, fx->file, i,
                     (long long)nx_tensor_shape(t)[i], (long long)fx->shape[i]);
    assert_int_equal(nx_tensor_numel(t), fx->numel);
    if (!nx_tensor_is_contiguous(t))
        fail_msg("%s %s: the tensor is not C-contiguous", how, fx->file);
    for (int64_t i = 0; i < fx->numel; i++)
        if (elem_bits(t, i) != fx->bits[i])
            fail_msg("%s %s: element %lld is 0x%llx; expected 0x%llx", how, fx->file,
                     (long long)i, (unsigned long long)elem_bits(t, i),
                     (unsigned long long)fx->bits[i]);
}

static nx_status expect_parse_error(nx_ctx *ctx, const void *buf, size_t len, const char *needle,
                                    const char *label)
{
    nx_tensor *t = (nx_tensor *)&t; /* must be reset to NULL */
    nx_status st = nx_npy_read_mem(ctx, buf, len, &t);
    const char *msg = nx_ctx_last_error(ctx);
    if (st != NX_ERR_PARSE || t != NULL || !strstr(msg, needle))
        fail_msg("%s (memory): got %s \"%s\"; expected NX_ERR_PARSE naming \"%s\"", label,
                 nx_status_str(st), msg, needle);
    spit(tmp_path("bad.npy"), buf, len);
    t = (nx_tensor *)&t;
    st = nx_npy_read(ctx, tmp_path("bad.npy"), &t);
    msg = nx_ctx_last_error(ctx);
    if (st != NX_ERR_PARSE || t != NULL || !strstr(msg, needle) || !strstr(msg, "bad.npy"))
        fail_msg("%s (file): got %s \"%s\"; expected NX_ERR_PARSE naming \"%s\" and the file",
                 label, nx_status_str(st), msg, needle);
    return st;
}

/* A .npy image with the given preamble version and header text, padded as NumPy pads, followed
 * by data_len bytes of 0x11. */
static uint8_t *make_npy(int major, const char *header, size_t data_len, size_t *len)
{
    size_t pre = major == 1 ? 10 : 12;
    size_t hl = strlen(header) + 1;
    size_t pad = (64 - (pre + hl) % 64) % 64;
    size_t field = hl + pad;
    *len = pre + field + data_len;
    uint8_t *b = malloc(*len);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major;
    b[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        b[8 + i] = (uint8_t)(field >> (8 * i));
    memcpy(b + pre, header, hl - 1);
    memset(b + pre + hl - 1, ' ', pad);
    b[pre + field - 1] = '\n';
    memset(b + pre + field, 0x11, data_len);
    return b;
}

/* ---- fixtures written by NumPy ---------------------------------------------------------------*/

static void test_fixtures_read(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    for (size_t k = 0; k < NFIXTURES; k++) {
        const npy_fixture *fx = &npy_fixtures[k];
        nx_tensor *t = NULL;
        if (nx_npy_read(ctx, fixture_path(fx->file), &t) != NX_OK)
            fail_msg("reading %s: %s", fx->file, nx_ctx_last_error(ctx));
        expect_fixture(fx, t, "nx_npy_read");
        nx_tensor_free(t);

        size_t len;
        uint8_t *buf = slurp(fixture_path(fx->file), &len);
        if (nx_npy_read_mem(ctx, buf, len, &t) != NX_OK)
            fail_msg("reading %s from memory: %s", fx->file, nx_ctx_last_error(ctx));
        expect_fixture(fx, t, "nx_npy_read_mem");
        nx_tensor_free(t);
        free(buf);
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    print_message("read %zu NumPy %s fixtures\n", NFIXTURES, NPY_FIXTURE_NUMPY_VERSION);
}

/* Writing what was read gives the bytes NumPy wrote for the same C-order array. */
static void test_fixtures_rewrite_bytes(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int compared = 0;
    for (size_t k = 0; k < NFIXTURES; k++) {
        const npy_fixture *fx = &npy_fixtures[k];
        if (!fx->canonical)
            continue;
        nx_tensor *t = NULL;
        assert_int_equal(nx_npy_read(ctx, fixture_path(fx->file), &t), NX_OK);
        void *out = NULL;
        size_t out_len = 0;
        if (nx_npy_write_mem(ctx, t, &out, &out_len) != NX_OK)
            fail_msg("writing %s: %s", fx->file, nx_ctx_last_error(ctx));
        size_t len;
        uint8_t *want = slurp(fixture_path(fx->canonical), &len);
        if (out_len != len || memcmp(out, want, len) != 0) {
            size_t at = 0;
            while (at < len && at < out_len && ((uint8_t *)out)[at] == want[at])
                at++;
            fail_msg("%s rewritten: %zu bytes differ from NumPy's %s (%zu bytes) at byte %zu",
                     fx->file, out_len, fx->canonical, len, at);
        }
        size_t data_bytes = (size_t)fx->numel * nx_dtype_size(fx->dtype);
        assert_int_equal((out_len - data_bytes) % 64, 0); /* the data starts 64-aligned */
        free(want);
        nx_ctx_buffer_free(ctx, out, out_len);
        nx_tensor_free(t);
        compared++;
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    print_message("%d rewrites matched NumPy byte for byte\n", compared);
}

/* 80 KB of i32 k*7 - 123456: more than one write chunk. */
static void test_big_fixture(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_tensor *t = NULL;
    assert_int_equal(nx_npy_read(ctx, fixture_path("i4_big.npy"), &t), NX_OK);
    assert_int_equal(nx_tensor_dtype(t), NX_DTYPE_I32);
    assert_int_equal(nx_tensor_ndim(t), 1);
    assert_int_equal(nx_tensor_shape(t)[0], 20000);
    const int32_t *x = nx_tensor_data(t);
    for (int32_t k = 0; k < 20000; k++)
        assert_int_equal(x[k], k * 7 - 123456);
    assert_int_equal(nx_npy_write(ctx, tmp_path("big.npy"), t), NX_OK);
    size_t la, lb;
    uint8_t *a = slurp(tmp_path("big.npy"), &la);
    uint8_t *b = slurp(fixture_path("i4_big.npy"), &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    free(a);
    free(b);
    unlink(tmp_path("big.npy"));
    nx_tensor_free(t);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* ---- round trips -----------------------------------------------------------------------------*/

static void fill_pattern(nx_tensor *t, uint32_t seed)
{
    uint8_t *p = nx_tensor_data(t);
    size_t bytes = (size_t)nx_tensor_numel(t) * nx_dtype_size(nx_tensor_dtype(t));
    uint32_t s = seed;
    for (size_t i = 0; i < bytes; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = nx_tensor_dtype(t) == NX_DTYPE_BOOL ? (uint8_t)(s >> 31) : (uint8_t)(s >> 24);
    }
}

static void expect_same(const nx_tensor *a, const nx_tensor *b)
{
    assert_int_equal(nx_tensor_dtype(a), nx_tensor_dtype(b));
    assert_int_equal(nx_tensor_ndim(a), nx_tensor_ndim(b));
    for (int i = 0; i < nx_tensor_ndim(a); i++)
        assert_int_equal(nx_tensor_shape(a)[i], nx_tensor_shape(b)[i]);
    size_t bytes = (size_t)nx_tensor_numel(a) * nx_dtype_size(nx_tensor_dtype(a));
    if (bytes)
        assert_memory_equal(nx_tensor_data(a), nx_tensor_data(b), bytes);
}

static void roundtrip(nx_ctx *ctx, const nx_tensor *t, nx_tensor **back_mem, nx_tensor **back_file)
{
    void *buf = NULL;
    size_t len = 0;
    assert_int_equal(nx_npy_write_mem(ctx, t, &buf, &len), NX_OK);
    assert_int_equal(nx_npy_read_mem(ctx, buf, len, back_mem), NX_OK);
    assert_int_equal(nx_npy_write(ctx, tmp_path("rt.npy"), t), NX_OK);
    assert_int_equal(nx_npy_read(ctx, tmp_path("rt.npy"), back_file), NX_OK);
    size_t flen;
    uint8_t *file = slurp(tmp_path("rt.npy"), &flen);
    assert_int_equal(flen, len); /* the file and the buffer writers agree */
    assert_memory_equal(file, buf, len);
    free(file);
    nx_ctx_buffer_free(ctx, buf, len);
    unlink(tmp_path("rt.npy"));
}

static void test_roundtrip_dtypes(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    static const int64_t shapes[][8] = {{3, 4, 5}, {0}, {7}, {2, 0, 3}, {2, 1, 2, 1, 2, 1, 2, 3}};
    static const int ndims[] = {3, 0, 1, 3, 8};
    for (int d = 0; d < NX_DTYPE_COUNT; d++) {
        for (size_t s = 0; s < sizeof ndims / sizeof *ndims; s++) {
            nx_tensor *t = NULL, *m = NULL, *f = NULL;
            assert_int_equal(nx_tensor_new(ctx, (nx_dtype)d, ndims[s], shapes[s], &t), NX_OK);
            if (nx_tensor_numel(t) > 0)
                fill_pattern(t, (uint32_t)(d * 31 + (int)s));
            roundtrip(ctx, t, &m, &f);
            expect_same(t, m);
            expect_same(t, f);
            nx_tensor_free(t);
            nx_tensor_free(m);
            nx_tensor_free(f);
        }
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* A strided view written and read back equals the gather computed here by index arithmetic. */
typedef struct view_case {
    const char *label;
    nx_dtype dtype;
    int ndim;
    int64_t shape[3];
    int64_t strides[3]; /* elements */
    int64_t origin;     /* element (0,0,0) within the backing buffer */
    int64_t backing;    /* elements in the backing buffer */
} view_case;

static void check_view(nx_ctx *ctx, const view_case *vc)
{
    size_t es = nx_dtype_size(vc->dtype);
    uint8_t *back = malloc((size_t)vc->backing * es);
    assert_non_null(back);
    for (size_t i = 0; i < (size_t)vc->backing * es; i++)
        back[i] = vc->dtype == NX_DTYPE_BOOL ? (uint8_t)(i % 3 == 0) : (uint8_t)(i * 37 + 11);
    nx_tensor *v = NULL, *m = NULL, *f = NULL;
    assert_int_equal(nx_tensor_wrap(ctx, back + vc->origin * (int64_t)es, vc->dtype, vc->ndim,
                                    vc->shape, vc->strides, &v),
                     NX_OK);
    roundtrip(ctx, v, &m, &f);
    expect_same(m, f);
    int64_t n0 = vc->shape[0], n1 = vc->ndim > 1 ? vc->shape[1] : 1;
    int64_t n2 = vc->ndim > 2 ? vc->shape[2] : 1;
    const uint8_t *got = nx_tensor_data(m);
    int64_t k = 0;
    for (int64_t i = 0; i < n0; i++)
        for (int64_t j = 0; j < n1; j++)
            for (int64_t l = 0; l < n2; l++, k++) {
                int64_t src = vc->origin + i * vc->strides[0] +
                              (vc->ndim > 1 ? j * vc->strides[1] : 0) +
                              (vc->ndim > 2 ? l * vc->strides[2] : 0);
                if (memcmp(got + k * (int64_t)es, back + src * (int64_t)es, es) != 0)
                    fail_msg("%s: element (%lld,%lld,%lld) differs from backing[%lld]",
                             vc->label, (long long)i, (long long)j, (long long)l,
                             (long long)src);
            }
    assert_int_equal(k, nx_tensor_numel(m));
    nx_tensor_free(v);
    nx_tensor_free(m);
    nx_tensor_free(f);
    free(back);
}

static void test_roundtrip_strided(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    static const view_case cases[] = {
        {"transpose f64", NX_DTYPE_F64, 2, {4, 3}, {1, 4}, 0, 12},
        {"reversed f32", NX_DTYPE_F32, 2, {3, 4}, {-4, -1}, 11, 12},
        {"broadcast row i16", NX_DTYPE_I16, 2, {3, 4}, {0, 1}, 0, 4},
        {"step 2 slice i64", NX_DTYPE_I64, 2, {2, 2}, {8, 2}, 0, 16},
        {"3-d permute u8", NX_DTYPE_U8, 3, {4, 2, 3}, {1, 12, 4}, 0, 24},
        {"3-d permute bool", NX_DTYPE_BOOL, 3, {3, 4, 2}, {1, 6, 3}, 0, 24},
        {"reversed middle axis bf16", NX_DTYPE_BF16, 3, {2, 3, 2}, {6, -2, 1}, 4, 12},
        {"column f16", NX_DTYPE_F16, 1, {5}, {3}, 2, 15},
        {"i8 every other", NX_DTYPE_I8, 1, {6}, {-2}, 11, 12},
        {"i32 padded rows", NX_DTYPE_I32, 2, {3, 5}, {7, 1}, 0, 21},
        /* 200 x 100 f64 transposed: 160 KB, several write chunks, chunk edges inside rows */
        {"large transpose f64", NX_DTYPE_F64, 2, {200, 100}, {1, 200}, 0, 20000},
        /* one index of the first axis is 1.1 MB: the file writer cuts element ranges instead */
        {"wide transpose f64", NX_DTYPE_F64, 2, {2, 140000}, {1, 2}, 0, 280000},
        {"wide transpose u8", NX_DTYPE_U8, 2, {3, 50000}, {1, 3}, 0, 150000},
        /* every other element of 80 KB rows: one row per write chunk */
        {"strided rows f32", NX_DTYPE_F32, 2, {3, 20000}, {40000, 2}, 0, 120000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_view(ctx, &cases[i]);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* bool bytes other than 0 and 1 are written as 1 (NumPy's True). */
static void test_bool_normalised(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    uint8_t raw[4] = {0, 2, 255, 1};
    int64_t n = 4;
    nx_tensor *t = NULL, *back = NULL;
    assert_int_equal(nx_tensor_wrap(ctx, raw, NX_DTYPE_BOOL, 1, &n, NULL, &t), NX_OK);
    void *buf = NULL;
    size_t len = 0;
    assert_int_equal(nx_npy_write_mem(ctx, t, &buf, &len), NX_OK);
    assert_memory_equal((uint8_t *)buf + len - 4, "\0\1\1\1", 4);
    assert_int_equal(nx_npy_read_mem(ctx, buf, len, &back), NX_OK);
    assert_memory_equal(nx_tensor_data(back), "\0\1\1\1", 4);
    nx_ctx_buffer_free(ctx, buf, len);
    nx_tensor_free(t);
    nx_tensor_free(back);
    nx_ctx_free(ctx);
}

/* ---- malformed input -------------------------------------------------------------------------*/

typedef struct bad_header {
    int major;
    const char *header;
    size_t data_len;
    const char *needle;
} bad_header;

static void test_malformed_headers(void **state)
{
    (void)state;
    static const bad_header cases[] = {
        {1, "{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, "expected ':'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", 24,
         "malformed header dict"},
        {1, "['descr', '<f4']", 24, "expected '{'"},
        {1, "", 24, "expected '{'"},
        {1, "{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3)}", 24, "',' or '}'"},
        {1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", 48,
         "unknown descr '<c8'"},
        {1, "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3), }", 12,
         "unknown descr '<u2'"},
        {1, "{'descr': '<V4', 'fortran_order': False, 'shape': (2, 3), }", 24,
         "unknown descr '<V4'"},
        {1, "{'descr': '<f04', 'fortran_order': False, 'shape': (2, 3), }", 24,
         "unknown descr"},
        {1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", 24,
         "structured"},
        {1, "{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3), }", 24, "native"},
        {1, "{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3), }", 24, "byte order"},
        {1, "{'descr': '>V2', 'fortran_order': False, 'shape': (2, 3), }", 12, "'|V2' or '<V2'"},
        {1, "{'descr': 'f4', 'fortran_order': False, 'shape': (2, 3), }", 24, "unknown descr"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", 24,
         "extent 0 is negative"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 99999999999999999999), }",
         24, "extent 1 does not fit in 64 bits"},
        {1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 8,
         "overflows"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }",
         4, "more than 8 dimensions"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", 24, "1-tuple"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", 24, "'('"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,, 3), }", 24,
         "non-negative integer"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (02, 3), }", 24, "leading zeros"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3), }", 24, "',' or ')'"},
        {3, "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", 24, "',' or ')'"},
        {1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }", 24, "True or False"},
        {1, "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2, 3), }", 24,
         "True or False"},
        {1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24,
         "'descr' appears twice"},
        {1, "{'descr': '<f4', 'shape': (2, 3), }", 24, "lacks 'fortran_order'"},
        {1, "{'fortran_order': False, 'shape': (2, 3), }", 24, "lacks 'descr'"},
        {1, "{'descr': '<f4', 'fortran_order': False, }", 24, "lacks 'shape'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1, }", 24,
         "unexpected key 'x'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x", 24,
         "only spaces and a newline after the header dict"},
        {1, "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2, 3), }", 24,
         "without escapes"},
        {1, "{,}", 24, "a quoted key"},
        {3, "{'descr': '<f\xc3\xa9', 'fortran_order': False, 'shape': (2, 3), }", 24,
         "unknown descr"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 23,
         "data is truncated: shape [2,3] of f32 needs 24 bytes but only 23"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 29,
         "5 bytes of trailing data"},
        {2, "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000, 1000000000), }", 16,
         "needs 8000000000000000000 bytes but only 16"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 0, "needs 4 bytes"},
    };
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t len;
        uint8_t *b = make_npy(cases[i].major, cases[i].header, cases[i].data_len, &len);
        char label[32];
        snprintf(label, sizeof label, "header case %zu", i);
        expect_parse_error(ctx, b, len, cases[i].needle, label);
        free(b);
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_malformed_preamble(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    size_t len;
    uint8_t *good = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                             24, &len);
    uint8_t *b = malloc(len);
    memcpy(b, good, len);
    b[5] = 'X';
    expect_parse_error(ctx, b, len, "bad magic", "magic");
    memcpy(b, "\x89PNG\r\n", 6);
    expect_parse_error(ctx, b, len, "starts with bytes 89 50 4e 47 0d 0a", "png");
    memcpy(b, good, len);
    b[6] = 4;
    expect_parse_error(ctx, b, len, "unsupported format version 4.0", "version 4");
    b[6] = 1;
    b[7] = 1;
    expect_parse_error(ctx, b, len, "unsupported format version 1.1", "version 1.1");
    b[6] = 0;
    b[7] = 0;
    expect_parse_error(ctx, b, len, "unsupported format version 0.0", "version 0");
    expect_parse_error(ctx, good, 0, "truncated header: the input is 0 bytes", "empty");
    expect_parse_error(ctx, good, 4, "shorter than the 6-byte magic", "4 bytes");
    expect_parse_error(ctx, "\x93NUMPZ", 6, "bad magic", "5 of 6");
    expect_parse_error(ctx, good, 7, "ends inside the version", "7 bytes");
    expect_parse_error(ctx, good, 9, "ends inside the header length", "9 bytes");
    memcpy(b, good, len);
    b[6] = 2;
    expect_parse_error(ctx, b, 11, "ends inside the header length", "v2 11 bytes");
    memcpy(b, good, len);
    expect_parse_error(ctx, b, 70, "goes beyond the end of the input", "cut header");
    b[8] = 0xff;
    b[9] = 0xff;
    expect_parse_error(ctx, b, len, "header length 65535 goes beyond", "long header");
    free(b);
    free(good);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* An allocator remembering the largest request, to show a tiny file with a huge shape never
 * allocates its claimed size. */
static size_t largest;
static void *spy_alloc(void *user, size_t size, size_t align)
{
    (void)user;
    if (size > largest)
        largest = size;
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) ? NULL : p;
}
static void spy_free(void *user, void *p, size_t size)
{
    (void)user;
    (void)size;
    free(p);
}

static void test_huge_shape_never_allocates(void **state)
{
    (void)state;
    nx_allocator a = {spy_alloc, spy_free, NULL};
    nx_ctx_opts opts = {.allocator = &a, .ignore_env = true};
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(&opts, &ctx), NX_OK);
    size_t len;
    uint8_t *b = make_npy(
        1, "{'descr': '<f8', 'fortran_order': True, 'shape': (100000, 100000), }", 64, &len);
    largest = 0;
    expect_parse_error(ctx, b, len, "needs 80000000000 bytes", "huge");
    assert_true(largest < 4096);
    free(b);
    nx_ctx_free(ctx);
}

/* ---- I/O errors and arguments ----------------------------------------------------------------*/

static void test_io_errors(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_tensor *t = NULL;
    assert_int_equal(nx_npy_read(ctx, tmp_path("missing.npy"), &t), NX_ERR_IO);
    assert_null(t);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "missing.npy"));
    assert_non_null(strstr(nx_ctx_last_error(ctx), "No such file"));
    assert_int_equal(nx_npy_read(ctx, tmpdir, &t), NX_ERR_IO);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "is a directory"));

    int64_t shape[2] = {2, 2};
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 2, shape, &t), NX_OK);
    assert_int_equal(nx_npy_write(ctx, "/nonexistent-dir-nx/x.npy", t), NX_ERR_IO);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "temporary file"));

    /* a directory is refused before anything is written */
    char sub[256];
    snprintf(sub, sizeof sub, "%s", tmp_path("subdir"));
    assert_int_equal(mkdir(sub, 0700), 0);
    char target[300];
    snprintf(target, sizeof target, "%s/target", sub);
    assert_int_equal(mkdir(target, 0700), 0);
    assert_int_equal(nx_npy_write(ctx, target, t), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "is a directory"));
    assert_int_equal(count_entries(sub), 1);
    assert_int_equal(count_entries(target), 0);
    assert_int_equal(rmdir(target), 0);

    /* an existing file is replaced whole, nothing else is left beside it */
    spit(target, "old contents", 12);
    assert_int_equal(nx_npy_write(ctx, target, t), NX_OK);
    assert_int_equal(count_entries(sub), 1);
    nx_tensor *back = NULL;
    assert_int_equal(nx_npy_read(ctx, target, &back), NX_OK);
    expect_same(t, back);
    nx_tensor_free(back);
    unlink(target);
    rmdir(sub);
    nx_tensor_free(t);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void test_invalid_args(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_tensor *t = NULL;
    void *buf = NULL;
    size_t len = 0;
    assert_int_equal(nx_npy_read(NULL, "x.npy", &t), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_npy_read(ctx, NULL, &t), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_npy_read(ctx, "x.npy", NULL), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_npy_read_mem(ctx, NULL, 10, &t), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_npy_read_mem(ctx, "", 0, NULL), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_npy_write_mem(ctx, NULL, &buf, &len), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_npy_write(ctx, NULL, NULL), NX_ERR_INVALID_ARG);

    /* a tensor marked as device memory is refused before anything is touched */
    int64_t n = 3;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, &n, &t), NX_OK);
    t->storage->device = NX_DEVICE_CUDA;
    assert_int_equal(nx_npy_write_mem(ctx, t, &buf, &len), NX_ERR_INVALID_ARG);
    assert_null(buf);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "device"));
    assert_int_equal(nx_npy_write(ctx, tmp_path("dev.npy"), t), NX_ERR_INVALID_ARG);
    assert_int_equal(access(tmp_path("dev.npy"), F_OK), -1);
    t->storage->device = NX_DEVICE_HOST;
    nx_tensor_free(t);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* A pipe has no size up front: it is read whole, then parsed. */
static void test_read_pipe(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    const npy_fixture *fx = NULL;
    for (size_t k = 0; k < NFIXTURES; k++)
        if (strcmp(npy_fixtures[k].file, "f8_3x5_f_be.npy") == 0)
            fx = &npy_fixtures[k];
    assert_non_null(fx);
    size_t len;
    uint8_t *buf = slurp(fixture_path(fx->file), &len);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], buf, len), (ssize_t)len);
    close(fds[1]);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    nx_tensor *t = NULL;
    if (nx_npy_read(ctx, path, &t) != NX_OK)
        fail_msg("pipe: %s", nx_ctx_last_error(ctx));
    expect_fixture(fx, t, "pipe");
    nx_tensor_free(t);
    close(fds[0]);
    free(buf);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* A write that fails part way (the file size limit) reports it and leaves no temporary file. */
static void test_write_fails_midway(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    int64_t n = 100000; /* 400 KB: several chunks */
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 1, &n, &t), NX_OK);
    char sub[256];
    snprintf(sub, sizeof sub, "%s", tmp_path("limited"));
    assert_int_equal(mkdir(sub, 0700), 0);
    char target[300];
    snprintf(target, sizeof target, "%s/x.npy", sub);

    struct rlimit old, small;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    small = old;
    small.rlim_cur = 100000;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    nx_status st = nx_npy_write(ctx, target, t);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);

    assert_int_equal(st, NX_ERR_IO);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "write failed"));
    assert_non_null(strstr(nx_ctx_last_error(ctx), "x.npy"));
    assert_int_equal(count_entries(sub), 0);
    assert_int_equal(rmdir(sub), 0);
    nx_tensor_free(t);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* Messages keep their shape when the path is longer than the room for it. */
static void test_long_path_message(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    char path[1200];
    size_t k = (size_t)snprintf(path, sizeof path, "%s/", tmpdir[0] ? tmpdir : "/tmp");
    memset(path + k, 'd', 1000);
    path[k + 1000] = '\0';
    nx_tensor *t = NULL;
    assert_int_equal(nx_npy_read(ctx, path, &t), NX_ERR_IO);
    const char *msg = nx_ctx_last_error(ctx);
    assert_non_null(strstr(msg, "nx_npy_read: "));
    assert_non_null(strstr(msg, "...: cannot open the file"));
    nx_ctx_free(ctx);
}


/* ---- output targets --------------------------------------------------------------------------*/

/* The bytes nx_npy_write must put at a target for t (the buffer writer's, checked against NumPy's
 * files above). */
static uint8_t *expected_bytes(nx_ctx *ctx, const nx_tensor *t, size_t *len)
{
    void *buf = NULL;
    assert_int_equal(nx_npy_write_mem(ctx, t, &buf, len), NX_OK);
    uint8_t *copy = malloc(*len);
    assert_non_null(copy);
    memcpy(copy, buf, *len);
    nx_ctx_buffer_free(ctx, buf, *len);
    return copy;
}

static bool file_is(const char *path, const uint8_t *want, size_t len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    uint8_t *got = malloc(len + 1);
    size_t n = fread(got, 1, len + 1, f);
    fclose(f);
    bool same = n == len && memcmp(got, want, len) == 0;
    free(got);
    return same;
}

static nx_tensor *small_tensor(nx_ctx *ctx, double base)
{
    int64_t shape[2] = {3, 4};
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, shape, &t), NX_OK);
    double *p = nx_tensor_data(t);
    for (int i = 0; i < 12; i++)
        p[i] = base + i;
    return t;
}

static char target_dir[300];

static const char *in_targets(const char *name)
{
    static char buf[2][600];
    static int k;
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s/%s", target_dir, name);
    return buf[k];
}

static int count_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t l = strlen(e->d_name);
        n += l > 4 && strcmp(e->d_name + l - 4, ".tmp") == 0;
    }
    closedir(d);
    return n;
}

/* A new file, an existing file's mode, symbolic links (one, a chain, dangling, a loop), hard
 * links, a directory, a socket, a FIFO with and without a reader, /dev/null, /dev/full, and a
 * /proc/self/fd magic link (what /dev/stdout is). */
static void test_write_targets(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    snprintf(target_dir, sizeof target_dir, "%s", tmp_path("targets"));
    assert_int_equal(mkdir(target_dir, 0700), 0);
    nx_tensor *t = small_tensor(ctx, 1);
    size_t len;
    uint8_t *want = expected_bytes(ctx, t, &len);
    struct stat sb;

    /* new: 0666 less the umask */
    mode_t mask = umask(022);
    assert_int_equal(nx_npy_write(ctx, in_targets("new.npy"), t), NX_OK);
    umask(mask);
    assert_true(file_is(in_targets("new.npy"), want, len));
    assert_int_equal(stat(in_targets("new.npy"), &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0644);

    /* existing files keep their permission bits */
    static const mode_t modes[] = {0600, 0640, 0444, 0700};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        char name[32];
        snprintf(name, sizeof name, "mode%o.npy", (unsigned)modes[i]);
        spit(in_targets(name), "old", 3);
        assert_int_equal(chmod(in_targets(name), modes[i]), 0);
        assert_int_equal(nx_npy_write(ctx, in_targets(name), t), NX_OK);
        assert_true(file_is(in_targets(name), want, len));
        assert_int_equal(stat(in_targets(name), &sb), 0);
        if ((sb.st_mode & 0777) != modes[i])
            fail_msg("%s: mode %o became %o", name, (unsigned)modes[i],
                     (unsigned)(sb.st_mode & 0777));
    }

    /* a symbolic link: the file it names is written, the link stays */
    spit(in_targets("real.npy"), "old", 3);
    assert_int_equal(chmod(in_targets("real.npy"), 0600), 0);
    assert_int_equal(symlink("real.npy", in_targets("link.npy")), 0);
    assert_int_equal(nx_npy_write(ctx, in_targets("link.npy"), t), NX_OK);
    assert_int_equal(lstat(in_targets("link.npy"), &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    assert_true(file_is(in_targets("real.npy"), want, len));
    assert_int_equal(stat(in_targets("real.npy"), &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);

    /* a chain of links, relative and absolute, ending nowhere: the last name is created, in the
     * directory of the link that names it */
    char sub[600], abs_target[700];
    snprintf(sub, sizeof sub, "%s", in_targets("sub"));
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(abs_target, sizeof abs_target, "%s/deep.npy", sub);
    assert_int_equal(symlink(abs_target, in_targets("sub/l2.npy")), 0);
    assert_int_equal(symlink("sub/l2.npy", in_targets("l1.npy")), 0);
    assert_int_equal(nx_npy_write(ctx, in_targets("l1.npy"), t), NX_OK);
    assert_true(file_is(abs_target, want, len));
    assert_int_equal(lstat(in_targets("sub/l2.npy"), &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    assert_int_equal(count_entries(sub), 2);

    /* a loop of links */
    assert_int_equal(symlink("loop-b", in_targets("loop-a")), 0);
    assert_int_equal(symlink("loop-a", in_targets("loop-b")), 0);
    assert_int_equal(nx_npy_write(ctx, in_targets("loop-a"), t), NX_ERR_IO);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "symbolic links"));

    /* hard links: written in place, both names see the array, the link count stays 2 */
    static const char longer[] = "a longer old content than the array, to be truncated";
    spit(in_targets("h1.npy"), longer, sizeof longer - 1);
    assert_int_equal(link(in_targets("h1.npy"), in_targets("h2.npy")), 0);
    assert_int_equal(stat(in_targets("h1.npy"), &sb), 0);
    ino_t ino = sb.st_ino;
    assert_int_equal(nx_npy_write(ctx, in_targets("h1.npy"), t), NX_OK);
    assert_true(file_is(in_targets("h1.npy"), want, len));
    assert_true(file_is(in_targets("h2.npy"), want, len));
    assert_int_equal(stat(in_targets("h2.npy"), &sb), 0);
    assert_int_equal(sb.st_ino, ino);
    assert_int_equal(sb.st_nlink, 2);

    /* a directory and a socket are refused; nothing changes */
    assert_int_equal(nx_npy_write(ctx, sub, t), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "is a directory"));
    assert_int_equal(count_entries(sub), 2);
    int sock = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", in_targets("sock"));
    if (sock >= 0 && strlen(in_targets("sock")) < sizeof addr.sun_path &&
        bind(sock, (struct sockaddr *)&addr, sizeof addr) == 0) {
        assert_int_equal(nx_npy_write(ctx, in_targets("sock"), t), NX_ERR_INVALID_ARG);
        assert_non_null(strstr(nx_ctx_last_error(ctx), "is a socket"));
        assert_int_equal(lstat(in_targets("sock"), &sb), 0);
        assert_true(S_ISSOCK(sb.st_mode));
    }
    if (sock >= 0)
        close(sock);

    /* a FIFO: refused at once without a reader; written whole with one */
    assert_int_equal(mkfifo(in_targets("fifo"), 0600), 0);
    assert_int_equal(nx_npy_write(ctx, in_targets("fifo"), t), NX_ERR_IO);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "no reader"));
    int rfd = open(in_targets("fifo"), O_RDONLY | O_NONBLOCK);
    assert_true(rfd >= 0);
    assert_int_equal(nx_npy_write(ctx, in_targets("fifo"), t), NX_OK); /* fits the pipe buffer */
    uint8_t *got = malloc(len + 1);
    assert_int_equal(read(rfd, got, len + 1), (ssize_t)len);
    assert_memory_equal(got, want, len);
    /* the reader gone: EPIPE, reported, and SIGPIPE does not end the process */
    int wfd = open(in_targets("fifo"), O_WRONLY | O_NONBLOCK); /* keeps the FIFO openable */
    close(rfd);
    if (wfd >= 0)
        close(wfd);
    assert_int_equal(lstat(in_targets("fifo"), &sb), 0);
    assert_true(S_ISFIFO(sb.st_mode));

    /* a magic link of /proc (what /dev/stdout is): the open file is written in place */
    int ofd = open(in_targets("fd-target.npy"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(ofd >= 0);
    char fdpath[64];
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", ofd);
    if (access(fdpath, F_OK) == 0) {
        assert_int_equal(nx_npy_write(ctx, fdpath, t), NX_OK);
        assert_true(file_is(in_targets("fd-target.npy"), want, len));
    }
    close(ofd);

    /* /dev/null is a sink; /dev/full fails with ENOSPC; both stay devices */
    assert_int_equal(nx_npy_write(ctx, "/dev/null", t), NX_OK);
    assert_int_equal(stat("/dev/null", &sb), 0);
    assert_true(S_ISCHR(sb.st_mode));
    if (access("/dev/full", W_OK) == 0) {
        assert_int_equal(nx_npy_write(ctx, "/dev/full", t), NX_ERR_IO);
        assert_non_null(strstr(nx_ctx_last_error(ctx), "No space left"));
        assert_int_equal(stat("/dev/full", &sb), 0);
        assert_true(S_ISCHR(sb.st_mode));
    }

    assert_int_equal(count_tmp(target_dir), 0);
    assert_int_equal(count_tmp(sub), 0);
    free(got);
    free(want);
    nx_tensor_free(t);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* nx_npy_write_many: all or nothing. */
static void test_write_many(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    char dir[300];
    snprintf(dir, sizeof dir, "%s", tmp_path("many"));
    assert_int_equal(mkdir(dir, 0700), 0);
    char a[400], b[400], c[400], d[400], sub[400];
    snprintf(a, sizeof a, "%s/a.npy", dir);
    snprintf(b, sizeof b, "%s/b.npy", dir);
    snprintf(c, sizeof c, "%s/c.npy", dir);
    snprintf(d, sizeof d, "%s/d-link.npy", dir);
    snprintf(sub, sizeof sub, "%s/sub", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    nx_tensor *t1 = small_tensor(ctx, 1), *t2 = small_tensor(ctx, 100);
    size_t len1, len2;
    uint8_t *w1 = expected_bytes(ctx, t1, &len1), *w2 = expected_bytes(ctx, t2, &len2);
    const nx_tensor *ts[3] = {t1, t2, t1};

    /* the second is a directory: the first, an existing good file, is untouched */
    spit(a, "good", 4);
    const char *p1[2] = {a, sub};
    assert_int_equal(nx_npy_write_many(ctx, 2, p1, ts), NX_ERR_INVALID_ARG);
    assert_true(file_is(a, (const uint8_t *)"good", 4));
    /* ... and a new first output is not created */
    const char *p2[2] = {b, sub};
    assert_int_equal(nx_npy_write_many(ctx, 2, p2, ts), NX_ERR_INVALID_ARG);
    assert_int_equal(access(b, F_OK), -1);
    /* the second fails while written (/dev/full): nothing renamed */
    if (access("/dev/full", W_OK) == 0) {
        const char *p3[2] = {a, "/dev/full"};
        assert_int_equal(nx_npy_write_many(ctx, 2, p3, ts), NX_ERR_IO);
        assert_true(file_is(a, (const uint8_t *)"good", 4));
        const char *p4[2] = {b, "/dev/full"};
        assert_int_equal(nx_npy_write_many(ctx, 2, p4, ts), NX_ERR_IO);
        assert_int_equal(access(b, F_OK), -1);
    }
    /* the second's directory is missing: its temporary file cannot be made */
    char missing[450];
    snprintf(missing, sizeof missing, "%s/no/such.npy", dir);
    const char *p5[2] = {a, missing};
    assert_int_equal(nx_npy_write_many(ctx, 2, p5, ts), NX_ERR_IO);
    assert_true(file_is(a, (const uint8_t *)"good", 4));
    /* two names of one file (a link to it) are refused */
    assert_int_equal(symlink("a.npy", d), 0);
    const char *p6[2] = {a, d};
    assert_int_equal(nx_npy_write_many(ctx, 2, p6, ts), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "same file"));
    assert_true(file_is(a, (const uint8_t *)"good", 4));
    /* all three written */
    const char *p7[3] = {a, b, c};
    assert_int_equal(nx_npy_write_many(ctx, 3, p7, ts), NX_OK);
    assert_true(file_is(a, w1, len1));
    assert_true(file_is(b, w2, len2));
    assert_true(file_is(c, w1, len1));
    assert_int_equal(count_tmp(dir), 0);
    /* bad arguments */
    assert_int_equal(nx_npy_write_many(ctx, 0, p7, ts), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_npy_write_many(ctx, NX_NPY_WRITE_MAX + 1, p7, ts), NX_ERR_INVALID_ARG);
    const char *p8[2] = {a, NULL};
    assert_int_equal(nx_npy_write_many(ctx, 2, p8, ts), NX_ERR_INVALID_ARG);
    free(w1);
    free(w2);
    nx_tensor_free(t1);
    nx_tensor_free(t2);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* Streams are read with a bound: /dev/zero fails at the magic; a pipe with more bytes than the
 * header declares fails after the data; one declaring 8 TB that ends early fails having
 * allocated only what arrived. */
typedef struct peak_alloc {
    size_t largest;
} peak_alloc;

static void *peak_fn(void *user, size_t size, size_t align)
{
    peak_alloc *pa = user;
    if (size > pa->largest)
        pa->largest = size;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) != 0)
        return NULL;
    return p;
}

static void peak_free(void *user, void *p, size_t size)
{
    (void)user;
    (void)size;
    free(p);
}

static void feed_pipe(int fds[2], const char *header_dict, size_t extra)
{
    char full[129];
    memcpy(full, "\x93NUMPY\x01\x00\x76\x00", 10); /* version 1.0, header of 118 bytes */
    snprintf(full + 10, 118, "%-117s", header_dict);
    full[127] = '\n';
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], full, 128), 128);
    static const uint8_t zeros[4096];
    while (extra > 0) {
        size_t n = extra < sizeof zeros ? extra : sizeof zeros;
        assert_int_equal(write(fds[1], zeros, n), (ssize_t)n);
        extra -= n;
    }
    close(fds[1]);
}

static void test_read_bounded(void **state)
{
    (void)state;
    peak_alloc pa = {0};
    nx_allocator al = {peak_fn, peak_free, &pa};
    nx_ctx_opts opts = {.allocator = &al, .ignore_env = true};
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(&opts, &ctx), NX_OK);
    nx_tensor *t = NULL;
    assert_int_equal(nx_npy_read(ctx, "/dev/zero", &t), NX_ERR_PARSE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "bad magic"));
    assert_null(t);

    int fds[2];
    char path[64];
    /* 4 f8 declared, 4 KiB sent: trailing data (the pipe holds it all) */
    feed_pipe(fds, "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", 4096);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    assert_int_equal(nx_npy_read(ctx, path, &t), NX_ERR_PARSE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "trailing data"));
    close(fds[0]);
    /* exactly the data: read */
    feed_pipe(fds, "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", 32);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    assert_int_equal(nx_npy_read(ctx, path, &t), NX_OK);
    assert_int_equal(nx_tensor_numel(t), 4);
    nx_tensor_free(t);
    t = NULL;
    close(fds[0]);
    /* 8 TB declared, 1000 bytes sent: truncated, and no allocation near 8 TB was asked for */
    pa.largest = 0;
    feed_pipe(fds, "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }", 1000);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    assert_int_equal(nx_npy_read(ctx, path, &t), NX_ERR_PARSE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "truncated"));
    if (pa.largest > (1u << 20))
        fail_msg("a stream that sent 1000 bytes made an allocation of %zu bytes", pa.largest);
    close(fds[0]);
    /* a truncated header */
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], "\x93NUMPY\x01\x00\x76\x00{'descr'", 18), 18);
    close(fds[1]);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    assert_int_equal(nx_npy_read(ctx, path, &t), NX_ERR_PARSE);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "truncated header"));
    close(fds[0]);
    nx_ctx_free(ctx);
}

/* ---- allocation failures ---------------------------------------------------------------------*/

static nx_status sweep_read_file(nx_ctx *ctx, void *user)
{
    nx_tensor *t = NULL;
    nx_status st = nx_npy_read(ctx, fixture_path(user), &t);
    nx_tensor_free(t);
    return st;
}

typedef struct mem_input {
    const uint8_t *buf;
    size_t len;
} mem_input;

static nx_status sweep_read_mem(nx_ctx *ctx, void *user)
{
    const mem_input *in = user;
    nx_tensor *t = NULL;
    nx_status st = nx_npy_read_mem(ctx, in->buf, in->len, &t);
    nx_tensor_free(t);
    return st;
}

static nx_status sweep_write_mem(nx_ctx *ctx, void *user)
{
    const mem_input *in = user;
    nx_tensor *t = NULL;
    nx_status st = nx_npy_read_mem(ctx, in->buf, in->len, &t);
    if (st != NX_OK)
        return st;
    void *buf = NULL;
    size_t len = 0;
    st = nx_npy_write_mem(ctx, t, &buf, &len);
    if (st == NX_OK && (len != in->len || memcmp(buf, in->buf, len) != 0))
        fail_msg("sweep: write_mem output differs from its input");
    nx_ctx_buffer_free(ctx, buf, len);
    nx_tensor_free(t);
    return st;
}

static nx_status sweep_write_file(nx_ctx *ctx, void *user)
{
    const mem_input *in = user;
    nx_tensor *t = NULL;
    nx_status st = nx_npy_read_mem(ctx, in->buf, in->len, &t);
    if (st != NX_OK)
        return st;
    st = nx_npy_write(ctx, tmp_path("sweep.npy"), t);
    nx_tensor_free(t);
    return st;
}

/* The pipe reader's growing buffer fails cleanly at every step too. */
static nx_status sweep_read_pipe(nx_ctx *ctx, void *user)
{
    const mem_input *in = user;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], in->buf, in->len), (ssize_t)in->len);
    close(fds[1]);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    nx_tensor *t = NULL;
    nx_status st = nx_npy_read(ctx, path, &t);
    nx_tensor_free(t);
    close(fds[0]);
    return st;
}

static void test_alloc_sweeps(void **state)
{
    (void)state;
    static const char *const files[] = {"f8_3x5_f.npy", "f4_c.npy", "bf16_0d.npy",
                                        "i2_empty.npy", "f4_8d_f.npy"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        int64_t n = nx_test_alloc_sweep(sweep_read_file, (void *)files[i], 64);
        assert_true(n >= 3); /* storage, data, handle at least */
        size_t len;
        uint8_t *buf = slurp(fixture_path(files[i]), &len);
        mem_input in = {buf, len};
        nx_test_alloc_sweep(sweep_read_mem, &in, 64);
        nx_test_alloc_sweep(sweep_read_pipe, &in, 64);
        nx_test_alloc_sweep(sweep_write_file, &in, 64);
        free(buf);
    }
    static const char *const canon[] = {"f4_c.npy", "u1_0d.npy", "b1_empty.npy", "i4_big.npy"};
    for (size_t i = 0; i < sizeof canon / sizeof *canon; i++) {
        size_t len;
        uint8_t *buf = slurp(fixture_path(canon[i]), &len);
        mem_input in = {buf, len};
        nx_test_alloc_sweep(sweep_write_mem, &in, 64);
        nx_test_alloc_sweep(sweep_write_file, &in, 64);
        free(buf);
    }
    unlink(tmp_path("sweep.npy"));
}

static int cleanup(void **state)
{
    (void)state;
    if (tmpdir[0]) {
        unlink(tmp_path("bad.npy"));
        rmdir(tmpdir);
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures_read),
        cmocka_unit_test(test_fixtures_rewrite_bytes),
        cmocka_unit_test(test_big_fixture),
        cmocka_unit_test(test_roundtrip_dtypes),
        cmocka_unit_test(test_roundtrip_strided),
        cmocka_unit_test(test_bool_normalised),
        cmocka_unit_test(test_malformed_headers),
        cmocka_unit_test(test_malformed_preamble),
        cmocka_unit_test(test_huge_shape_never_allocates),
        cmocka_unit_test(test_io_errors),
        cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_read_pipe),
        cmocka_unit_test(test_write_fails_midway),
        cmocka_unit_test(test_long_path_message),
        cmocka_unit_test(test_write_targets),
        cmocka_unit_test(test_write_many),
        cmocka_unit_test(test_read_bounded),
        cmocka_unit_test(test_alloc_sweeps),
    };
    return cmocka_run_group_tests(tests, NULL, cleanup);
}
