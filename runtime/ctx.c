/* The context: allocator hook, log sink, settings from the environment, and the per-context last
 * error. A context may be shared between threads; its error slot is guarded by a mutex and read
 * out through a thread-local copy. */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "internal.h"

#define NX_ERRMSG_LEN 512
#define NX_PATH_LEN 4096

/* Up to KEEP_SLOTS freed blocks of at least BIG_BLOCK bytes (keep_budget() in all) are kept per
 * context and handed to the next allocation of exactly their size, so a pipeline that calls the
 * same op over and over stops paying for fresh pages (16384 first-touch faults and the kernel's
 * zeroing per 64 MiB) after its first call: in alternating runs, the Gaussian FIR on 256^3 went
 * from 0.12-0.13 s to 0.083-0.088 s of CPU time and the 3^3 dilation from 0.034 s to 0.027 s.
 * Advising such blocks for transparent huge pages was tried and dropped: with THP's
 * defrag=madvise, first touch compacts memory synchronously and the same call took 84 s on a
 * loaded machine. nx_ctx_trim and nx_ctx_free release the kept blocks. A user allocator sees
 * every allocation: nothing is kept for it. */
#define BIG_BLOCK ((size_t)2 << 20)
#define KEEP_SLOTS 32
/* The budget is an eighth of physical memory, between 256 MiB and 2 GiB: the recursive Gaussian
 * at 256^3 keeps about 2 GiB of 80 MiB temporaries live, and with 512 MiB each of its calls
 * faulted 384 MiB of fresh pages in (2,755 faults a call; 0 with 2 GiB). */
#define KEEP_MIN ((size_t)256 << 20)
#define KEEP_MAX ((size_t)2 << 30)

typedef struct kept_block {
    void *p;
    size_t size;
} kept_block;

struct nx_ctx {
    nx_allocator alloc;
    nx_log_fn log;
    void *log_user;
    int log_min; /* lines below this nx_log_level are dropped (NITRIX_LOG, opts.log_level) */

    nx_backend backend;
    int num_threads;
    bool reproducible;
    bool strict_backend;
    bool silence_fallback;
    unsigned dump; /* NITRIX_DUMP: bit i set when DUMP_WHAT[i] was named */
    char cache_dir[NX_PATH_LEN];
    nx_cuda_codegen_opts cuda_codegen; /* NITRIX_PTX_* and nx_ctx_opts.cuda_codegen, checked */

    /* Freed large blocks of the default allocator kept for the next allocation of the same size
     * (see nx_rt_alloc_aligned). */
    bool keep;
    pthread_mutex_t keep_lock;
    kept_block kept[KEEP_SLOTS];
    size_t kept_bytes;
    size_t keep_budget;

    pthread_mutex_t slot_lock;
    void *slots[NX_SLOT_COUNT];
    nx_slot_destroy slot_destroy[NX_SLOT_COUNT];

    pthread_mutex_t err_lock;
    nx_status err_status;
    char err_msg[NX_ERRMSG_LEN];
};

static _Thread_local char tls_nullctx_msg[NX_ERRMSG_LEN];
static _Thread_local char tls_read_copy[NX_ERRMSG_LEN];

const char *nx_version(void)
{
    return "0.1.0";
}

const char *nx_status_str(nx_status status)
{
    static const char *const names[NX_STATUS_COUNT] = {
        [NX_OK] = "NX_OK",
        [NX_ERR_INVALID_ARG] = "NX_ERR_INVALID_ARG",
        [NX_ERR_NOMEM] = "NX_ERR_NOMEM",
        [NX_ERR_SHAPE] = "NX_ERR_SHAPE",
        [NX_ERR_DTYPE] = "NX_ERR_DTYPE",
        [NX_ERR_PARSE] = "NX_ERR_PARSE",
        [NX_ERR_IO] = "NX_ERR_IO",
        [NX_ERR_UNSUPPORTED] = "NX_ERR_UNSUPPORTED",
        [NX_ERR_BACKEND] = "NX_ERR_BACKEND",
        [NX_ERR_INTERNAL] = "NX_ERR_INTERNAL",
    };
    if ((unsigned)status >= NX_STATUS_COUNT)
        return "NX_ERR_UNKNOWN";
    return names[status];
}

