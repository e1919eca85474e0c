/* The kernel cache: hash known answers (from an independent Python implementation and the
 * published SipHash vectors), the in-memory map and its races, the on-disk format, round trips
 * between contexts and processes, damaged files, unwritable directories, allocation failure. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "cache.h"
#include "cache-vectors.h"

/* ---- helpers ---------------------------------------------------------------------------------*/

static char tmp_root[256];

static void hex_of(const uint8_t h[16], char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", h[i]);
}

static uint8_t *pattern(size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)((i * 31 + 7) & 0xff);
    return p;
}

/* A fresh, empty directory under the test's temporary root. */
static void fresh_dir(char *buf, size_t len, const char *name)
{
    static int serial;
    snprintf(buf, len, "%s/%s-%d", tmp_root, name, serial++);
}

typedef struct log_count {
    _Atomic int debug, warn, other;
    char last_warn[512];
} log_count;

static void count_log(void *user, nx_log_level level, const char *msg)
{
    log_count *lc = user;
    if (level == NX_LOG_DEBUG)
        lc->debug++;
    else if (level == NX_LOG_WARN) {
        lc->warn++;
        snprintf(lc->last_warn, sizeof lc->last_warn, "%s", msg);
    } else
        lc->other++;
}

/* A context logging into lc, with NITRIX_CACHE_DIR set to dir (NULL: left as the environment has
 * it). Main thread only. */
static nx_ctx *ctx_dir(const char *dir, log_count *lc)
{
    if (dir)
        setenv("NITRIX_CACHE_DIR", dir, 1);
    nx_ctx_opts opts = {.log = lc ? count_log : NULL, .log_user = lc};
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(&opts, &ctx) != NX_OK)
        fail_msg("nx_ctx_new: %s", nx_ctx_last_error(NULL));
    return ctx;
}

