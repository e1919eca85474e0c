/* nx_system_info_get: what this machine and this build offer, for `nitrix info` and for cache keys.
 *
 * CPU features come from cpuid, filtered by what the operating system has enabled: a CPU may
 * implement AVX or AVX-512 while the kernel does not save their registers on a context switch
 * (XCR0, read with xgetbv once OSXSAVE says it may be), and code using them would then corrupt
 * state or fault. So a feature is listed only when both the CPU and the OS allow it. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <llvm/Config/llvm-config.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define NX_PROBE_X86 1
#endif

/* Appends word to the space-separated list in buf (silently dropped if it would not fit). */
static void append_word(char *buf, size_t len, const char *word)
{
    size_t used = strlen(buf);
    size_t need = strlen(word) + (used ? 1 : 0);
    if (used + need + 1 > len)
        return;
    snprintf(buf + used, len - used, "%s%s", used ? " " : "", word);
}

#ifdef NX_PROBE_X86

typedef struct cpuid_regs {
    unsigned a, b, c, d;
} cpuid_regs;

/* Leaf/subleaf registers; all zero when the leaf is beyond what the CPU reports. */
static cpuid_regs cpuid(unsigned leaf, unsigned sub)
{
    cpuid_regs r = {0, 0, 0, 0};
    unsigned max = __get_cpuid_max(leaf & 0x80000000u, NULL);
    if (max >= leaf)
        __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
    return r;
}

/* XCR0: which register states the OS saves. Only valid when cpuid says OSXSAVE. */
static uint64_t xgetbv0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

#define XCR0_SSE (1u << 1)
#define XCR0_AVX (1u << 2)
#define XCR0_AVX512 (7u << 5) /* opmask, upper halves of zmm0-15, zmm16-31 */

typedef enum feat_state { NEEDS_SSE, NEEDS_AVX, NEEDS_AVX512 } feat_state;

typedef struct cpu_feature {
    const char *name; /* as LLVM and gcc spell them */
    unsigned leaf, sub;
    char reg; /* 'b', 'c' or 'd' */
    unsigned bit;
    feat_state state;
} cpu_feature;

/* clang-format off */
static const cpu_feature features[] = {
    {"sse2", 1, 0, 'd', 26, NEEDS_SSE},
    {"sse3", 1, 0, 'c', 0, NEEDS_SSE},
    {"ssse3", 1, 0, 'c', 9, NEEDS_SSE},
    {"sse4.1", 1, 0, 'c', 19, NEEDS_SSE},
    {"sse4.2", 1, 0, 'c', 20, NEEDS_SSE},
    {"popcnt", 1, 0, 'c', 23, NEEDS_SSE},
    {"avx", 1, 0, 'c', 28, NEEDS_AVX},
    {"f16c", 1, 0, 'c', 29, NEEDS_AVX},
    {"fma", 1, 0, 'c', 12, NEEDS_AVX},
    {"avx2", 7, 0, 'b', 5, NEEDS_AVX},
    {"bmi1", 7, 0, 'b', 3, NEEDS_SSE},
    {"bmi2", 7, 0, 'b', 8, NEEDS_SSE},
    {"avx512f", 7, 0, 'b', 16, NEEDS_AVX512},
    {"avx512dq", 7, 0, 'b', 17, NEEDS_AVX512},
    {"avx512cd", 7, 0, 'b', 28, NEEDS_AVX512},
    {"avx512bw", 7, 0, 'b', 30, NEEDS_AVX512},
    {"avx512vl", 7, 0, 'b', 31, NEEDS_AVX512},
    {"avx512ifma", 7, 0, 'b', 21, NEEDS_AVX512},
    {"avx512vbmi", 7, 0, 'c', 1, NEEDS_AVX512},
    {"avx512vnni", 7, 0, 'c', 11, NEEDS_AVX512},
    {"avx512bf16", 7, 1, 'a', 5, NEEDS_AVX512},
    {"avx512fp16", 7, 0, 'd', 23, NEEDS_AVX512},
};
/* clang-format on */

static unsigned reg_of(cpuid_regs r, char reg)
{
    switch (reg) {
    case 'a':
        return r.a;
    case 'b':
        return r.b;
    case 'c':
        return r.c;
    default:
        return r.d;
    }
}