const char *nx_backend_name(nx_backend backend)
{
    static const char *const names[NX_BACKEND_COUNT] = {"auto", "cpu", "cuda", "ref"};
    if ((unsigned)backend >= NX_BACKEND_COUNT)
        return NULL;
    return names[backend];
}

/* ---- allocation ------------------------------------------------------------------------------*/

static void *default_alloc(void *user, size_t size, size_t align)
{
    (void)user;
    if (align < sizeof(void *))
        align = sizeof(void *);
    void *p = NULL;
    if (posix_memalign(&p, align, size) != 0)
        return NULL;
    return p;
}

static size_t keep_budget(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return KEEP_MIN;
    size_t eighth = (size_t)pages / 8 * (size_t)page;
    return eighth < KEEP_MIN ? KEEP_MIN : eighth > KEEP_MAX ? KEEP_MAX : eighth;
}

/* A kept block of exactly size bytes, taken out of the context's list, or NULL. */
static void *take_kept(nx_ctx *ctx, size_t size)
{
    void *p = NULL;
    pthread_mutex_lock(&ctx->keep_lock);
    for (int i = 0; i < KEEP_SLOTS && !p; i++) {
        if (ctx->kept[i].p && ctx->kept[i].size == size) {
            p = ctx->kept[i].p;
            ctx->kept[i].p = NULL;
            ctx->kept_bytes -= size;
        }
    }
    pthread_mutex_unlock(&ctx->keep_lock);
    return p;
}

/* Keeps p for reuse when a slot and the byte budget allow; false when the caller must free it. */
static bool keep_block(nx_ctx *ctx, void *p, size_t size)
{
    bool kept = false;
    pthread_mutex_lock(&ctx->keep_lock);
    for (int i = 0; i < KEEP_SLOTS && !kept && ctx->kept_bytes + size <= ctx->keep_budget; i++) {
        if (!ctx->kept[i].p) {
            ctx->kept[i] = (kept_block){p, size};
            ctx->kept_bytes += size;
            kept = true;
        }
    }
    pthread_mutex_unlock(&ctx->keep_lock);
    return kept;
}

void nx_ctx_trim(nx_ctx *ctx)
{
    if (!ctx || !ctx->keep)
        return;
    pthread_mutex_lock(&ctx->keep_lock);
    for (int i = 0; i < KEEP_SLOTS; i++) {
        if (ctx->kept[i].p)
            ctx->alloc.free(ctx->alloc.user, ctx->kept[i].p, ctx->kept[i].size);
        ctx->kept[i] = (kept_block){NULL, 0};
    }
    ctx->kept_bytes = 0;
    pthread_mutex_unlock(&ctx->keep_lock);
}

static void default_free(void *user, void *ptr, size_t size)
{
    (void)user;
    (void)size;
    free(ptr);
}

void *nx_rt_alloc_aligned(nx_ctx *ctx, size_t size, size_t align)
{
    if (size == 0)
        size = 1;
    if (align == 0 || (align & (align - 1)) != 0 || align > 4096)
        return NULL;
    void *p = ctx->keep && size >= BIG_BLOCK ? take_kept(ctx, size) : NULL;
    return p ? p : ctx->alloc.alloc(ctx->alloc.user, size, align);
}

void *nx_rt_alloc(nx_ctx *ctx, size_t size)
{
    return nx_rt_alloc_aligned(ctx, size, 16);
}

void *nx_rt_calloc(nx_ctx *ctx, size_t n, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes))
        return NULL;
    void *p = nx_rt_alloc(ctx, bytes);
    if (p)
        memset(p, 0, bytes);
    return p;
}