static size_t read_file(const char *path, uint8_t *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return (size_t)-1;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

static void write_file(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static int count_files(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

/* ---- hashing ---------------------------------------------------------------------------------*/

static void test_hash_published(void **state)
{
    (void)state;
    uint8_t key[16], msg[64], out[16];
    char hex[33];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    for (int n = 0; n < 64; n++) {
        nx_rt_cache_siphash(key, msg, (size_t)n, out);
        hex_of(out, hex);
        if (strcmp(hex, kat_published[n]) != 0)
            fail_msg("SipHash-2-4-128 of %d bytes: %s, published %s", n, hex, kat_published[n]);
    }
}

static void test_hash_vectors(void **state)
{
    (void)state;
    uint8_t out[16];
    char hex[33];
    for (size_t i = 0; i < sizeof kat_pattern / sizeof *kat_pattern; i++) {
        uint8_t *p = pattern(kat_pattern[i].len);
        nx_rt_cache_hash(p, kat_pattern[i].len, out);
        hex_of(out, hex);
        if (strcmp(hex, kat_pattern[i].hex) != 0)
            fail_msg("hash of pattern(%zu): %s, expected %s", kat_pattern[i].len, hex,
                     kat_pattern[i].hex);
        free(p);
    }
    for (size_t i = 0; i < sizeof kat_named / sizeof *kat_named; i++) {
        nx_rt_cache_key key;
        nx_rt_cache_key_init(&key, kat_named[i].msg, strlen(kat_named[i].msg));
        nx_rt_cache_key_hex(&key, hex);
        assert_string_equal(hex, kat_named[i].hex);
    }
    for (size_t i = 0; i < sizeof kat_sum / sizeof *kat_sum; i++) {
        uint8_t *p = pattern(kat_sum[i].len);
        nx_rt_cache_siphash((const uint8_t *)NX_CACHE_SUM_KEY, p, kat_sum[i].len, out);
        hex_of(out, hex);
        assert_string_equal(hex, kat_sum[i].hex);
        free(p);
    }
}

/* Splitting the input anywhere gives the same hash. */
static void test_hash_streaming(void **state)
{
    (void)state;
    uint8_t *p = pattern(200);
    for (size_t len = 0; len <= 130; len++) {
        uint8_t one[16], split[16], bytes[16];
        nx_rt_cache_hash(p, len, one);
        for (size_t cut = 0; cut <= len; cut++) {
            nx_rt_cache_hash_state s;
            nx_rt_cache_hash_init(&s, (const uint8_t *)NX_CACHE_HASH_KEY);
            nx_rt_cache_hash_update(&s, p, cut);
            nx_rt_cache_hash_update(&s, p + cut, len - cut);
            nx_rt_cache_hash_final(&s, split);
            assert_memory_equal(one, split, 16);
        }
        nx_rt_cache_hash_state s;
        nx_rt_cache_hash_init(&s, (const uint8_t *)NX_CACHE_HASH_KEY);
        for (size_t i = 0; i < len; i++)
            nx_rt_cache_hash_update(&s, p + i, 1);
        nx_rt_cache_hash_final(&s, bytes);
        assert_memory_equal(one, bytes, 16);
    }
    free(p);
}

static int popcount128(const uint8_t a[16], const uint8_t b[16])
{
    int n = 0;
    for (int i = 0; i < 16; i++)
        n += __builtin_popcount((unsigned)(a[i] ^ b[i]));
    return n;
}

static int cmp16(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

/* Avalanche (each input bit flips each output bit with probability 1/2), bucket uniformity and no
 * collisions over sequential keys. Bounds are many standard deviations wide. */
static void test_hash_distribution(void **state)
{
    (void)state;
    enum { MSGS = 100, BITS = 64 * 8 };
    static int64_t flips[128];
    int64_t total = 0, samples = 0;
    uint64_t x = 88172645463325252u;
    for (int m = 0; m < MSGS; m++) {
        uint8_t msg[64], h0[16], h1[16];
        for (int i = 0; i < 64; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            msg[i] = (uint8_t)x;
        }
        nx_rt_cache_hash(msg, 64, h0);
        for (int bit = 0; bit < BITS; bit++) {
            msg[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            nx_rt_cache_hash(msg, 64, h1);
            msg[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            total += popcount128(h0, h1);
            samples++;
            for (int o = 0; o < 128; o++)
                flips[o] += ((h0[o / 8] ^ h1[o / 8]) >> (o % 8)) & 1;
        }
    }
    double mean = (double)total / (double)samples; /* expect 64, sd of the mean ~0.018 */
    if (mean < 63.5 || mean > 64.5)
        fail_msg("avalanche: %.3f output bits flip per input bit, expected 64", mean);
    for (int o = 0; o < 128; o++) {
        double p = (double)flips[o] / (double)samples; /* sd ~0.0016 */
        if (p < 0.47 || p > 0.53)
            fail_msg("avalanche: output bit %d flips with probability %.4f", o, p);
    }

    enum { KEYS = 65536 };
    uint8_t(*hs)[16] = malloc(KEYS * 16);
    int buckets[256] = {0};
    for (uint64_t k = 0; k < KEYS; k++) {
        uint8_t le[8];
        for (int i = 0; i < 8; i++)
            le[i] = (uint8_t)(k >> (8 * i));
        nx_rt_cache_hash(le, 8, hs[k]);
        buckets[hs[k][0]]++;
    }
    double chi2 = 0;
    for (int b = 0; b < 256; b++)
        chi2 += (buckets[b] - 256.0) * (buckets[b] - 256.0) / 256.0;
    if (chi2 > 400) /* 255 degrees of freedom: mean 255, sd 22.6 */
        fail_msg("bucket chi-square %.1f over 256 buckets", chi2);
    qsort(hs, KEYS, 16, cmp16);
    for (int k = 1; k < KEYS; k++)
        assert_true(memcmp(hs[k - 1], hs[k], 16) != 0);
    free(hs);
}

/* ---- key blobs -------------------------------------------------------------------------------*/

static void build_kat_blob(nx_rt_cache_blob *b, nx_ctx *ctx)
{
    nx_rt_cache_blob_init(b, ctx);
    nx_rt_cache_blob_str(b, "ir", "kernel(v1){out[i]=max(a[i]+b[i],out[i])}");
    nx_rt_cache_blob_str(b, "dtype", "f32");
    nx_rt_cache_blob_i64(b, "rank", 2);
    uint8_t shape[16];
    const int64_t extents[2] = {64, -1};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 8; i++)
            shape[8 * d + i] = (uint8_t)((uint64_t)extents[d] >> (8 * i));
    nx_rt_cache_blob_bytes(b, "shape", shape, sizeof shape);
    nx_rt_cache_blob_bytes(b, "empty", NULL, 0);
    nx_rt_cache_blob_str(b, "backend", "cpu");
}

static void test_blob(void **state)
{
    (void)state;
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_rt_cache_blob b;
    build_kat_blob(&b, ctx);
    nx_rt_cache_key key;
    assert_int_equal(nx_rt_cache_blob_key(&b, &key), NX_OK);
    /* the leading field, written out by hand: 6, "nitrix", strlen(version), version */
    const char *v = nx_version();
    size_t vlen = strlen(v);
    uint8_t head[64] = {6, 0, 0, 0, 'n', 'i', 't', 'r', 'i', 'x', (uint8_t)vlen};
    memcpy(head + 18, v, vlen);
    assert_int_equal(key.blob_len, 18 + vlen + sizeof kat_blob_tail);
    assert_memory_equal(key.blob, head, 18 + vlen);
    assert_memory_equal((const uint8_t *)key.blob + 18 + vlen, kat_blob_tail, sizeof kat_blob_tail);
    char hex[33];
    nx_rt_cache_key_hex(&key, hex);
    if (strcmp(v, kat_blob_version) == 0)
        assert_string_equal(hex, kat_blob_hash);
    nx_rt_cache_blob_free(&b);

    /* moving a byte from one field to the next changes the key */
    nx_rt_cache_blob x, y;
    nx_rt_cache_blob_init(&x, ctx);
    nx_rt_cache_blob_str(&x, "a", "bc");
    nx_rt_cache_blob_str(&x, "d", "e");
    nx_rt_cache_blob_init(&y, ctx);
    nx_rt_cache_blob_str(&y, "a", "b");
    nx_rt_cache_blob_str(&y, "d", "ce");
    nx_rt_cache_key kx, ky;
    assert_int_equal(nx_rt_cache_blob_key(&x, &kx), NX_OK);
    assert_int_equal(nx_rt_cache_blob_key(&y, &ky), NX_OK);
    assert_true(memcmp(kx.hash, ky.hash, 16) != 0);
    nx_rt_cache_blob_free(&x);
    nx_rt_cache_blob_free(&y);
    nx_ctx_free(ctx);
    assert_true(ta.live == 0);
}

static nx_status sweep_blob(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_rt_cache_blob b;
    build_kat_blob(&b, ctx);
    char big[300];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    for (int i = 0; i < 8; i++) /* several doublings */
        nx_rt_cache_blob_str(&b, "filler", big);
    nx_rt_cache_key key;
    nx_status st = nx_rt_cache_blob_key(&b, &key);
    if (st == NX_OK && key.blob_len < 8 * 300)
        st = NX_ERR_INTERNAL;
    nx_rt_cache_blob_free(&b);
    return st;
}

/* ---- in memory -------------------------------------------------------------------------------*/

enum { NOBJ = 1000 };
static _Atomic int destroyed[8][NOBJ];
static int objs[8][NOBJ];

static void destroy_obj(void *user, void *obj)
{
    (void)user;
    int *o = obj;
    int t = (int)((o - &objs[0][0]) / NOBJ), k = (int)((o - &objs[0][0]) % NOBJ);
    destroyed[t][k]++;
}

static void key_for(nx_rt_cache_key *key, char *buf, size_t len, int k)
{
    snprintf(buf, len, "kernel-%d|f32|[%d,%d]", k, k % 7, k / 7);
    nx_rt_cache_key_init(key, buf, strlen(buf));
}

static void test_memory(void **state)
{
    (void)state;
    memset(destroyed, 0, sizeof destroyed);
    nx_test_alloc ta = {0};
    nx_ctx *ctx = nx_test_ctx(&ta);
    nx_rt_cache *c = NULL;
    assert_int_equal(nx_rt_cache_open(ctx, NULL, &c), NX_OK);
    assert_null(nx_rt_cache_dir(c));
    char buf[64];
    nx_rt_cache_key key;
    for (int k = 0; k < NOBJ; k++) {
        key_for(&key, buf, sizeof buf, k);
        assert_null(nx_rt_cache_find(c, &key));
        void *winner = NULL;
        assert_int_equal(nx_rt_cache_insert(c, &key, &objs[0][k], destroy_obj, NULL, &winner),
                         NX_OK);
        assert_ptr_equal(winner, &objs[0][k]);
    }
    for (int k = 0; k < NOBJ; k++) {
        key_for(&key, buf, sizeof buf, k);
        assert_ptr_equal(nx_rt_cache_find(c, &key), &objs[0][k]);
    }
    /* a second insert of a key loses: its object is destroyed, the first one stays */
    key_for(&key, buf, sizeof buf, 5);
    void *winner = NULL;
    assert_int_equal(nx_rt_cache_insert(c, &key, &objs[1][5], destroy_obj, NULL, &winner), NX_OK);
    assert_ptr_equal(winner, &objs[0][5]);
    assert_int_equal(destroyed[1][5], 1);
    assert_int_equal(destroyed[0][5], 0);
    key_for(&key, buf, sizeof buf, NOBJ + 1);
    assert_null(nx_rt_cache_find(c, &key));
    assert_int_equal(nx_rt_cache_insert(c, &key, NULL, destroy_obj, NULL, &winner),
                     NX_ERR_INVALID_ARG);
    nx_rt_cache_stats st;
    nx_rt_cache_get_stats(c, &st);
    assert_true(st.inserts == NOBJ + 1 && st.insert_races == 1 && st.find_hits == NOBJ);
    nx_rt_cache_close(c);
    for (int k = 0; k < NOBJ; k++)
        assert_int_equal(destroyed[0][k], 1);
    nx_ctx_free(ctx);
    assert_true(ta.live == 0 && ta.size_errors == 0);
}

typedef struct racer {
    nx_rt_cache *cache;
    int t;
    void *winners[NOBJ];
} racer;

static void *race_main(void *arg)
{
    racer *r = arg;
    char buf[64];
    nx_rt_cache_key key;
    for (int i = 0; i < NOBJ; i++) {
        int k = (i * 7 + r->t * 131) % NOBJ; /* a different order per thread */
        key_for(&key, buf, sizeof buf, k);
        void *seen = nx_rt_cache_find(r->cache, &key);
        void *w = NULL;
        if (nx_rt_cache_insert(r->cache, &key, &objs[r->t][k], destroy_obj, NULL, &w) != NX_OK)
            w = NULL;
        if (seen && seen != w)
            w = NULL; /* an object once found must stay */
        r->winners[k] = w;
    }
    return NULL;
}

static void test_memory_race(void **state)
{
    (void)state;
    memset(destroyed, 0, sizeof destroyed);
    nx_ctx *ctx = ctx_dir(NULL, NULL);
    nx_rt_cache *c = NULL;
    assert_int_equal(nx_rt_cache_of(ctx, &c), NX_OK);
    nx_rt_cache *again = NULL;
    assert_int_equal(nx_rt_cache_of(ctx, &again), NX_OK);
    assert_ptr_equal(c, again);
    static racer rs[8];
    pthread_t th[8];
    for (int t = 0; t < 8; t++) {
        rs[t] = (racer){.cache = c, .t = t};
        assert_int_equal(pthread_create(&th[t], NULL, race_main, &rs[t]), 0);
    }
    for (int t = 0; t < 8; t++)
        pthread_join(th[t], NULL);
    for (int k = 0; k < NOBJ; k++) {
        void *w = rs[0].winners[k];
        assert_non_null(w);
        int alive = 0;
        for (int t = 0; t < 8; t++) {
            assert_ptr_equal(rs[t].winners[k], w); /* everybody got the same object */
            if (&objs[t][k] == w)
                assert_int_equal(destroyed[t][k], 0);
            else
                assert_int_equal(destroyed[t][k], 1); /* each loser destroyed exactly once */
            alive += destroyed[t][k] == 0;
        }
        assert_int_equal(alive, 1);
    }
    nx_ctx_free(ctx); /* the context's cache destroys the winners */
    for (int t = 0; t < 8; t++)
        for (int k = 0; k < NOBJ; k++)
            assert_int_equal(destroyed[t][k], 1);
}

/* ---- on disk ---------------------------------------------------------------------------------*/

static const char *kat_blob(void)
{
    return kat_named[sizeof kat_named / sizeof *kat_named - 1].msg;
}

static void test_disk_format_and_round_trip(void **state)
{
    (void)state;
    char base[512], dir[600], path[900];
    fresh_dir(base, sizeof base, "roundtrip");
    snprintf(dir, sizeof dir, "%s/a/b/c", base);
    log_count lc = {0};
    nx_ctx *one = ctx_dir(dir, &lc);
    nx_rt_cache *c1 = NULL;
    assert_int_equal(nx_rt_cache_of(one, &c1), NX_OK);
    assert_string_equal(nx_rt_cache_dir(c1), dir);
    nx_rt_cache_key key;
    nx_rt_cache_key_init(&key, kat_blob(), strlen(kat_blob()));
    uint8_t *payload = pattern(300);
    void *got = NULL;
    size_t len = 0;
    bool found = true;
    assert_int_equal(nx_rt_cache_load(c1, &key, &got, &len, &found), NX_OK);
    assert_false(found);
    assert_int_equal(count_files(base, ""), -1); /* a load never creates the directory */
    nx_rt_cache_store(c1, &key, payload, 300);
    assert_true(nx_rt_cache_disk_writable(c1));

    /* the directories were created with mode 0700 and the file is byte for byte the layout the
     * Python generator wrote down */
    struct stat st;
    static const char *const parts[] = {"a", "a/b", "a/b/c"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", base, parts[i]);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0700);
    }
    snprintf(path, sizeof path, "%s/%s", dir, kat_entry_name);
    static uint8_t file[4096];
    assert_int_equal(read_file(path, file, sizeof file), sizeof kat_entry);
    assert_memory_equal(file, kat_entry, sizeof kat_entry);
    assert_int_equal(count_files(dir, "tmp-"), 0);

    /* a second context finds it */
    nx_ctx *two = ctx_dir(dir, &lc);
    nx_rt_cache *c2 = NULL;
    assert_int_equal(nx_rt_cache_of(two, &c2), NX_OK);
    assert_true(c1 != c2);
    assert_int_equal(nx_rt_cache_load(c2, &key, &got, &len, &found), NX_OK);
    assert_true(found);
    assert_int_equal(len, 300);
    assert_memory_equal(got, payload, 300);
    nx_rt_free(two, got, len);
    /* an empty payload round-trips too */
    nx_rt_cache_key empty;
    nx_rt_cache_key_init(&empty, "empty", 5);
    nx_rt_cache_store(c2, &empty, NULL, 0);
    assert_int_equal(nx_rt_cache_load(c1, &empty, &got, &len, &found), NX_OK);
    assert_true(found);
    assert_int_equal(len, 0);
    nx_rt_free(one, got, len);

    int64_t bytes = 0, entries = 0;
    assert_int_equal(nx_rt_cache_disk_usage(one, NULL, &bytes, &entries), NX_OK);
    assert_int_equal(entries, 2);
    assert_int_equal(bytes, (int64_t)sizeof kat_entry + 64 + 5);
    assert_int_equal(lc.warn, 0);
    nx_ctx_free(two);
    nx_ctx_free(one);
    free(payload);
}

/* One damage case: the entry file is replaced by `bytes`, the load misses, a store repairs it. */
static void expect_miss_then_repair(nx_rt_cache *c, nx_ctx *ctx, const nx_rt_cache_key *key,
                                    const char *path, const uint8_t *payload, size_t len,
                                    const char *what)
{
    void *got = NULL;
    size_t got_len = 0;
    bool found = true;
    assert_int_equal(nx_rt_cache_load(c, key, &got, &got_len, &found), NX_OK);
    if (found)
        fail_msg("damaged entry (%s) was trusted", what);
    assert_null(got);
    nx_rt_cache_store(c, key, payload, len);
    assert_int_equal(nx_rt_cache_load(c, key, &got, &got_len, &found), NX_OK);
    if (!found || got_len != len || memcmp(got, payload, len) != 0)
        fail_msg("entry not repaired after %s", what);
    nx_rt_free(ctx, got, got_len);
    static uint8_t file[4096];
    assert_int_equal(read_file(path, file, sizeof file), sizeof kat_entry);
    assert_memory_equal(file, kat_entry, sizeof kat_entry);
}

/* Truncation lengths: all through the header and the start of the blob, then every 13th byte,
 * then the last one. */
static size_t next_cut(size_t n, size_t size)
{
    if (n < 80)
        return n + 1;
    if (n + 13 < size - 1)
        return n + 13;
    return n < size - 1 ? size - 1 : size;
}

static void test_disk_damage(void **state)
{
    (void)state;
    char dir[512], path[900], other_path[900];
    fresh_dir(dir, sizeof dir, "damage");
    log_count lc = {0};
    nx_ctx *ctx = ctx_dir(dir, &lc);
    nx_rt_cache *c = NULL;
    assert_int_equal(nx_rt_cache_open(ctx, dir, &c), NX_OK);
    nx_rt_cache_key key;
    nx_rt_cache_key_init(&key, kat_blob(), strlen(kat_blob()));
    uint8_t *payload = pattern(300);
    snprintf(path, sizeof path, "%s/%s", dir, kat_entry_name);
    nx_rt_cache_store(c, &key, payload, 300);
    uint8_t bad[sizeof kat_entry + 1];
    int cases = 0;

    /* every single byte flipped */
    for (size_t i = 0; i < sizeof kat_entry; i++) {
        memcpy(bad, kat_entry, sizeof kat_entry);
        bad[i] ^= (uint8_t)(1u << (i % 8));
        write_file(path, bad, sizeof kat_entry);
        expect_miss_then_repair(c, ctx, &key, path, payload, 300, "a flipped byte");
        cases++;
    }
    /* truncated (zero length included); then one byte too many */
    for (size_t n = 0; n < sizeof kat_entry; n = next_cut(n, sizeof kat_entry)) {
        write_file(path, kat_entry, n);
        expect_miss_then_repair(c, ctx, &key, path, payload, 300, "truncation");
        cases++;
    }
    memcpy(bad, kat_entry, sizeof kat_entry);
    bad[sizeof kat_entry] = 0;
    write_file(path, bad, sizeof kat_entry + 1);
    expect_miss_then_repair(c, ctx, &key, path, payload, 300, "an extra byte");
    cases++;
    /* wrong magic */
    memcpy(bad, kat_entry, sizeof kat_entry);
    memcpy(bad, "ELF\x7f....", 8);
    write_file(path, bad, sizeof kat_entry);
    expect_miss_then_repair(c, ctx, &key, path, payload, 300, "wrong magic");
    cases++;

    /* a valid entry of another key under this key's name */
    nx_rt_cache_key other;
    char other_blob[sizeof kat_entry];
    memcpy(other_blob, kat_blob(), strlen(kat_blob()));
    other_blob[0] ^= 1; /* same length, different blob */
    nx_rt_cache_key_init(&other, other_blob, strlen(kat_blob()));
    nx_rt_cache_store(c, &other, payload, 300);
    char hex[33];
    nx_rt_cache_key_hex(&other, hex);
    snprintf(other_path, sizeof other_path, "%s/%s.nxk", dir, hex);
    assert_int_equal(rename(other_path, path), 0);
    expect_miss_then_repair(c, ctx, &key, path, payload, 300, "a foreign key");
    cases++;
    /* ... and one forged to carry this key's hash, with a correct checksum: only the blob differs
     */
    nx_rt_cache_store(c, &other, payload, 300);
    size_t n = read_file(other_path, bad, sizeof bad);
    memcpy(bad + 16, key.hash, 16);
    nx_rt_cache_hash_state s;
    nx_rt_cache_hash_init(&s, (const uint8_t *)NX_CACHE_SUM_KEY);
    nx_rt_cache_hash_update(&s, bad, 48);
    nx_rt_cache_hash_update(&s, bad + 64, n - 64);
    nx_rt_cache_hash_final(&s, bad + 48);
    write_file(path, bad, n);
    expect_miss_then_repair(c, ctx, &key, path, payload, 300, "a forged hash");
    cases++;
    /* a symbolic link to a good entry is not followed */
    assert_int_equal(unlink(path), 0);
    write_file(other_path, kat_entry, sizeof kat_entry);
    assert_int_equal(symlink(other_path, path), 0);
    expect_miss_then_repair(c, ctx, &key, path, payload, 300, "a symbolic link");
    cases++;

    nx_rt_cache_stats st;
    nx_rt_cache_get_stats(c, &st);
    /* flips in the four version bytes read as another format version: a miss, but not damage */
    assert_int_equal(st.damaged, cases - 4);
    /* damage is reported once at WARN, then at DEBUG */
    assert_int_equal(lc.warn, 1);
    assert_int_equal(lc.debug, cases - 1);

    /* another format version: a miss logged at DEBUG only (expected after an upgrade) */
    memcpy(bad, kat_entry, sizeof kat_entry);
    bad[8] = 2;
    nx_rt_cache_hash_init(&s, (const uint8_t *)NX_CACHE_SUM_KEY);
    nx_rt_cache_hash_update(&s, bad, 48);
    nx_rt_cache_hash_update(&s, bad + 64, sizeof kat_entry - 64);
    nx_rt_cache_hash_final(&s, bad + 48);
    write_file(path, bad, sizeof kat_entry);
    nx_rt_cache *fresh = NULL;
    log_count lc2 = {0};
    nx_ctx *ctx2 = ctx_dir(dir, &lc2);
    assert_int_equal(nx_rt_cache_open(ctx2, dir, &fresh), NX_OK);
    expect_miss_then_repair(fresh, ctx2, &key, path, payload, 300, "another version");
    assert_int_equal(lc2.warn, 0);
    assert_int_equal(lc2.debug, 1);
    nx_rt_cache_close(fresh);
    nx_ctx_free(ctx2);

    nx_rt_cache_close(c);
    nx_ctx_free(ctx);
    free(payload);
}

static void test_unwritable(void **state)
{
    (void)state;
    char file[512], dir[600];
    fresh_dir(file, sizeof file, "plainfile");
    write_file(file, "x", 1);
    snprintf(dir, sizeof dir, "%s/cache", file); /* a path through a regular file: never writable */
    log_count lc = {0};
    nx_ctx *ctx = ctx_dir(dir, &lc);
    nx_rt_cache *c = NULL;
    assert_int_equal(nx_rt_cache_of(ctx, &c), NX_OK);
    nx_rt_cache_key key;
    nx_rt_cache_key_init(&key, "k", 1);
    for (int i = 0; i < 5; i++)
        nx_rt_cache_store(c, &key, "payload", 7);
    assert_false(nx_rt_cache_disk_writable(c));
    assert_int_equal(lc.warn, 1);
    assert_non_null(strstr(lc.last_warn, "in memory only"));
    assert_non_null(strstr(lc.last_warn, dir));
    void *got = NULL;
    size_t len = 0;
    bool found = true;
    assert_int_equal(nx_rt_cache_load(c, &key, &got, &len, &found), NX_OK);
    assert_false(found);
    /* memory keeps working */
    static int obj;
    void *w = NULL;
    assert_int_equal(nx_rt_cache_insert(c, &key, &obj, NULL, NULL, &w), NX_OK);
    assert_ptr_equal(nx_rt_cache_find(c, &key), &obj);
    int64_t bytes, entries;
    assert_int_equal(nx_rt_cache_disk_usage(ctx, NULL, &bytes, &entries), NX_ERR_IO);
    nx_ctx_free(ctx);

    /* a read-only directory (permissions do not bind root, so only checked for others) */
    if (geteuid() != 0) {
        fresh_dir(dir, sizeof dir, "readonly");
        assert_int_equal(mkdir(dir, 0500), 0);
        log_count lc2 = {0};
        ctx = ctx_dir(dir, &lc2);
        assert_int_equal(nx_rt_cache_of(ctx, &c), NX_OK);
        nx_rt_cache_store(c, &key, "payload", 7);
        nx_rt_cache_store(c, &key, "payload", 7);
        assert_int_equal(lc2.warn, 1);
        nx_ctx_free(ctx);
        chmod(dir, 0700);
    }
}

static void test_usage_and_clear(void **state)
{
    (void)state;
    char dir[512], path[900];
    fresh_dir(dir, sizeof dir, "usage");
    log_count lc = {0};
    nx_ctx *ctx = ctx_dir(dir, &lc);
    int64_t bytes = -1, entries = -1, removed = -1;
    assert_int_equal(nx_rt_cache_disk_usage(ctx, NULL, &bytes, &entries), NX_OK);
    assert_true(bytes == 0 && entries == 0); /* missing directory */
    assert_int_equal(nx_rt_cache_disk_clear(ctx, NULL, &removed), NX_OK);
    assert_int_equal(removed, 0);
    nx_rt_cache *c = NULL;
    assert_int_equal(nx_rt_cache_of(ctx, &c), NX_OK);
    char blob[32];
    int64_t expect = 0;
    for (int k = 0; k < 3; k++) {
        nx_rt_cache_key key;
        snprintf(blob, sizeof blob, "blob-%d", k);
        nx_rt_cache_key_init(&key, blob, strlen(blob));
        uint8_t *p = pattern(100 * (size_t)k);
        nx_rt_cache_store(c, &key, p, 100 * (size_t)k);
        expect += 64 + (int64_t)strlen(blob) + 100 * k;
        free(p);
    }
    /* a leftover temporary counts in bytes, not entries; foreign files count for nothing */
    snprintf(path, sizeof path, "%s/tmp-123-4-0123456789abcdef0123456789abcdef", dir);
    write_file(path, "partial", 7);
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    write_file(path, "keep me", 7);
    snprintf(path, sizeof path, "%s/0123456789abcdef0123456789ABCDEF.nxk", dir);
    write_file(path, "upper-case hex: not ours", 24);
    assert_int_equal(nx_rt_cache_disk_usage(ctx, dir, &bytes, &entries), NX_OK);
    assert_int_equal(entries, 3);
    assert_int_equal(bytes, expect + 7);
    assert_int_equal(nx_rt_cache_disk_clear(ctx, NULL, &removed), NX_OK);
    assert_int_equal(removed, 4);
    assert_int_equal(nx_rt_cache_disk_usage(ctx, NULL, &bytes, &entries), NX_OK);
    assert_true(bytes == 0 && entries == 0);
    assert_int_equal(count_files(dir, "notes.txt"), 1);
    assert_int_equal(count_files(dir, "0123"), 1);

    /* the directory removed by hand while the cache is open: the next store makes it again */
    assert_int_equal(unlink(path), 0);
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
    nx_rt_cache_key key;
    nx_rt_cache_key_init(&key, "again", 5);
    nx_rt_cache_store(c, &key, "x", 1);
    assert_int_equal(nx_rt_cache_disk_usage(ctx, NULL, &bytes, &entries), NX_OK);
    assert_true(entries == 1 && bytes == 64 + 5 + 1);
    assert_true(nx_rt_cache_disk_writable(c));
    assert_int_equal(lc.warn, 0);
    nx_ctx_free(ctx);
}

/* Several processes storing and loading the same keys at once: a load is a miss or the exact
 * payload, never anything else. */
static int child_main(const char *dir, int id)
{
    nx_ctx *ctx = NULL;
    nx_ctx_opts opts = {.ignore_env = true};
    if (nx_ctx_new(&opts, &ctx) != NX_OK)
        return 2;
    nx_rt_cache *c = NULL;
    if (nx_rt_cache_open(ctx, dir, &c) != NX_OK)
        return 3;
    enum { KEYS = 6, SIZE = 50000 };
    uint8_t *payload = malloc(SIZE);
    int bad = 0;
    for (int rep = 0; rep < 60; rep++) {
        int k = (rep * 5 + id) % KEYS;
        char blob[32];
        snprintf(blob, sizeof blob, "process-race-%d", k);
        nx_rt_cache_key key;
        nx_rt_cache_key_init(&key, blob, strlen(blob));
        size_t size = SIZE - 1000 * (size_t)k;
        for (size_t i = 0; i < size; i++)
            payload[i] = (uint8_t)(i * 131 + (size_t)k);
        void *got = NULL;
        size_t len = 0;
        bool found = false;
        if (nx_rt_cache_load(c, &key, &got, &len, &found) != NX_OK)
            bad++;
        if (found && (len != size || memcmp(got, payload, size) != 0))
            bad++;
        if (found)
            nx_rt_free(ctx, got, len);
        if (rep % 2 == 0)
            nx_rt_cache_store(c, &key, payload, size);
    }
    nx_rt_cache_stats st;
    nx_rt_cache_get_stats(c, &st);
    bad += (int)st.damaged + (int)st.store_failures;
    nx_rt_cache_close(c);
    nx_ctx_free(ctx);
    free(payload);
    return bad ? 1 : 0;
}

static void test_processes(void **state)
{
    (void)state;
    char dir[512];
    fresh_dir(dir, sizeof dir, "processes");
    enum { PROCS = 4 };
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0)
            _exit(child_main(dir, i));
    }
    for (int i = 0; i < PROCS; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) != 0)
            fail_msg("process %d saw a damaged or wrong entry (exit %d)", i, WEXITSTATUS(status));
    }
    assert_int_equal(count_files(dir, "tmp-"), 0);
    nx_ctx *ctx = ctx_dir(dir, NULL);
    int64_t bytes, entries;
    assert_int_equal(nx_rt_cache_disk_usage(ctx, NULL, &bytes, &entries), NX_OK);
    assert_int_equal(entries, 6);
    nx_ctx_free(ctx);
}

/* ---- trust: private directories and entries, regular files only ----------------------------*/

/* Loads key from c and checks the outcome: a hit with exactly payload, or a miss. */
static void expect_load(nx_rt_cache *c, nx_ctx *ctx, const nx_rt_cache_key *key,
                        const uint8_t *payload, size_t len, bool hit, const char *what)
{
    void *got = NULL;
    size_t got_len = 0;
    bool found = !hit;
    assert_int_equal(nx_rt_cache_load(c, key, &got, &got_len, &found), NX_OK);
    if (found != hit)
        fail_msg("%s: expected a %s", what, hit ? "hit" : "miss");
    if (hit) {
        assert_int_equal(got_len, len);
        assert_memory_equal(got, payload, len);
        nx_rt_free(ctx, got, got_len);
    } else {
        assert_null(got);
    }
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_mode & 07777;
}

/* A directory of its own with one good entry of the KAT key; *c and *ctx log into lc. */
static void private_cache(const char *name, char *dir, size_t dir_len, char *path, size_t path_len,
                          log_count *lc, nx_ctx **ctx, nx_rt_cache **c, const uint8_t *payload)
{
    fresh_dir(dir, dir_len, name);
    snprintf(path, path_len, "%s/%s", dir, kat_entry_name);
    *ctx = ctx_dir(dir, lc);
    assert_int_equal(nx_rt_cache_open(*ctx, dir, c), NX_OK);
    nx_rt_cache_key key;
    nx_rt_cache_key_init(&key, kat_blob(), strlen(kat_blob()));
    nx_rt_cache_store(*c, &key, payload, 300);
}

/* The directory and each entry must be owned by this user and writable by nobody else; what is
 * not is ignored with one warning per process and directory, and a private cache still hits. */
static void test_not_private(void **state)
{
    (void)state;
    char dir[512], path[900];
    uint8_t *payload = pattern(300), *other = pattern(300);
    other[0] ^= 0xff;
    nx_rt_cache_key key;
    nx_rt_cache_key_init(&key, kat_blob(), strlen(kat_blob()));
    nx_ctx *ctx = NULL;
    nx_rt_cache *c = NULL;

    /* private: created 0700 / 0600, and hits */
    log_count lc = {0};
    private_cache("private", dir, sizeof dir, path, sizeof path, &lc, &ctx, &c, payload);
    assert_int_equal(mode_of(dir), 0700);
    assert_int_equal(mode_of(path), 0600);
    expect_load(c, ctx, &key, payload, 300, true, "a private cache");
    assert_int_equal(lc.warn, 0);
    nx_rt_cache_close(c);
    nx_ctx_free(ctx);

    /* a directory others can write: not read, not written, one warning per process */
    static const mode_t dir_modes[] = {0770, 0707, 0777, 0730};
    for (size_t i = 0; i < sizeof dir_modes / sizeof *dir_modes; i++) {
        log_count l0 = {0}, l1 = {0}, l2 = {0};
        private_cache("sharedir", dir, sizeof dir, path, sizeof path, &l0, &ctx, &c, payload);
        nx_rt_cache_close(c);
        nx_ctx_free(ctx);
        assert_int_equal(chmod(dir, dir_modes[i]), 0);
        ctx = ctx_dir(dir, &l1);
        assert_int_equal(nx_rt_cache_open(ctx, dir, &c), NX_OK);
        expect_load(c, ctx, &key, payload, 300, false, "a directory writable by others");
        assert_int_equal(l1.warn, 1);
        assert_non_null(strstr(l1.last_warn, dir));
        assert_non_null(strstr(l1.last_warn, "writable by"));
        assert_non_null(strstr(l1.last_warn, "NITRIX_CACHE_DIR"));
        nx_rt_cache_store(c, &key, other, 300); /* skipped */
        nx_rt_cache_stats st;
        nx_rt_cache_get_stats(c, &st);
        assert_true(st.untrusted >= 2);
        assert_int_equal(st.load_hits, 0);
        nx_rt_cache_close(c);
        nx_ctx_free(ctx);
        /* a second cache of this process over the same directory: no second warning */
        ctx = ctx_dir(dir, &l2);
        assert_int_equal(nx_rt_cache_open(ctx, dir, &c), NX_OK);
        expect_load(c, ctx, &key, payload, 300, false, "the same directory again");
        assert_int_equal(l2.warn, 0);
        assert_true(l2.debug >= 1);
        /* made private again, it is used, and it still holds the old entry: nothing was written
         * while it was not private */
        assert_int_equal(chmod(dir, 0700), 0);
        expect_load(c, ctx, &key, payload, 300, true, "the directory made private");
        assert_int_equal(l2.warn, 0);
        nx_rt_cache_close(c);
        nx_ctx_free(ctx);
    }

    /* an entry others can write, in a private directory: a miss; the next store replaces it */
    static const mode_t entry_modes[] = {0620, 0602, 0666, 0622};
    for (size_t i = 0; i < sizeof entry_modes / sizeof *entry_modes; i++) {
        log_count l = {0};
        private_cache("shareentry", dir, sizeof dir, path, sizeof path, &l, &ctx, &c, payload);
        assert_int_equal(chmod(path, entry_modes[i]), 0);
        expect_load(c, ctx, &key, payload, 300, false, "an entry writable by others");
        assert_int_equal(l.warn, 1);
        assert_non_null(strstr(l.last_warn, "the entry"));
        assert_non_null(strstr(l.last_warn, kat_entry_name));
        expect_load(c, ctx, &key, payload, 300, false, "the entry again");
        assert_int_equal(l.warn, 1); /* once per process */
        nx_rt_cache_store(c, &key, payload, 300);
        assert_int_equal(mode_of(path), 0600);
        expect_load(c, ctx, &key, payload, 300, true, "the replaced entry");
        nx_rt_cache_close(c);
        nx_ctx_free(ctx);
    }

    /* owned by another user (only root can give a file away) */
    if (geteuid() == 0) {
        const uid_t nobody = 65534;
        log_count l = {0};
        private_cache("foreignentry", dir, sizeof dir, path, sizeof path, &l, &ctx, &c, payload);
        assert_int_equal(chown(path, nobody, (gid_t)-1), 0);
        assert_int_equal(chmod(path, 0600), 0);
        expect_load(c, ctx, &key, payload, 300, false, "an entry of another user");
        assert_int_equal(l.warn, 1);
        assert_non_null(strstr(l.last_warn, "owned by uid 65534"));
        nx_rt_cache_close(c);
        nx_ctx_free(ctx);

        log_count l0 = {0}, l1 = {0};
        private_cache("foreigndir", dir, sizeof dir, path, sizeof path, &l0, &ctx, &c, payload);
        nx_rt_cache_close(c);
        nx_ctx_free(ctx);
        assert_int_equal(chown(dir, nobody, (gid_t)-1), 0);
        ctx = ctx_dir(dir, &l1);
        assert_int_equal(nx_rt_cache_open(ctx, dir, &c), NX_OK);
        expect_load(c, ctx, &key, payload, 300, false, "a directory of another user");
        assert_int_equal(l1.warn, 1);
        assert_non_null(strstr(l1.last_warn, "owned by uid 65534"));
        nx_rt_cache_close(c);
        nx_ctx_free(ctx);
        assert_int_equal(chown(dir, 0, (gid_t)-1), 0);
    } else {
        printf("# test_not_private: entries of another user skipped (chown needs root)\n");
    }
    free(payload);
    free(other);
}

/* Loads the KAT key in a child process, which must finish (a blocked open would never return):
 * the parent waits up to 60 s and then kills it. Returns the child's exit status: 0 a miss,
 * 1 a hit, 2 an error. */
static int load_in_child(const char *dir, const char *what)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        nx_ctx *ctx = NULL;
        log_count quiet = {0};
        nx_ctx_opts opts = {.ignore_env = true, .log = count_log, .log_user = &quiet};
        nx_rt_cache *c = NULL;
        if (nx_ctx_new(&opts, &ctx) != NX_OK || nx_rt_cache_open(ctx, dir, &c) != NX_OK)
            _exit(2);
        nx_rt_cache_key key;
        nx_rt_cache_key_init(&key, kat_blob(), strlen(kat_blob()));
        void *got = NULL;
        size_t len = 0;
        bool found = false;
        if (nx_rt_cache_load(c, &key, &got, &len, &found) != NX_OK)
            _exit(2);
        _exit(found ? 1 : 0);
    }
    int status = 0;
    for (int waited_ms = 0; waited_ms < 60000; waited_ms += 10) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        assert_true(r >= 0);
        if (r == pid) {
            assert_true(WIFEXITED(status));
            return WEXITSTATUS(status);
        }
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fail_msg("loading an entry that is %s did not return in 60 s", what);
    return -1;
}

