/* nx_system_info_get against independent sources: the kernel's /proc/cpuinfo (which lists only
 * the features the OS has enabled, as the probe must), llvm-config's version as meson saw it, and
 * a cache tree of known size built here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#ifndef NX_TEST_LLVM_VERSION
#error "meson passes NX_TEST_LLVM_VERSION (llvm-config --version)"
#endif

/* Our spelling (LLVM's) and the kernel's. */
static const char *const feature_map[][2] = {
    {"sse2", "sse2"},
    {"sse3", "pni"},
    {"ssse3", "ssse3"},
    {"sse4.1", "sse4_1"},
    {"sse4.2", "sse4_2"},
    {"popcnt", "popcnt"},
    {"avx", "avx"},
    {"f16c", "f16c"},
    {"fma", "fma"},
    {"avx2", "avx2"},
    {"bmi1", "bmi1"},
    {"bmi2", "bmi2"},
    {"avx512f", "avx512f"},
    {"avx512dq", "avx512dq"},
    {"avx512cd", "avx512cd"},
    {"avx512bw", "avx512bw"},
    {"avx512vl", "avx512vl"},
    {"avx512ifma", "avx512ifma"},
    {"avx512vbmi", "avx512vbmi"},
    {"avx512vnni", "avx512_vnni"},
    {"avx512bf16", "avx512_bf16"},
    {"avx512fp16", "avx512_fp16"},
};

/* The value of the first "key : value" line of /proc/cpuinfo, or false. */
static bool cpuinfo_field(const char *key, char *buf, size_t len)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return false;
    char line[8192];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        size_t k = strlen(key);
        char *colon = strchr(line, ':');
        if (strncmp(line, key, k) != 0 || !colon || (line[k] != ' ' && line[k] != '\t'))
            continue;
        const char *v = colon + 1;
        while (*v == ' ')
            v++;
        snprintf(buf, len, "%s", v);
        buf[strcspn(buf, "\n")] = '\0';
        found = true;
    }
    fclose(f);
    return found;
}

static bool has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += n) {
        bool start = p == list || p[-1] == ' ';
        bool end = p[n] == '\0' || p[n] == ' ';
        if (start && end)
            return true;
    }
    return false;
}

static void get_info(nx_system_info *info)
{
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    assert_int_equal(nx_system_info_get(ctx, info), NX_OK);
    nx_ctx_free(ctx);
}

static void test_version_and_llvm(void **state)
{
    (void)state;
    nx_system_info info;
    get_info(&info);
    char want[16];
    snprintf(want, sizeof want, "%d.%d.%d", NITRIX_VERSION_MAJOR, NITRIX_VERSION_MINOR,
             NITRIX_VERSION_PATCH);
    assert_string_equal(info.version, want);
    assert_string_equal(info.llvm_version, NX_TEST_LLVM_VERSION);
}

static void test_cpu_features_match_kernel(void **state)
{
    (void)state;
    static char flags[8192];
    if (!cpuinfo_field("flags", flags, sizeof flags)) {
        puts("no x86 flags line in /proc/cpuinfo: feature check skipped");
        skip();
    }
    nx_system_info info;
    get_info(&info);
    printf("features: %s\n", info.cpu_features);
    for (size_t i = 0; i < sizeof feature_map / sizeof feature_map[0]; i++) {
        bool ours = has_word(info.cpu_features, feature_map[i][0]);
        bool kernel = has_word(flags, feature_map[i][1]);
        if (ours != kernel)
            fail_msg("feature %s: probe says %d, /proc/cpuinfo (%s) says %d", feature_map[i][0],
                     ours, feature_map[i][1], kernel);
    }
    /* Every listed word is one of ours, once. */
    char copy[sizeof info.cpu_features];
    memcpy(copy, info.cpu_features, sizeof copy);
    int words = 0;
    for (char *w = strtok(copy, " "); w; w = strtok(NULL, " ")) {
        bool known = false;
        for (size_t i = 0; i < sizeof feature_map / sizeof feature_map[0]; i++)
            known = known || strcmp(w, feature_map[i][0]) == 0;
        assert_true(known);
        words++;
    }
    int expected = 0;
    for (size_t i = 0; i < sizeof feature_map / sizeof feature_map[0]; i++)
        expected += has_word(flags, feature_map[i][1]);
    assert_int_equal(words, expected);
}