void nx_rt_free(nx_ctx *ctx, void *p, size_t size)
{
    if (!p)
        return;
    if (size == 0)
        size = 1;
    if (ctx->keep && size >= BIG_BLOCK && keep_block(ctx, p, size))
        return;
    ctx->alloc.free(ctx->alloc.user, p, size);
}

bool nx_rt_grow(nx_ctx *ctx, void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            return false;
        ncap *= 2;
    }
    size_t bytes;
    if (__builtin_mul_overflow(ncap, elem, &bytes))
        return false;
    void *np = nx_rt_alloc(ctx, bytes);
    if (!np)
        return false;
    if (*p) {
        memcpy(np, *p, *cap * elem);
        nx_rt_free(ctx, *p, *cap * elem);
    }
    *p = np;
    *cap = ncap;
    return true;
}

char *nx_rt_strdup(nx_ctx *ctx, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = nx_rt_alloc(ctx, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

/* ---- errors ----------------------------------------------------------------------------------*/

nx_status nx_rt_verror(nx_ctx *ctx, nx_status status, const char *fmt, va_list ap)
{
    if (!ctx) {
        vsnprintf(tls_nullctx_msg, sizeof tls_nullctx_msg, fmt, ap);
        return status;
    }
    char buf[NX_ERRMSG_LEN];
    vsnprintf(buf, sizeof buf, fmt, ap);
    pthread_mutex_lock(&ctx->err_lock);
    ctx->err_status = status;
    memcpy(ctx->err_msg, buf, sizeof buf);
    pthread_mutex_unlock(&ctx->err_lock);
    return status;
}

nx_status nx_rt_error(nx_ctx *ctx, nx_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nx_rt_verror(ctx, status, fmt, ap);
    va_end(ap);
    return status;
}

nx_status nx_rt_nomem(nx_ctx *ctx, const char *what, size_t bytes)
{
    return nx_rt_error(ctx, NX_ERR_NOMEM, "%s: out of memory (allocating %zu bytes)", what,
                       bytes);
}

const char *nx_ctx_last_error(const nx_ctx *ctx)
{
    if (!ctx)
        return tls_nullctx_msg;
    nx_ctx *c = (nx_ctx *)ctx; /* the lock is not part of the logical state */
    pthread_mutex_lock(&c->err_lock);
    memcpy(tls_read_copy, c->err_msg, sizeof tls_read_copy);
    pthread_mutex_unlock(&c->err_lock);
    return tls_read_copy;
}

/* ---- logging ---------------------------------------------------------------------------------*/

static void default_log(void *user, nx_log_level level, const char *msg)
{
    (void)user;
    static const char *const names[] = {"debug", "info", "warning", "error"};
    const char *name = (unsigned)level <= NX_LOG_ERROR ? names[level] : "log";
    fprintf(stderr, "nitrix: %s: %s\n", name, msg);
}

void nx_ctx_log(nx_ctx *ctx, nx_log_level level, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (ctx && (int)level >= ctx->log_min)
        ctx->log(ctx->log_user, level, buf);
    else if (!ctx && level > NX_LOG_DEBUG)
        default_log(NULL, level, buf);
}

/* ---- settings --------------------------------------------------------------------------------*/

#define LOG_OFF (NX_LOG_ERROR + 1)

/* "debug", "info", "warning"/"warn", "error", "off" (any case) into a minimum level. */
static bool parse_log_level(const char *v, int *out)
{
    static const struct {
        const char *name;
        int level;
    } names[] = {{"debug", NX_LOG_DEBUG}, {"info", NX_LOG_INFO},   {"warning", NX_LOG_WARN},
                 {"warn", NX_LOG_WARN},   {"error", NX_LOG_ERROR}, {"off", LOG_OFF}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (strcasecmp(v, names[i].name) == 0) {
            *out = names[i].level;
            return true;
        }
    }
    return false;
}

static nx_status parse_log_env(int *out)
{
    const char *v = getenv("NITRIX_LOG");
    if (!v || !*v)
        return NX_OK;
    if (!parse_log_level(v, out))
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG,
                           "NITRIX_LOG='%.64s' is not a log level; expected debug, info, warning, "
                           "error or off",
                           v);
    return NX_OK;
}

static const char BOOL_VALUES[] = "0, 1, false, true, no, yes, off or on";

static nx_status parse_bool_env(const char *var, bool *out)
{
    const char *v = getenv(var);
    if (!v || !*v)
        return NX_OK;
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *out = true;
            return NX_OK;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *out = false;
            return NX_OK;
        }
    }
    return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "%s='%.64s' is not a boolean; expected %s", var,
                       v, BOOL_VALUES);
}