/* Something other than a regular file in an entry's place is a miss: never opened for blocking,
 * never read; the next store replaces it where that is possible. */
static void test_not_regular(void **state)
{
    (void)state;
    char dir[512], path[900], elsewhere[900];
    uint8_t *payload = pattern(300);
    nx_rt_cache_key key;
    nx_rt_cache_key_init(&key, kat_blob(), strlen(kat_blob()));
    log_count lc = {0};
    nx_ctx *ctx = NULL;
    nx_rt_cache *c = NULL;
    private_cache("notregular", dir, sizeof dir, path, sizeof path, &lc, &ctx, &c, payload);
    snprintf(elsewhere, sizeof elsewhere, "%s-fifo", dir);
    assert_int_equal(mkfifo(elsewhere, 0600), 0);
    enum { FIFO, DIRECTORY, SOCKET, DEVICE, LINK_TO_FIFO, KINDS };
    static const char *const names[] = {"a FIFO", "a directory", "a socket", "a device",
                                        "a symbolic link to a FIFO"};
    int64_t damaged = 0;
    for (int kind = 0; kind < KINDS; kind++) {
        assert_int_equal(unlink(path), 0);
        int sock = -1;
        switch (kind) {
        case FIFO:
            assert_int_equal(mkfifo(path, 0600), 0);
            break;
        case DIRECTORY:
            assert_int_equal(mkdir(path, 0700), 0);
            break;
        case SOCKET: {
            struct sockaddr_un addr = {.sun_family = AF_UNIX};
            if (strlen(path) >= sizeof addr.sun_path) {
                printf("# test_not_regular: socket skipped (path too long for AF_UNIX)\n");
                nx_rt_cache_store(c, &key, payload, 300);
                continue;
            }
            memcpy(addr.sun_path, path, strlen(path) + 1);
            sock = socket(AF_UNIX, SOCK_STREAM, 0);
            assert_true(sock >= 0);
            assert_int_equal(bind(sock, (struct sockaddr *)&addr, sizeof addr), 0);
            assert_int_equal(listen(sock, 1), 0);
            break;
        }
        case DEVICE: /* /dev/null's numbers; making a device node needs root */
            if (mknod(path, S_IFCHR | 0600, makedev(1, 3)) != 0) {
                printf("# test_not_regular: device skipped (mknod: %s)\n", strerror(errno));
                nx_rt_cache_store(c, &key, payload, 300);
                continue;
            }
            break;
        case LINK_TO_FIFO:
            assert_int_equal(symlink(elsewhere, path), 0);
            break;
        }
        int got = load_in_child(dir, names[kind]);
        if (got != 0)
            fail_msg("an entry that is %s gave %s", names[kind], got == 1 ? "a hit" : "an error");
        expect_load(c, ctx, &key, payload, 300, false, names[kind]);
        damaged++;
        if (sock >= 0)
            close(sock);
        if (kind == DIRECTORY) {
            assert_int_equal(rmdir(path), 0);
        } else if (kind == SOCKET || kind == DEVICE) {
            assert_int_equal(unlink(path), 0);
        }
        /* a FIFO or a link is replaced by the next store; the others were removed above */
        nx_rt_cache_store(c, &key, payload, 300);
        assert_true(nx_rt_cache_disk_writable(c));
        expect_load(c, ctx, &key, payload, 300, true, "the entry stored again");
    }
    nx_rt_cache_stats st;
    nx_rt_cache_get_stats(c, &st);
    assert_int_equal(st.damaged, damaged);
    assert_int_equal(lc.warn, 1); /* damage: once per cache, then debug lines */
    assert_non_null(strstr(lc.last_warn, "not a regular file"));
    assert_int_equal(unlink(elsewhere), 0);
    nx_rt_cache_close(c);
    nx_ctx_free(ctx);
    free(payload);
}