static void test_cpu_name_and_cores(void **state)
{
    (void)state;
    char model[256];
    nx_system_info info;
    get_info(&info);
    if (cpuinfo_field("model name", model, sizeof model)) {
        size_t n = strlen(model);
        while (n > 0 && model[n - 1] == ' ')
            model[--n] = '\0';
        assert_string_equal(info.cpu_name, model);
    }
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[8192];
        int procs = 0;
        while (fgets(line, sizeof line, f))
            procs += strncmp(line, "processor", 9) == 0;
        fclose(f);
        assert_int_equal(info.cpu_cores, procs);
    }
    assert_true(info.cpu_cores >= 1);
}

static void write_bytes(const char *path, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        fputc((int)(i & 0xff), f);
    fclose(f);
}

static void test_cache_size(void **state)
{
    (void)state;
    char root[] = "/tmp/nitrix-probe-XXXXXX";
    assert_non_null(mkdtemp(root));
    char p[512], big[512];
    snprintf(p, sizeof p, "%s/cache", root);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/cache/x86", root);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/cache/x86/k1.o", root);
    write_bytes(p, 1234);
    snprintf(p, sizeof p, "%s/cache/index", root);
    write_bytes(p, 17);
    snprintf(p, sizeof p, "%s/cache/empty", root);
    assert_int_equal(mkdir(p, 0700), 0);
    /* A link to a big file outside must not be followed. */
    snprintf(big, sizeof big, "%s/big", root);
    write_bytes(big, 100000);
    snprintf(p, sizeof p, "%s/cache/x86/link", root);
    assert_int_equal(symlink(big, p), 0);

    snprintf(p, sizeof p, "%s/cache", root);
    setenv("NITRIX_CACHE_DIR", p, 1);
    nx_system_info info;
    get_info(&info);
    assert_string_equal(info.cache_dir, p);
    assert_int_equal(info.cache_bytes, 1234 + 17);

    snprintf(p, sizeof p, "%s/not-there", root);
    setenv("NITRIX_CACHE_DIR", p, 1);
    get_info(&info);
    assert_int_equal(info.cache_bytes, -1);

    setenv("NITRIX_CACHE_DIR", big, 1); /* a file, not a directory */
    get_info(&info);
    assert_int_equal(info.cache_bytes, -1);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

static void test_cuda_fields_consistent(void **state)
{
    (void)state;
    nx_system_info info;
    get_info(&info);
    assert_true(info.cuda_status[0] != '\0');
    assert_true(info.gpu_count >= 0 && info.gpu_count <= NX_MAX_GPUS);
    if (!info.cuda_driver_found)
        assert_int_equal(info.gpu_count, 0);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    assert_int_equal(nx_system_info_get(ctx, NULL), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "out is NULL"));
    nx_system_info info;
    assert_int_equal(nx_system_info_get(NULL, &info), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(NULL), "ctx is NULL"));
    /* A full probe through a counting allocator leaves nothing behind. */
    assert_int_equal(nx_system_info_get(ctx, &info), NX_OK);
    nx_ctx_free(ctx);
    assert_int_equal(ta.live, 0);
    assert_int_equal(ta.size_errors, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_and_llvm),
        cmocka_unit_test(test_cpu_features_match_kernel),
        cmocka_unit_test(test_cpu_name_and_cores),
        cmocka_unit_test(test_cache_size),
        cmocka_unit_test(test_cuda_fields_consistent),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests_name("probe", tests, NULL, NULL);
}