static const char *const DUMP_WHAT[] = {"graph", "fuse", "kernel", "llvm"};
#define DUMP_COUNT (sizeof DUMP_WHAT / sizeof DUMP_WHAT[0])

/* The bit of a NITRIX_DUMP word (len bytes at w), or 0 when it names nothing. */
static unsigned dump_bit(const char *w, size_t len)
{
    for (size_t i = 0; i < DUMP_COUNT; i++)
        if (strlen(DUMP_WHAT[i]) == len && strncmp(w, DUMP_WHAT[i], len) == 0)
            return 1u << i;
    return 0;
}

static nx_status parse_dump_env(unsigned *out)
{
    const char *v = getenv("NITRIX_DUMP");
    for (const char *w = v; w && *w;) {
        const char *end = strchr(w, ',');
        size_t len = end ? (size_t)(end - w) : strlen(w);
        unsigned bit = dump_bit(w, len);
        if (!bit && len)
            return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "NITRIX_DUMP='%.64s' names '%.*s'; "
                               "expected a comma-separated list of graph, fuse, kernel and llvm",
                               v, (int)(len > 32 ? 32 : len), w);
        *out |= bit;
        w = end ? end + 1 : NULL;
    }
    return NX_OK;
}

bool nx_rt_dump_requested(const nx_ctx *ctx, const char *what)
{
    return ctx && (ctx->dump & dump_bit(what, strlen(what))) != 0;
}

static nx_status parse_backend_env(nx_backend *out)
{
    const char *v = getenv("NITRIX_BACKEND");
    if (!v || !*v)
        return NX_OK;
    for (int b = 0; b < NX_BACKEND_COUNT; b++) {
        if (strcasecmp(v, nx_backend_name((nx_backend)b)) == 0) {
            *out = (nx_backend)b;
            return NX_OK;
        }
    }
    return nx_rt_error(NULL, NX_ERR_INVALID_ARG,
                       "NITRIX_BACKEND='%.64s' is not a backend; expected auto, cpu, cuda or ref",
                       v);
}

static nx_status parse_threads_env(int *out)
{
    const char *v = getenv("NITRIX_NUM_THREADS");
    if (!v || !*v)
        return NX_OK;
    char *end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < 0 || n > 1024)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG,
                           "NITRIX_NUM_THREADS='%.64s' is not valid; expected an integer from 1 "
                           "to 1024, or 0 for all cores",
                           v);
    *out = (int)n;
    return NX_OK;
}

static nx_status default_cache_dir(char *buf, size_t len)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/')
        n = snprintf(buf, len, "%s/nitrix", xdg);
    else if (home && *home)
        n = snprintf(buf, len, "%s/.cache/nitrix", home);
    else
        n = snprintf(buf, len, "/tmp/nitrix-cache");
    if (n < 0 || (size_t)n >= len)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG,
                           "the default cache directory (from XDG_CACHE_HOME or HOME) is longer "
                           "than %zu bytes; set NITRIX_CACHE_DIR",
                           len - 1);
    return NX_OK;
}

static nx_status parse_cache_env(char *buf, size_t len)
{
    const char *v = getenv("NITRIX_CACHE_DIR");
    if (!v)
        return default_cache_dir(buf, len);
    if (!*v)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG,
                           "NITRIX_CACHE_DIR is set but empty; expected a directory path");
    if (strlen(v) >= len)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG,
                           "NITRIX_CACHE_DIR is %zu bytes long; expected a path under %zu bytes",
                           strlen(v), len);
    memcpy(buf, v, strlen(v) + 1);
    return NX_OK;
}