/* ---- allocation failure ----------------------------------------------------------------------*/

static nx_status sweep_memory(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_rt_cache *c = NULL;
    nx_status st = nx_rt_cache_open(ctx, NULL, &c);
    if (st != NX_OK)
        return st;
    char buf[64];
    nx_rt_cache_key key;
    for (int k = 0; k < 200 && st == NX_OK; k++) { /* grows the table twice */
        key_for(&key, buf, sizeof buf, k);
        void *w = NULL;
        st = nx_rt_cache_insert(c, &key, &objs[0][k], NULL, NULL, &w);
        if (st == NX_OK && nx_rt_cache_find(c, &key) != &objs[0][k])
            st = NX_ERR_INTERNAL;
    }
    nx_rt_cache_close(c);
    return st;
}

static nx_status sweep_context(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_rt_cache *c = NULL;
    nx_status st = nx_rt_cache_of(ctx, &c);
    if (st != NX_OK)
        return st;
    char buf[64];
    nx_rt_cache_key key;
    for (int k = 0; k < 40 && st == NX_OK; k++) {
        key_for(&key, buf, sizeof buf, k);
        void *w = NULL;
        st = nx_rt_cache_insert(c, &key, &objs[1][k], destroy_obj, NULL, &w);
    }
    return st; /* nx_ctx_free closes it */
}

