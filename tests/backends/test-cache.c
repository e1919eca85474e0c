/* The CPU backend's kernel cache: memory hits, disk hits in a new context (a second process
 * compiles nothing), keys that change with shape, dtype and CPU features, damaged files that are
 * recompiled and replaced rather than run, and two processes racing on one directory. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/x86/emit.h"
#include "codegen/x86/jit.h"
#include "program/program.h"
#include "runtime/cache.h"
#include "testutil.h"

static char dir[256];

static nx_ctx *ctx_in(nx_test_alloc *ta, const char *d)
{
    nx_allocator a = nx_test_allocator(ta);
    nx_ctx_opts o = {.allocator = &a, .ignore_env = true, .cache_dir = d};
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(&o, &ctx), NX_OK);
    return ctx;
}

/* y = x * x + 1 on f32[n] (or dtype), lowered to one loop kernel. */
static nx_kplan *plan_of(nx_ctx *ctx, nx_graph **g, nx_dtype dt, int64_t n)
{
    assert_int_equal(nx_graph_new(ctx, g), NX_OK);
    nx_node x = nx_input(*g, "x", dt, 1, &n);
    nx_node y = nx_add(*g, nx_mul(*g, x, x), nx_scalar(*g, dt, 1));
    nx_kplan *p = NULL;
    assert_int_equal(nx_pass_pipeline(ctx, &(*g)->s, 1, &y, &p), NX_OK);
    assert_int_equal(p->nkernels, 1);
    return p;
}

static nx_x86_get_info get(nx_ctx *ctx, const nx_kernel *k, nx_x86_loop_fn *fn)
{
    nx_x86_get_info info;
    nx_status st = nx_x86_kernel_get(ctx, k, true, fn, &info);
    if (st != NX_OK)
        fail_msg("kernel get: %s", nx_ctx_last_error(ctx));
    return info;
}

/* Runs fn on x = 0..n-1 and checks y = x * x + 1 (exact in f32 for these x). */
static void check_fn(nx_x86_loop_fn fn, int64_t n)
{
    float x[64], y[64];
    for (int i = 0; i < n; i++)
        x[i] = (float)i, y[i] = -1;
    void *bufs[2] = {y, x};
    fn(bufs, 0, n);
    for (int i = 0; i < n; i++)
        assert_true(y[i] == (float)(i * i + 1));
}

static int count_entries(const char *d)
{
    DIR *dp = opendir(d);
    int n = 0;
    struct dirent *de;
    while (dp && (de = readdir(dp)))
        n += strstr(de->d_name, NX_CACHE_FILE_EXT) != NULL;
    if (dp)
        closedir(dp);
    return n;
}

static void first_entry(const char *d, char *path, size_t len)
{
    DIR *dp = opendir(d);
    struct dirent *de;
    path[0] = 0;
    while (dp && (de = readdir(dp)))
        if (strstr(de->d_name, NX_CACHE_FILE_EXT))
            snprintf(path, len, "%s/%s", d, de->d_name);
    if (dp)
        closedir(dp);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/nx-cache-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = ctx_in(&ta, dir);
    nx_rt_cache_disk_clear(ctx, dir, NULL);
    nx_ctx_free(ctx);
    rmdir(dir);
    return 0;
}