/* ---- CUDA code generator options -------------------------------------------------------------*/

/* Each option with the variable that sets it: switches take the boolean spellings, integers one
 * of the values in [lo, hi] (pow2: powers of two only). */
typedef struct cuda_knob {
    const char *var, *field;
    size_t off;
    bool is_switch, pow2;
    int lo, hi;
} cuda_knob;

#define SWITCH(var, f) {var, #f, offsetof(nx_cuda_codegen_opts, f), true, false, 0, 0}
#define INT(var, f, lo, hi, p2) {var, #f, offsetof(nx_cuda_codegen_opts, f), false, p2, lo, hi}
static const cuda_knob CUDA_KNOBS[] = {
    SWITCH("NITRIX_PTX_SPLIT", split),
    SWITCH("NITRIX_PTX_NARROW", narrow),
    SWITCH("NITRIX_PTX_MINMAX", minmax),
    SWITCH("NITRIX_PTX_ROWS", rows),
    SWITCH("NITRIX_PTX_STENCIL", stencil),
    SWITCH("NITRIX_PTX_ILP", ilp),
    SWITCH("NITRIX_PTX_STENCIL_SHELL", stencil_shell),
    INT("NITRIX_PTX_STENCIL_TZ", stencil_tz, 1, 64, false),
    INT("NITRIX_PTX_STENCIL_DEPTH", stencil_depth, 1, 8, false),
    INT("NITRIX_PTX_STENCIL_RY", stencil_ry, 1, 4, false),
    INT("NITRIX_PTX_STENCIL_PB", stencil_pb, 1, 4, false),
    INT("NITRIX_PTX_PAIR_ROWS", pair_rows, 1, 16, true),
};
#undef SWITCH
#undef INT
#define CUDA_KNOB_COUNT (sizeof CUDA_KNOBS / sizeof CUDA_KNOBS[0])

static int *knob_field(nx_cuda_codegen_opts *o, const cuda_knob *kn)
{
    _Static_assert(sizeof(nx_cuda_switch) == sizeof(int), "switches are stored as ints");
    return (int *)((char *)o + kn->off);
}

/* The values kn accepts, for messages. */
static void knob_values(const cuda_knob *kn, char *buf, size_t len)
{
    if (kn->is_switch)
        snprintf(buf, len, "%s", BOOL_VALUES);
    else if (kn->pow2)
        snprintf(buf, len, "1, 2, 4, 8 or 16");
    else
        snprintf(buf, len, "an integer from %d to %d", kn->lo, kn->hi);
}

static bool knob_int_ok(const cuda_knob *kn, long v)
{
    return v >= kn->lo && v <= kn->hi && (!kn->pow2 || (v & (v - 1)) == 0);
}

static nx_status parse_cuda_knob_env(const cuda_knob *kn, nx_cuda_codegen_opts *o)
{
    const char *v = getenv(kn->var);
    if (!v || !*v)
        return NX_OK;
    if (kn->is_switch) {
        bool on = false;
        nx_status st = parse_bool_env(kn->var, &on);
        if (st == NX_OK)
            *knob_field(o, kn) = on ? NX_CUDA_ON : NX_CUDA_OFF;
        return st;
    }
    char *end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno == 0 && end != v && *end == '\0' && knob_int_ok(kn, n)) {
        *knob_field(o, kn) = (int)n;
        return NX_OK;
    }
    char values[64];
    knob_values(kn, values, sizeof values);
    return nx_rt_error(NULL, NX_ERR_INVALID_ARG,
                       "%s='%.64s' is not valid; expected %s (unset: the generator's choice)",
                       kn->var, v, values);
}