static bool state_enabled(feat_state need, uint64_t xcr0)
{
    switch (need) {
    case NEEDS_AVX:
        return (xcr0 & (XCR0_SSE | XCR0_AVX)) == (XCR0_SSE | XCR0_AVX);
    case NEEDS_AVX512:
        return (xcr0 & (XCR0_SSE | XCR0_AVX | XCR0_AVX512)) == (XCR0_SSE | XCR0_AVX | XCR0_AVX512);
    default:
        return true;
    }
}

static void probe_cpu_features(char *buf, size_t len)
{
    cpuid_regs l1 = cpuid(1, 0);
    bool osxsave = (l1.c >> 27) & 1u;
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    for (size_t i = 0; i < sizeof features / sizeof features[0]; i++) {
        const cpu_feature *f = &features[i];
        cpuid_regs r = cpuid(f->leaf, f->sub);
        if (((reg_of(r, f->reg) >> f->bit) & 1u) && state_enabled(f->state, xcr0))
            append_word(buf, len, f->name);
    }
}

/* The brand string of leaves 0x80000002..4, with the padding spaces some vendors add trimmed. */
static void probe_cpu_name(char *buf, size_t len)
{
    char brand[49] = {0};
    if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) {
        for (unsigned i = 0; i < 3; i++) {
            cpuid_regs r = cpuid(0x80000002u + i, 0);
            memcpy(brand + 16 * i, &r, 16);
        }
    }
    const char *s = brand;
    while (*s == ' ')
        s++;
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == ' ')
        n--;
    if (n == 0)
        snprintf(buf, len, "unknown x86 CPU");
    else
        snprintf(buf, len, "%.*s", (int)n, s);
}

#else

static void probe_cpu_features(char *buf, size_t len)
{
    (void)buf;
    (void)len;
}

static void probe_cpu_name(char *buf, size_t len)
{
    snprintf(buf, len, "unknown CPU (feature probing is implemented for x86 only)");
}

#endif

/* Sums the sizes of the regular files under path (links are not followed). path is a buffer of
 * cap bytes that this extends and restores. Returns false if the tree could not be read. */
static bool tree_bytes(char *path, size_t cap, int depth, int64_t *total)
{
    if (depth > 32)
        return false;
    DIR *dir = opendir(path);
    if (!dir)
        return false;
    size_t base = strlen(path);
    bool ok = true;
    struct dirent *e;
    while (ok && (e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        int n = snprintf(path + base, cap - base, "/%s", e->d_name);
        if (n < 0 || (size_t)n >= cap - base) {
            ok = false;
            break;
        }
        struct stat st;
        if (lstat(path, &st) != 0)
            ok = errno == ENOENT; /* removed while we walked: another process pruning */
        else if (S_ISDIR(st.st_mode))
            ok = tree_bytes(path, cap, depth + 1, total);
        else if (S_ISREG(st.st_mode))
            *total += (int64_t)st.st_size;
        path[base] = '\0';
    }
    path[base] = '\0';
    closedir(dir);
    return ok;
}

static int64_t cache_size(const char *dir)
{
    char path[4096];
    struct stat st;
    if (strlen(dir) >= sizeof path || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return -1;
    snprintf(path, sizeof path, "%s", dir);
    int64_t total = 0;
    return tree_bytes(path, sizeof path, 0, &total) ? total : -1;
}

nx_status nx_system_info_get(nx_ctx *ctx, nx_system_info *out)
{
    if (!out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_system_info_get: out is NULL; expected a nx_system_info to fill");
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG,
                           "nx_system_info_get: ctx is NULL; expected a context from nx_ctx_new");
    memset(out, 0, sizeof *out);
    snprintf(out->version, sizeof out->version, "%s", nx_version());
    probe_cpu_name(out->cpu_name, sizeof out->cpu_name);
    probe_cpu_features(out->cpu_features, sizeof out->cpu_features);
    out->cpu_cores = nx_rt_cpu_count();
    snprintf(out->llvm_version, sizeof out->llvm_version, "%s", LLVM_VERSION_STRING);
    nx_rt_cuda_probe(ctx, out);
    snprintf(out->cache_dir, sizeof out->cache_dir, "%s", nx_ctx_cache_dir(ctx));
    out->cache_bytes = cache_size(out->cache_dir);
    return NX_OK;
}