static void test_hit_miss(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = ctx_in(&ta, dir);
    nx_graph *g = NULL;
    nx_kplan *p = plan_of(ctx, &g, NX_DTYPE_F32, 37);
    nx_x86_loop_fn fn = NULL, fn2 = NULL;
    nx_x86_get_info i1 = get(ctx, p->kernels[0], &fn);
    assert_false(i1.memory_hit);
    assert_false(i1.disk_hit);
    check_fn(fn, 37);
    nx_x86_get_info i2 = get(ctx, p->kernels[0], &fn2);
    assert_true(i2.memory_hit);
    assert_true(fn == fn2);
    assert_int_equal(count_entries(dir), 1);
    nx_kplan_free(p);
    nx_graph_free(g);
    nx_ctx_free(ctx);

    /* a new context (as a second process would) links the stored object: nothing compiled */
    ctx = ctx_in(&ta, dir);
    p = plan_of(ctx, &g, NX_DTYPE_F32, 37);
    nx_x86_get_info i3 = get(ctx, p->kernels[0], &fn);
    assert_true(i3.disk_hit);
    check_fn(fn, 37);
    nx_x86_jit *jit = NULL;
    nx_x86_jit_stats js;
    assert_int_equal(nx_x86_jit_get(ctx, &jit), NX_OK);
    nx_x86_jit_stats_get(jit, &js);
    assert_true(js.opt_seconds == 0 && js.codegen_seconds == 0);
    nx_kplan_free(p);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void key_hex(nx_ctx *ctx, const nx_kernel *k, const nx_x86_target *t, char hex[33])
{
    nx_rt_cache_blob b;
    nx_rt_cache_key key;
    assert_int_equal(nx_x86_kernel_key(ctx, k, true, t, &b, &key), NX_OK);
    nx_rt_cache_key_hex(&key, hex);
    nx_rt_cache_blob_free(&b);
}

static void test_key_changes(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = ctx_in(&ta, dir);
    nx_x86_jit *jit = NULL;
    assert_int_equal(nx_x86_jit_get(ctx, &jit), NX_OK);
    nx_x86_target t = *nx_x86_jit_target(jit);
    nx_graph *g1, *g2, *g3, *g4;
    nx_kplan *p1 = plan_of(ctx, &g1, NX_DTYPE_F32, 37), *p2 = plan_of(ctx, &g2, NX_DTYPE_F32, 38);
    nx_kplan *p3 = plan_of(ctx, &g3, NX_DTYPE_F64, 37), *p4 = plan_of(ctx, &g4, NX_DTYPE_F32, 37);
    char h1[33], h2[33], h3[33], h4[33], h5[33];
    key_hex(ctx, p1->kernels[0], &t, h1);
    key_hex(ctx, p2->kernels[0], &t, h2);
    key_hex(ctx, p3->kernels[0], &t, h3);
    key_hex(ctx, p4->kernels[0], &t, h4);
    nx_x86_target other = t;
    other.features = "+sse2,-avx2,-avx512f";
    key_hex(ctx, p1->kernels[0], &other, h5);
    assert_string_equal(h1, h4);     /* same kernel, same key */
    assert_string_not_equal(h1, h2); /* shape */
    assert_string_not_equal(h1, h3); /* dtype */
    assert_string_not_equal(h1, h5); /* CPU features */
    nx_kplan_free(p1), nx_kplan_free(p2), nx_kplan_free(p3), nx_kplan_free(p4);
    nx_graph_free(g1), nx_graph_free(g2), nx_graph_free(g3), nx_graph_free(g4);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

static void damage(const char *path, bool truncate_it)
{
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    if (truncate_it) {
        assert_int_equal(truncate(path, sb.st_size / 2), 0);
        return;
    }
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    off_t at = sb.st_size - 100; /* inside the object's bytes */
    unsigned char c;
    assert_int_equal(pread(fd, &c, 1, at), 1);
    c ^= 0x10;
    assert_int_equal(pwrite(fd, &c, 1, at), 1);
    close(fd);
}

static void test_damaged_files(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        nx_test_alloc ta = {0};
        nx_ctx *ctx = ctx_in(&ta, dir);
        nx_graph *g = NULL;
        nx_kplan *p = plan_of(ctx, &g, NX_DTYPE_F32, 40 + mode);
        nx_x86_loop_fn fn = NULL;
        get(ctx, p->kernels[0], &fn);
        nx_kplan_free(p);
        nx_graph_free(g);
        nx_ctx_free(ctx);
        char path[512];
        first_entry(dir, path, sizeof path);
        assert_true(path[0] != 0);
        damage(path, mode == 0);

        ctx = ctx_in(&ta, dir); /* the damaged entry is a miss: recompiled, replaced, correct */
        p = plan_of(ctx, &g, NX_DTYPE_F32, 40 + mode);
        nx_x86_get_info info = get(ctx, p->kernels[0], &fn);
        assert_false(info.disk_hit);
        check_fn(fn, 40 + mode);
        nx_kplan_free(p);
        nx_graph_free(g);
        nx_ctx_free(ctx);

        ctx = ctx_in(&ta, dir); /* ... and the replacement is whole */
        p = plan_of(ctx, &g, NX_DTYPE_F32, 40 + mode);
        info = get(ctx, p->kernels[0], &fn);
        assert_true(info.disk_hit);
        check_fn(fn, 40 + mode);
        nx_kplan_free(p);
        nx_graph_free(g);
        nx_ctx_free(ctx);
        assert_int_equal(ta.live, 0);
        teardown(NULL);
        setup(NULL);
    }
}

/* Two processes compile the same kernels into one empty directory at the same time. */
static void test_two_processes(void **state)
{
    (void)state;
    pid_t kids[2];
    for (int c = 0; c < 2; c++) {
        kids[c] = fork();
        assert_true(kids[c] >= 0);
        if (kids[c] == 0) {
            int bad = 0;
            for (int64_t n = 1; n <= 12; n++) {
                nx_test_alloc ta = {0};
                nx_allocator a = nx_test_allocator(&ta);
                nx_ctx_opts o = {.allocator = &a, .ignore_env = true, .cache_dir = dir};
                nx_ctx *ctx = NULL;
                nx_graph *g = NULL;
                nx_kplan *p = NULL;
                nx_x86_loop_fn fn = NULL;
                bad |= nx_ctx_new(&o, &ctx) != NX_OK;
                bad |= nx_graph_new(ctx, &g) != NX_OK;
                nx_node x = nx_input(g, "x", NX_DTYPE_F32, 1, &n);
                nx_node y = nx_add(g, nx_mul(g, x, x), nx_scalar(g, NX_DTYPE_F32, 1));
                bad |= nx_pass_pipeline(ctx, &g->s, 1, &y, &p) != NX_OK;
                bad |= !p || nx_x86_kernel_get(ctx, p->kernels[0], true, &fn, NULL) != NX_OK;
                float xs[16], ys[16];
                for (int i = 0; i < n; i++)
                    xs[i] = (float)i;
                void *bufs[2] = {ys, xs};
                if (!bad)
                    fn(bufs, 0, n);
                for (int i = 0; !bad && i < n; i++)
                    bad |= ys[i] != (float)(i * i + 1);
                nx_kplan_free(p);
                nx_graph_free(g);
                nx_ctx_free(ctx);
            }
            _exit(bad);
        }
    }
    for (int c = 0; c < 2; c++) {
        int status = 0;
        assert_int_equal(waitpid(kids[c], &status, 0), kids[c]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    assert_int_equal(count_entries(dir), 12);
    nx_test_alloc ta = {0};
    nx_ctx *ctx = ctx_in(&ta, dir);
    for (int64_t n = 1; n <= 12; n++) {
        nx_graph *g = NULL;
        nx_kplan *p = plan_of(ctx, &g, NX_DTYPE_F32, n);
        nx_x86_loop_fn fn = NULL;
        assert_true(get(ctx, p->kernels[0], &fn).disk_hit);
        check_fn(fn, n);
        nx_kplan_free(p);
        nx_graph_free(g);
    }
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* ---- a planted entry -----------------------------------------------------------------------*/

typedef struct warn_log {
    int warn;
    char last[768];
} warn_log;

static void log_warn(void *user, nx_log_level level, const char *msg)
{
    warn_log *l = user;
    if (level == NX_LOG_WARN) {
        l->warn++;
        snprintf(l->last, sizeof l->last, "%s", msg);
    }
}

static nx_ctx *ctx_logged(nx_test_alloc *ta, const char *d, warn_log *l)
{
    nx_allocator a = nx_test_allocator(ta);
    nx_ctx_opts o = {.allocator = &a, .ignore_env = true, .cache_dir = d, .log = log_warn,
                     .log_user = l};
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(&o, &ctx), NX_OK);
    return ctx;
}

/* y = x * x + c on f32[n], one loop kernel. */
static nx_kplan *plan_plus(nx_ctx *ctx, nx_graph **g, int64_t n, double c)
{
    assert_int_equal(nx_graph_new(ctx, g), NX_OK);
    nx_node x = nx_input(*g, "x", NX_DTYPE_F32, 1, &n);
    nx_node y = nx_add(*g, nx_mul(*g, x, x), nx_scalar(*g, NX_DTYPE_F32, c));
    nx_kplan *p = NULL;
    assert_int_equal(nx_pass_pipeline(ctx, &(*g)->s, 1, &y, &p), NX_OK);
    assert_int_equal(p->nkernels, 1);
    return p;
}

/* What a user who can write the cache directory does: the object of kernel b, compiled under
 * kernel a's symbol, stored as a's entry through the library's own format and checksum. */
static void plant(nx_ctx *ctx, const char *d, const nx_kernel *a, const nx_kernel *b)
{
    nx_x86_jit *jit = NULL;
    assert_int_equal(nx_x86_jit_get(ctx, &jit), NX_OK);
    nx_rt_cache_blob blob;
    nx_rt_cache_key key;
    assert_int_equal(nx_x86_kernel_key(ctx, a, true, nx_x86_jit_target(jit), &blob, &key), NX_OK);
    char hex[33], name[40];
    nx_rt_cache_key_hex(&key, hex);
    snprintf(name, sizeof name, "nxk_%s", hex);
    char *text = NULL;
    size_t tlen = 0;
    assert_int_equal(nx_x86_emit_text(b, name, true, &text, &tlen), NX_OK);
    nx_x86_module *m = NULL;
    assert_int_equal(nx_x86_module_parse(jit, name, text, strlen(text), &m), NX_OK);
    nx_rt_free(ctx, text, tlen);
    assert_int_equal(nx_x86_module_optimize(m, NX_X86_OPT_KERNEL), NX_OK);
    void *obj = NULL;
    size_t len = 0;
    assert_int_equal(nx_x86_module_emit_object(m, &obj, &len), NX_OK);
    nx_x86_module_free(m);
    nx_rt_cache *c = NULL;
    assert_int_equal(nx_rt_cache_open(ctx, d, &c), NX_OK);
    nx_rt_cache_store(c, &key, obj, len);
    assert_true(nx_rt_cache_disk_writable(c));
    nx_rt_cache_close(c);
    nx_rt_free(ctx, obj, len);
    nx_rt_cache_blob_free(&blob);
}

/* Plants b's code as a's entry in d (a fresh context does it, as another process would). */
static void plant_in(const char *d, int64_t n)
{
    nx_test_alloc ta = {0};
    nx_ctx *ctx = ctx_in(&ta, d);
    nx_graph *ga = NULL, *gb = NULL;
    nx_kplan *pa = plan_plus(ctx, &ga, n, 1), *pb = plan_plus(ctx, &gb, n, 2);
    plant(ctx, d, pa->kernels[0], pb->kernels[0]);
    nx_kplan_free(pa);
    nx_kplan_free(pb);
    nx_graph_free(ga);
    nx_graph_free(gb);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
}

/* Fetches y = x * x + 1 from a fresh context over d and runs it on x = 0..n-1: returns whether it
 * came from the disk and stores y[i] - x[i]^2 (1 for the true kernel, 2 for the planted one). */
static bool run_plus_one(const char *d, int64_t n, warn_log *l, float *diff)
{
    nx_test_alloc ta = {0};
    nx_ctx *ctx = ctx_logged(&ta, d, l);
    nx_graph *g = NULL;
    nx_kplan *p = plan_plus(ctx, &g, n, 1);
    nx_x86_loop_fn fn = NULL;
    nx_x86_get_info info = get(ctx, p->kernels[0], &fn);
    float x[64], y[64];
    for (int i = 0; i < n; i++)
        x[i] = (float)i, y[i] = -1;
    void *bufs[2] = {y, x};
    fn(bufs, 0, n);
    *diff = y[0];
    for (int i = 1; i < n; i++)
        if (y[i] - (float)(i * i) != *diff)
            *diff = -1;
    nx_kplan_free(p);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    return info.disk_hit;
}

/* An entry planted in the cache runs where this user alone could have planted it (which shows
 * the plant is real), and is ignored, recompiled and correct where another user could have:
 * a directory writable by group or others, an entry writable by them, an entry or a directory
 * owned by someone else (root only). */
static void test_planted_entry(void **state)
{
    (void)state;
    const int64_t n = 23;
    char d[512];
    float diff = 0;

    snprintf(d, sizeof d, "%s/private", dir);
    assert_int_equal(mkdir(d, 0700), 0);
    plant_in(d, n);
    warn_log l = {0};
    assert_true(run_plus_one(d, n, &l, &diff));
    assert_true(diff == 2); /* this user's own cache is trusted, planted code and all */
    assert_int_equal(l.warn, 0);

    enum { DIR_GROUP, DIR_OTHERS, ENTRY_GROUP, ENTRY_OTHERS, ENTRY_FOREIGN, DIR_FOREIGN, CASES };
    static const char *const names[] = {"dir-group", "dir-others", "entry-group",
                                        "entry-others", "entry-foreign", "dir-foreign"};
    for (int k = 0; k < CASES; k++) {
        if ((k == ENTRY_FOREIGN || k == DIR_FOREIGN) && geteuid() != 0) {
            printf("# test_planted_entry: %s skipped (chown needs root)\n", names[k]);
            continue;
        }
        snprintf(d, sizeof d, "%s/%s", dir, names[k]);
        assert_int_equal(mkdir(d, 0700), 0);
        plant_in(d, n);
        char entry[768];
        first_entry(d, entry, sizeof entry);
        assert_true(entry[0] != 0);
        switch (k) {
        case DIR_GROUP:
            assert_int_equal(chmod(d, 0770), 0);
            break;
        case DIR_OTHERS:
            assert_int_equal(chmod(d, 0703), 0);
            break;
        case ENTRY_GROUP:
            assert_int_equal(chmod(entry, 0660), 0);
            break;
        case ENTRY_OTHERS:
            assert_int_equal(chmod(entry, 0646), 0);
            break;
        case ENTRY_FOREIGN:
            assert_int_equal(chown(entry, 65534, (gid_t)-1), 0);
            break;
        case DIR_FOREIGN:
            assert_int_equal(chown(d, 65534, (gid_t)-1), 0);
            break;
        }
        warn_log lk = {0};
        assert_false(run_plus_one(d, n, &lk, &diff));
        if (diff != 1)
            fail_msg("%s: the planted kernel ran (y - x^2 = %g)", names[k], (double)diff);
        assert_int_equal(lk.warn, 1);
        assert_non_null(strstr(lk.last, "not used"));
        /* restore what teardown needs to remove the directory */
        if (k == DIR_FOREIGN)
            assert_int_equal(chown(d, 0, (gid_t)-1), 0);
        assert_int_equal(chmod(d, 0700), 0);
        nx_test_alloc ta = {0};
        nx_ctx *ctx = ctx_in(&ta, d);
        nx_rt_cache_disk_clear(ctx, d, NULL);
        nx_ctx_free(ctx);
        assert_int_equal(rmdir(d), 0);
    }
    snprintf(d, sizeof d, "%s/private", dir);
    nx_test_alloc ta = {0};
    nx_ctx *ctx = ctx_in(&ta, d);
    nx_rt_cache_disk_clear(ctx, d, NULL);
    nx_ctx_free(ctx);
    assert_int_equal(rmdir(d), 0);
}

/* The body of the allocation sweep below: y = x * x + 1 lowered and fetched from the cache. */
static nx_status get_body(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    int64_t n = 29;
    nx_node x = nx_input(g, "x", NX_DTYPE_F32, 1, &n);
    nx_node y = nx_add(g, nx_mul(g, x, x), nx_scalar(g, NX_DTYPE_F32, 1));
    nx_kplan *p = NULL;
    st = nx_graph_status(g);
    if (st == NX_OK)
        st = nx_pass_pipeline(ctx, &g->s, 1, &y, &p);
    nx_x86_loop_fn fn = NULL;
    nx_x86_get_info info;
    if (st == NX_OK)
        st = nx_x86_kernel_get(ctx, p->kernels[0], true, &fn, &info);
    if (st == NX_OK)
        check_fn(fn, n);
    nx_kplan_free(p);
    nx_graph_free(g);
    return st;
}

/* An allocation that fails while a stored object is linked is NX_ERR_NOMEM, not a miss that
 * compiles the kernel again and returns NX_OK. */
static void test_disk_hit_nomem(void **state)
{
    (void)state;
    const char *old = getenv("NITRIX_CACHE_DIR");
    char saved[256] = "";
    if (old)
        snprintf(saved, sizeof saved, "%s", old);
    setenv("NITRIX_CACHE_DIR", dir, 1);
    nx_test_alloc ta = {0};
    nx_ctx *ctx = ctx_in(&ta, dir);
    assert_int_equal(get_body(ctx, NULL), NX_OK); /* stores the object */
    nx_ctx_free(ctx);
    assert_int_equal(count_entries(dir), 1);
    int64_t n = nx_test_alloc_sweep(get_body, NULL, 20000);
    assert_true(n > 0);
    if (old)
        setenv("NITRIX_CACHE_DIR", saved, 1);
    else
        unsetenv("NITRIX_CACHE_DIR");
}

int main(void)
{
    umask(022); /* entries the tests write are private whatever the caller's umask */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hit_miss, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_hit_nomem, setup, teardown),
        cmocka_unit_test_setup_teardown(test_planted_entry, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