static nx_status parse_cuda_env(nx_cuda_codegen_opts *o)
{
    for (size_t i = 0; i < CUDA_KNOB_COUNT; i++) {
        nx_status st = parse_cuda_knob_env(&CUDA_KNOBS[i], o);
        if (st != NX_OK)
            return st;
    }
    return NX_OK;
}

/* The fields of an explicit set that are not 0 replace the environment's. */
static nx_status apply_cuda_opts(nx_cuda_codegen_opts *o, const nx_cuda_codegen_opts *in)
{
    nx_cuda_codegen_opts copy = *in;
    for (size_t i = 0; i < CUDA_KNOB_COUNT; i++) {
        const cuda_knob *kn = &CUDA_KNOBS[i];
        int v = *knob_field(&copy, kn);
        if (v == 0)
            continue;
        bool ok = kn->is_switch ? v == NX_CUDA_OFF || v == NX_CUDA_ON : knob_int_ok(kn, v);
        if (!ok) {
            char values[64];
            if (kn->is_switch)
                snprintf(values, sizeof values, "NX_CUDA_OFF or NX_CUDA_ON");
            else
                knob_values(kn, values, sizeof values);
            return nx_rt_error(NULL, NX_ERR_INVALID_ARG,
                               "nx_ctx_new: cuda_codegen.%s is %d; expected %s, or 0 for %s or "
                               "the generator's choice",
                               kn->field, v, values, kn->var);
        }
        *knob_field(o, kn) = v;
    }
    return NX_OK;
}

const nx_cuda_codegen_opts *nx_rt_cuda_codegen(const nx_ctx *ctx)
{
    static const nx_cuda_codegen_opts none = {0};
    return ctx ? &ctx->cuda_codegen : &none;
}

int nx_rt_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (int)(n > 1024 ? 1024 : n) : 1;
}

static nx_status read_env(nx_ctx *c)
{
    nx_status st;
    if ((st = parse_backend_env(&c->backend)) != NX_OK)
        return st;
    if ((st = parse_threads_env(&c->num_threads)) != NX_OK)
        return st;
    if ((st = parse_cache_env(c->cache_dir, sizeof c->cache_dir)) != NX_OK)
        return st;
    if ((st = parse_bool_env("NITRIX_REPRODUCIBLE", &c->reproducible)) != NX_OK)
        return st;
    if ((st = parse_bool_env("NITRIX_STRICT_BACKEND", &c->strict_backend)) != NX_OK)
        return st;
    if ((st = parse_dump_env(&c->dump)) != NX_OK)
        return st;
    if ((st = parse_cuda_env(&c->cuda_codegen)) != NX_OK)
        return st;
    if ((st = parse_log_env(&c->log_min)) != NX_OK)
        return st;
    return parse_bool_env("NITRIX_SILENCE_FALLBACK", &c->silence_fallback);
}

/* Explicit options win over the environment. */
static nx_status apply_opts(nx_ctx *c, const nx_ctx_opts *opts)
{
    if (opts->num_threads < 0 || opts->num_threads > 1024)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG,
                           "nx_ctx_new: num_threads is %d; expected 1 to 1024, or 0 for the "
                           "environment's choice",
                           opts->num_threads);
    if (opts->num_threads > 0)
        c->num_threads = opts->num_threads;
    if (opts->cache_dir) {
        size_t n = strlen(opts->cache_dir);
        if (n == 0 || n >= sizeof c->cache_dir)
            return nx_rt_error(NULL, NX_ERR_INVALID_ARG,
                               "nx_ctx_new: cache_dir is %zu bytes long; expected a non-empty path "
                               "under %zu bytes",
                               n, sizeof c->cache_dir);
        memcpy(c->cache_dir, opts->cache_dir, n + 1);
    }
    if (opts->log_level && !parse_log_level(opts->log_level, &c->log_min))
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG,
                           "nx_ctx_new: log_level '%.64s' is not a log level; expected debug, "
                           "info, warning, error or off",
                           opts->log_level);
    if (opts->cuda_codegen)
        return apply_cuda_opts(&c->cuda_codegen, opts->cuda_codegen);
    return NX_OK;
}