static const char *sweep_dir;

static nx_status sweep_disk(nx_ctx *ctx, void *user)
{
    (void)user;
    nx_rt_cache *c = NULL;
    nx_status st = nx_rt_cache_open(ctx, sweep_dir, &c);
    if (st != NX_OK)
        return st;
    nx_rt_cache_key key;
    nx_rt_cache_key_init(&key, kat_blob(), strlen(kat_blob()));
    uint8_t payload[300];
    for (int i = 0; i < 300; i++)
        payload[i] = (uint8_t)((i * 31 + 7) & 0xff);
    nx_rt_cache_store(c, &key, payload, sizeof payload);
    void *got = NULL;
    size_t len = 0;
    bool found = false;
    st = nx_rt_cache_load(c, &key, &got, &len, &found);
    if (st == NX_OK && (!found || len != 300 || memcmp(got, payload, 300) != 0))
        st = NX_ERR_INTERNAL;
    if (got)
        nx_rt_free(ctx, got, len);
    nx_rt_cache_close(c);
    return st;
}

static void test_alloc_sweeps(void **state)
{
    (void)state;
    assert_true(nx_test_alloc_sweep(sweep_memory, NULL, 100) >= 5);
    assert_true(nx_test_alloc_sweep(sweep_blob, NULL, 100) >= 4);
    memset(destroyed, 0, sizeof destroyed);
    assert_true(nx_test_alloc_sweep(sweep_context, NULL, 100) >= 2);
    char dir[512];
    fresh_dir(dir, sizeof dir, "sweep");
    sweep_dir = dir;
    assert_true(nx_test_alloc_sweep(sweep_disk, NULL, 100) >= 4);
}

static void rm_tree(const char *path)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", path);
}

int main(void)
{
    snprintf(tmp_root, sizeof tmp_root, "%s/nx-cache-test-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    /* files the tests write are private whatever the caller's umask (0002 would make them
     * group-writable, and such entries are ignored) */
    umask(022);
    /* contexts made with ignore_env still read XDG_CACHE_HOME: keep them out of the user's home */
    setenv("XDG_CACHE_HOME", tmp_root, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_published),
        cmocka_unit_test(test_hash_vectors),
        cmocka_unit_test(test_hash_streaming),
        cmocka_unit_test(test_hash_distribution),
        cmocka_unit_test(test_blob),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_memory_race),
        cmocka_unit_test(test_disk_format_and_round_trip),
        cmocka_unit_test(test_disk_damage),
        cmocka_unit_test(test_unwritable),
        cmocka_unit_test(test_not_private),
        cmocka_unit_test(test_not_regular),
        cmocka_unit_test(test_usage_and_clear),
        cmocka_unit_test(test_processes),
        cmocka_unit_test(test_alloc_sweeps),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (!failed)
        rm_tree(tmp_root);
    return failed;
}