nx_status nx_ctx_new(const nx_ctx_opts *opts, nx_ctx **out)
{
    if (!out)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "nx_ctx_new: out is NULL");
    *out = NULL;
    nx_allocator alloc = {default_alloc, default_free, NULL};
    if (opts && opts->allocator) {
        if (!opts->allocator->alloc || !opts->allocator->free)
            return nx_rt_error(NULL, NX_ERR_INVALID_ARG,
                               "nx_ctx_new: allocator must set both alloc and free");
        alloc = *opts->allocator;
    }
    nx_ctx *c = alloc.alloc(alloc.user, sizeof *c, _Alignof(nx_ctx));
    if (!c)
        return nx_rt_nomem(NULL, "nx_ctx_new", sizeof *c);
    memset(c, 0, sizeof *c);
    c->alloc = alloc;
    c->log = opts && opts->log ? opts->log : default_log;
    c->log_user = opts && opts->log ? opts->log_user : NULL;
    c->backend = NX_BACKEND_AUTO;
    /* the default stderr sink hides debug lines; a caller's own sink gets every level */
    c->log_min = opts && opts->log ? NX_LOG_DEBUG : NX_LOG_INFO;

    nx_status st = NX_OK;
    if (opts && opts->ignore_env)
        st = default_cache_dir(c->cache_dir, sizeof c->cache_dir);
    else
        st = read_env(c);
    if (st == NX_OK && opts)
        st = apply_opts(c, opts);
    if (st == NX_OK && pthread_mutex_init(&c->err_lock, NULL) != 0)
        st = nx_rt_error(NULL, NX_ERR_INTERNAL, "nx_ctx_new: pthread_mutex_init failed");
    if (st == NX_OK && pthread_mutex_init(&c->slot_lock, NULL) != 0) {
        pthread_mutex_destroy(&c->err_lock);
        st = nx_rt_error(NULL, NX_ERR_INTERNAL, "nx_ctx_new: pthread_mutex_init failed");
    }
    if (st == NX_OK && pthread_mutex_init(&c->keep_lock, NULL) != 0) {
        pthread_mutex_destroy(&c->slot_lock);
        pthread_mutex_destroy(&c->err_lock);
        st = nx_rt_error(NULL, NX_ERR_INTERNAL, "nx_ctx_new: pthread_mutex_init failed");
    }
    c->keep = alloc.alloc == default_alloc;
    c->keep_budget = keep_budget();
    if (st != NX_OK) {
        alloc.free(alloc.user, c, sizeof *c);
        return st;
    }
    if (c->num_threads == 0)
        c->num_threads = nx_rt_cpu_count();
    *out = c;
    return NX_OK;
}

void nx_ctx_free(nx_ctx *ctx)
{
    if (!ctx)
        return;
    for (int i = NX_SLOT_COUNT - 1; i >= 0; i--) {
        if (ctx->slots[i] && ctx->slot_destroy[i])
            ctx->slot_destroy[i](ctx, ctx->slots[i]);
    }
    nx_ctx_trim(ctx);
    pthread_mutex_destroy(&ctx->keep_lock);
    pthread_mutex_destroy(&ctx->slot_lock);
    pthread_mutex_destroy(&ctx->err_lock);
    nx_allocator a = ctx->alloc;
    a.free(a.user, ctx, sizeof *ctx);
}

nx_backend nx_ctx_backend(const nx_ctx *ctx)
{
    return ctx->backend;
}
int nx_ctx_num_threads(const nx_ctx *ctx)
{
    return ctx->num_threads;
}
const char *nx_ctx_cache_dir(const nx_ctx *ctx)
{
    return ctx->cache_dir;
}
/* Reproducible scopes live on a thread-local stack (no allocation, no lock): a scope is a
 * per-thread override of one context's setting, so the innermost entry for ctx wins. */
typedef struct repro_scope {
    const nx_ctx *ctx;
    bool on;
} repro_scope;
static _Thread_local repro_scope tls_repro[NX_REPRODUCIBLE_MAX_DEPTH];
static _Thread_local int tls_repro_depth;

bool nx_ctx_reproducible(const nx_ctx *ctx)
{
    for (int i = tls_repro_depth - 1; i >= 0; i--) {
        if (tls_repro[i].ctx == ctx)
            return tls_repro[i].on;
    }
    return ctx->reproducible;
}

nx_status nx_ctx_reproducible_push(nx_ctx *ctx, bool on)
{
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "nx_ctx_reproducible_push: ctx is NULL");
    if (tls_repro_depth >= NX_REPRODUCIBLE_MAX_DEPTH)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_ctx_reproducible_push: %d scopes already open on this thread "
                           "(at most NX_REPRODUCIBLE_MAX_DEPTH = %d)",
                           tls_repro_depth, NX_REPRODUCIBLE_MAX_DEPTH);
    tls_repro[tls_repro_depth++] = (repro_scope){ctx, on};
    return NX_OK;
}

nx_status nx_ctx_reproducible_pop(nx_ctx *ctx)
{
    if (!ctx)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "nx_ctx_reproducible_pop: ctx is NULL");
    for (int i = tls_repro_depth - 1; i >= 0; i--) {
        if (tls_repro[i].ctx != ctx)
            continue;
        /* Scopes of other contexts opened later stay, in order. */
        memmove(&tls_repro[i], &tls_repro[i + 1],
                (size_t)(tls_repro_depth - i - 1) * sizeof tls_repro[0]);
        tls_repro_depth--;
        return NX_OK;
    }
    return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                       "nx_ctx_reproducible_pop: no scope of this context is open on this thread "
                       "(expected a matching nx_ctx_reproducible_push)");
}
bool nx_ctx_strict_backend(const nx_ctx *ctx)
{
    return ctx->strict_backend;
}
bool nx_ctx_silence_fallback(const nx_ctx *ctx)
{
    return ctx->silence_fallback;
}

void *nx_rt_ctx_get(nx_ctx *ctx, nx_ctx_slot slot)
{
    pthread_mutex_lock(&ctx->slot_lock);
    void *obj = ctx->slots[slot];
    pthread_mutex_unlock(&ctx->slot_lock);
    return obj;
}

void *nx_rt_ctx_install(nx_ctx *ctx, nx_ctx_slot slot, void *obj, nx_slot_destroy destroy)
{
    pthread_mutex_lock(&ctx->slot_lock);
    if (!ctx->slots[slot]) {
        ctx->slots[slot] = obj;
        ctx->slot_destroy[slot] = destroy;
    }
    void *now = ctx->slots[slot];
    pthread_mutex_unlock(&ctx->slot_lock);
    return now;
}

void nx_ctx_buffer_free(nx_ctx *ctx, void *buf, size_t len)
{
    if (ctx)
        nx_rt_free(ctx, buf, len);
}

/* ---- shapes ----------------------------------------------------------------------------------*/

bool nx_shape_numel(int ndim, const int64_t *shape, int64_t *numel)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || !nx_mul_i64(n, shape[i], &n))
            return false;
    }
    *numel = n;
    return true;
}

const char *nx_shape_str(char *buf, size_t len, int ndim, const int64_t *shape)
{
    size_t off = 0;
    int n = snprintf(buf, len, "[");
    off = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < ndim && off < len; i++) {
        n = snprintf(buf + off, len - off, i ? ",%lld" : "%lld", (long long)shape[i]);
        off += n > 0 ? (size_t)n : 0;
    }
    if (off < len)
        snprintf(buf + off, len - off, "]");
    return buf;
}

nx_status nx_rt_size_error(nx_ctx *ctx, const char *who, const char *option, const char *expected)
{
    return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                       "%s: %s is too large: a size computed from it overflows int64; expected %s",
                       who, option, expected);
}
