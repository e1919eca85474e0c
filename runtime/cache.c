/* The kernel cache (see cache.h for the contract and the file format). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"

#define PATH_CAP 4096
#define NAME_CAP 96 /* "tmp-<pid>-<seq>-<32 hex>" and "<32 hex>.nxk" fit with room to spare */
#define IO_CHUNK 4096
#define MAGIC "NXKCACHE"
#define SUM_OFFSET 48

/* ---- SipHash-2-4-128 -------------------------------------------------------------------------*/

static inline uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void sip_round(nx_rt_cache_hash_state *s)
{
    s->v0 += s->v1;
    s->v1 = rotl(s->v1, 13);
    s->v1 ^= s->v0;
    s->v0 = rotl(s->v0, 32);
    s->v2 += s->v3;
    s->v3 = rotl(s->v3, 16);
    s->v3 ^= s->v2;
    s->v0 += s->v3;
    s->v3 = rotl(s->v3, 21);
    s->v3 ^= s->v0;
    s->v2 += s->v1;
    s->v1 = rotl(s->v1, 17);
    s->v1 ^= s->v2;
    s->v2 = rotl(s->v2, 32);
}

static void sip_block(nx_rt_cache_hash_state *s, uint64_t m)
{
    s->v3 ^= m;
    sip_round(s);
    sip_round(s);
    s->v0 ^= m;
}

void nx_rt_cache_hash_init(nx_rt_cache_hash_state *s, const uint8_t key[16])
{
    uint64_t k0 = get_le64(key), k1 = get_le64(key + 8);
    s->v0 = k0 ^ UINT64_C(0x736f6d6570736575);
    s->v1 = k1 ^ UINT64_C(0x646f72616e646f6d) ^ 0xee; /* 0xee: the 128-bit output variant */
    s->v2 = k0 ^ UINT64_C(0x6c7967656e657261);
    s->v3 = k1 ^ UINT64_C(0x7465646279746573);
    s->tail = 0;
    s->total = 0;
}

void nx_rt_cache_hash_update(nx_rt_cache_hash_state *s, const void *data, size_t len)
{
    const uint8_t *p = data;
    unsigned fill = (unsigned)(s->total & 7);
    s->total += len;
    while (len > 0 && fill != 0) {
        s->tail |= (uint64_t)*p++ << (8 * fill);
        len--;
        if (++fill == 8) {
            sip_block(s, s->tail);
            s->tail = 0;
            fill = 0;
        }
    }
    for (; len >= 8; p += 8, len -= 8)
        sip_block(s, get_le64(p));
    for (unsigned i = 0; i < len; i++)
        s->tail |= (uint64_t)p[i] << (8 * i);
}

void nx_rt_cache_hash_final(nx_rt_cache_hash_state *s, uint8_t out[16])
{
    sip_block(s, s->tail | (s->total & 0xff) << 56);
    s->v2 ^= 0xee;
    for (int i = 0; i < 4; i++)
        sip_round(s);
    put_le64(out, s->v0 ^ s->v1 ^ s->v2 ^ s->v3);
    s->v1 ^= 0xdd;
    for (int i = 0; i < 4; i++)
        sip_round(s);
    put_le64(out + 8, s->v0 ^ s->v1 ^ s->v2 ^ s->v3);
}

void nx_rt_cache_siphash(const uint8_t key[16], const void *data, size_t len, uint8_t out[16])
{
    nx_rt_cache_hash_state s;
    nx_rt_cache_hash_init(&s, key);
    nx_rt_cache_hash_update(&s, data, len);
    nx_rt_cache_hash_final(&s, out);
}

void nx_rt_cache_hash(const void *data, size_t len, uint8_t out[16])
{
    nx_rt_cache_siphash((const uint8_t *)NX_CACHE_HASH_KEY, data, len, out);
}

void nx_rt_cache_key_init(nx_rt_cache_key *key, const void *blob, size_t blob_len)
{
    nx_rt_cache_hash(blob, blob_len, key->hash);
    key->blob = blob;
    key->blob_len = blob_len;
}

void nx_rt_cache_key_hex(const nx_rt_cache_key *key, char out[33])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = digits[key->hash[i] >> 4];
        out[2 * i + 1] = digits[key->hash[i] & 15];
    }
    out[32] = '\0';
}

/* ---- key blobs -------------------------------------------------------------------------------*/

static void blob_put(nx_rt_cache_blob *b, const void *p, size_t n)
{
    if (b->failed)
        return;
    size_t need;
    if (__builtin_add_overflow(b->len, n, &need) ||
        !nx_rt_grow(b->ctx, (void **)&b->data, &b->cap, need, 1)) {
        b->failed = true;
        return;
    }
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len = need;
}

void nx_rt_cache_blob_init(nx_rt_cache_blob *b, nx_ctx *ctx)
{
    memset(b, 0, sizeof *b);
    b->ctx = ctx;
    nx_rt_cache_blob_str(b, "nitrix", nx_version());
}

void nx_rt_cache_blob_bytes(nx_rt_cache_blob *b, const char *name, const void *value, size_t len)
{
    uint8_t n32[4], n64[8];
    size_t name_len = strlen(name);
    put_le32(n32, (uint32_t)name_len);
    put_le64(n64, (uint64_t)len);
    blob_put(b, n32, 4);
    blob_put(b, name, name_len);
    blob_put(b, n64, 8);
    blob_put(b, value, len);
}

void nx_rt_cache_blob_str(nx_rt_cache_blob *b, const char *name, const char *value)
{
    nx_rt_cache_blob_bytes(b, name, value, strlen(value));
}

void nx_rt_cache_blob_i64(nx_rt_cache_blob *b, const char *name, int64_t value)
{
    uint8_t le[8];
    put_le64(le, (uint64_t)value);
    nx_rt_cache_blob_bytes(b, name, le, 8);
}

nx_status nx_rt_cache_blob_key(nx_rt_cache_blob *b, nx_rt_cache_key *key)
{
    if (b->failed)
        return nx_rt_nomem(b->ctx, "kernel cache: building a key", b->cap * 2);
    nx_rt_cache_key_init(key, b->data, b->len);
    return NX_OK;
}

void nx_rt_cache_blob_free(nx_rt_cache_blob *b)
{
    nx_rt_free(b->ctx, b->data, b->cap);
    memset(b, 0, sizeof *b);
}

/* ---- the cache object ------------------------------------------------------------------------*/

typedef struct entry {
    uint8_t hash[16];
    void *obj; /* NULL: empty slot */
    nx_rt_cache_destroy_fn destroy;
    void *user;
} entry;

struct nx_rt_cache {
    nx_ctx *ctx;
    pthread_rwlock_t lock; /* guards table, cap, count */
    entry *table;          /* open addressing, linear probing, at most half full */
    size_t cap, count;
    char *dir; /* NULL: memory-only */
    size_t dir_len;
    _Atomic bool disk_off;
    _Atomic bool dir_ready;
    _Atomic bool damage_warned;
    _Atomic uint64_t seq;
    _Atomic int64_t finds, find_hits, inserts, insert_races;
    _Atomic int64_t loads, load_hits, damaged, untrusted, stores, store_failures;
};

#define INITIAL_CAP 64

static void bump(_Atomic int64_t *counter)
{
    atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

nx_status nx_rt_cache_open(nx_ctx *ctx, const char *dir, nx_rt_cache **out)
{
    *out = NULL;
    nx_rt_cache *c = nx_rt_calloc(ctx, 1, sizeof *c);
    if (!c)
        return nx_rt_nomem(ctx, "kernel cache", sizeof *c);
    c->ctx = ctx;
    c->cap = INITIAL_CAP;
    c->table = nx_rt_calloc(ctx, c->cap, sizeof *c->table);
    if (!c->table) {
        nx_rt_free(ctx, c, sizeof *c);
        return nx_rt_nomem(ctx, "kernel cache: table", INITIAL_CAP * sizeof(entry));
    }
    if (dir && *dir && strlen(dir) + 1 + NAME_CAP >= PATH_CAP) {
        nx_ctx_log(ctx, NX_LOG_WARN,
                   "kernel cache: directory path is %zu bytes long (the limit is %d); compiled "
                   "kernels are kept in memory only",
                   strlen(dir), PATH_CAP - 1 - NAME_CAP);
    } else if (dir && *dir) {
        c->dir = nx_rt_strdup(ctx, dir);
        if (!c->dir) {
            nx_rt_free(ctx, c->table, c->cap * sizeof *c->table);
            nx_rt_free(ctx, c, sizeof *c);
            return nx_rt_nomem(ctx, "kernel cache: directory name", strlen(dir) + 1);
        }
        c->dir_len = strlen(dir);
    }
    if (pthread_rwlock_init(&c->lock, NULL) != 0) {
        nx_rt_free(ctx, c->dir, c->dir_len + 1);
        nx_rt_free(ctx, c->table, c->cap * sizeof *c->table);
        nx_rt_free(ctx, c, sizeof *c);
        return nx_rt_error(ctx, NX_ERR_INTERNAL, "kernel cache: pthread_rwlock_init failed");
    }
    *out = c;
    return NX_OK;
}

void nx_rt_cache_close(nx_rt_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->cap; i++) {
        entry *e = &c->table[i];
        if (e->obj && e->destroy)
            e->destroy(e->user, e->obj);
    }
    pthread_rwlock_destroy(&c->lock);
    nx_ctx *ctx = c->ctx;
    if (c->dir)
        nx_rt_free(ctx, c->dir, c->dir_len + 1);
    nx_rt_free(ctx, c->table, c->cap * sizeof *c->table);
    nx_rt_free(ctx, c, sizeof *c);
}

static void close_slot(nx_ctx *ctx, void *obj)
{
    (void)ctx;
    nx_rt_cache_close(obj);
}

nx_status nx_rt_cache_of(nx_ctx *ctx, nx_rt_cache **out)
{
    nx_rt_cache *c = nx_rt_ctx_get(ctx, NX_SLOT_CACHE);
    if (c) {
        *out = c;
        return NX_OK;
    }
    nx_status st = nx_rt_cache_open(ctx, nx_ctx_cache_dir(ctx), &c);
    if (st != NX_OK) {
        *out = NULL;
        return st;
    }
    nx_rt_cache *now = nx_rt_ctx_install(ctx, NX_SLOT_CACHE, c, close_slot);
    if (now != c)
        nx_rt_cache_close(c);
    *out = now;
    return NX_OK;
}

const char *nx_rt_cache_dir(const nx_rt_cache *c)
{
    return c->dir;
}

bool nx_rt_cache_disk_writable(const nx_rt_cache *c)
{
    return c->dir && !atomic_load(&c->disk_off);
}

void nx_rt_cache_get_stats(nx_rt_cache *c, nx_rt_cache_stats *out)
{
    out->finds = atomic_load(&c->finds);
    out->find_hits = atomic_load(&c->find_hits);
    out->inserts = atomic_load(&c->inserts);
    out->insert_races = atomic_load(&c->insert_races);
    out->loads = atomic_load(&c->loads);
    out->load_hits = atomic_load(&c->load_hits);
    out->damaged = atomic_load(&c->damaged);
    out->untrusted = atomic_load(&c->untrusted);
    out->stores = atomic_load(&c->stores);
    out->store_failures = atomic_load(&c->store_failures);
}

/* ---- in memory -------------------------------------------------------------------------------*/

/* The slot holding hash, or the empty slot where it would go. */
static size_t probe(const entry *table, size_t cap, const uint8_t hash[16])
{
    size_t i = (size_t)get_le64(hash) & (cap - 1);
    while (table[i].obj && memcmp(table[i].hash, hash, 16) != 0)
        i = (i + 1) & (cap - 1);
    return i;
}

static bool grow(nx_rt_cache *c)
{
    size_t ncap = c->cap * 2;
    entry *nt = nx_rt_calloc(c->ctx, ncap, sizeof *nt);
    if (!nt)
        return false;
    for (size_t i = 0; i < c->cap; i++) {
        if (c->table[i].obj)
            nt[probe(nt, ncap, c->table[i].hash)] = c->table[i];
    }
    nx_rt_free(c->ctx, c->table, c->cap * sizeof *c->table);
    c->table = nt;
    c->cap = ncap;
    return true;
}

void *nx_rt_cache_find(nx_rt_cache *c, const nx_rt_cache_key *key)
{
    bump(&c->finds);
    pthread_rwlock_rdlock(&c->lock);
    void *obj = c->table[probe(c->table, c->cap, key->hash)].obj;
    pthread_rwlock_unlock(&c->lock);
    if (obj)
        bump(&c->find_hits);
    return obj;
}

nx_status nx_rt_cache_insert(nx_rt_cache *c, const nx_rt_cache_key *key, void *obj,
                             nx_rt_cache_destroy_fn destroy, void *user, void **winner)
{
    *winner = NULL;
    if (!obj)
        return nx_rt_error(c->ctx, NX_ERR_INVALID_ARG,
                           "kernel cache: insert of a NULL object; expected a compiled kernel");
    pthread_rwlock_wrlock(&c->lock);
    size_t i = probe(c->table, c->cap, key->hash);
    void *theirs = c->table[i].obj;
    if (!theirs && (c->count + 1) * 2 > c->cap) {
        if (!grow(c)) {
            size_t bytes = c->cap * 2 * sizeof(entry);
            pthread_rwlock_unlock(&c->lock);
            return nx_rt_nomem(c->ctx, "kernel cache: growing the table", bytes);
        }
        i = probe(c->table, c->cap, key->hash);
    }
    if (!theirs) {
        entry *e = &c->table[i];
        memcpy(e->hash, key->hash, 16);
        e->obj = obj;
        e->destroy = destroy;
        e->user = user;
        c->count++;
    }
    pthread_rwlock_unlock(&c->lock);
    bump(&c->inserts);
    if (theirs) {
        bump(&c->insert_races);
        if (destroy)
            destroy(user, obj);
        *winner = theirs;
    } else {
        *winner = obj;
    }
    return NX_OK;
}

/* ---- file helpers ----------------------------------------------------------------------------*/

/* Reads up to len bytes; returns the count read (short only at end of file) or -1. */
static ssize_t read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, (char *)buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static bool write_full(int fd, const void *buf, size_t len)
{
    size_t put = 0;
    while (put < len) {
        ssize_t w = write(fd, (const char *)buf + put, len - put);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        put += (size_t)w;
    }
    return true;
}

static void entry_name(const nx_rt_cache_key *key, char *buf)
{
    char hex[33];
    nx_rt_cache_key_hex(key, hex);
    snprintf(buf, NAME_CAP, "%s%s", hex, NX_CACHE_FILE_EXT);
}

static void entry_path(const nx_rt_cache *c, const nx_rt_cache_key *key, char *buf)
{
    char name[NAME_CAP];
    entry_name(key, name);
    snprintf(buf, PATH_CAP, "%s/%s", c->dir, name);
}

static bool is_hex32(const char *s)
{
    for (int i = 0; i < 32; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    }
    return true;
}

static bool is_entry_name(const char *name)
{
    return strlen(name) == 32 + strlen(NX_CACHE_FILE_EXT) && is_hex32(name) &&
           strcmp(name + 32, NX_CACHE_FILE_EXT) == 0;
}

/* tmp-<digits>-<digits>-<32 hex> */
static bool is_temp_name(const char *name)
{
    size_t len = strlen(name);
    if (len < 4 + 4 + 32 || strncmp(name, "tmp-", 4) != 0 || name[len - 33] != '-')
        return false;
    int dashes = 0;
    for (size_t i = 4; i < len - 33; i++) {
        if (name[i] == '-')
            dashes++;
        else if (name[i] < '0' || name[i] > '9')
            return false;
    }
    return dashes == 1 && is_hex32(name + len - 32);
}

/* ---- trust ---------------------------------------------------------------------------------*/

/* Owned by the effective user and writable by nobody else: then what the cache reads was written
 * by this user (or by root). The checksum cannot tell: its key is public. */
static bool is_private(const struct stat *st)
{
    return st->st_uid == geteuid() && (st->st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

static void not_private_why(const struct stat *st, char *buf, size_t len)
{
    if (st->st_uid != geteuid()) {
        snprintf(buf, len, "owned by uid %ld, not by this user (uid %ld)", (long)st->st_uid,
                 (long)geteuid());
        return;
    }
    bool grp = st->st_mode & S_IWGRP, oth = st->st_mode & S_IWOTH;
    snprintf(buf, len, "writable by %s (mode %04o)",
             grp && oth ? "its group and others"
             : grp      ? "its group"
                        : "others",
             (unsigned)(st->st_mode & 07777));
}

/* One warning per process for each (kind, directory): a fixed table of 64-bit identities, as
 * the placement policy keeps for fallbacks. When the table is full the warning is repeated. */
#define TRUST_SLOTS 256
static pthread_mutex_t trust_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t trust_seen[TRUST_SLOTS];

static uint64_t fnv_str(uint64_t h, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s;; p++) {
        h = (h ^ *p) * 0x100000001b3ull;
        if (!*p)
            return h;
    }
}

static bool first_trust_warning(const char *kind, const char *dir)
{
    uint64_t id = fnv_str(fnv_str(0xcbf29ce484222325ull, kind), dir) | 1; /* 0: empty slot */
    bool first = true;
    pthread_mutex_lock(&trust_lock);
    for (size_t i = 0; i < TRUST_SLOTS; i++) {
        uint64_t *s = &trust_seen[(id + i) % TRUST_SLOTS];
        if (*s == id) {
            first = false;
            break;
        }
        if (*s == 0) {
            *s = id;
            break;
        }
    }
    pthread_mutex_unlock(&trust_lock);
    return first;
}

/* The directory (entry NULL) or an entry in it is not private: ignored, with one warning per
 * process per directory and kind, and debug lines after. */
static void log_untrusted(nx_rt_cache *c, const char *entry, const struct stat *st)
{
    bump(&c->untrusted);
    char why[96];
    not_private_why(st, why, sizeof why);
    bool first = first_trust_warning(entry ? "entry" : "directory", c->dir);
    nx_ctx_log(c->ctx, first ? NX_LOG_WARN : NX_LOG_DEBUG,
               "kernel cache: %s %s is %s, so it is not used%s. A kernel cache must be private "
               "to its user (owned by you, not writable by group or others: chmod go-w); a "
               "shared machine needs a private directory per user (NITRIX_CACHE_DIR)",
               entry ? "the entry" : "the directory", entry ? entry : c->dir, why,
               entry ? " (it will be recompiled and replaced)"
                     : "; compiled kernels are kept in memory only");
}

typedef enum dir_state { D_OK, D_MISSING, D_UNTRUSTED, D_ERROR } dir_state;

/* Opens the cache directory and checks that it is private. On D_OK *fd is its descriptor:
 * entries are opened relative to it, so the directory checked is the one used. On D_ERROR and
 * D_MISSING *err is the errno value. */
static dir_state open_dir(nx_rt_cache *c, int *fd, int *err)
{
    *err = 0;
    *fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*fd < 0) {
        *err = errno;
        return errno == ENOENT ? D_MISSING : D_ERROR;
    }
    struct stat st;
    dir_state ds = D_OK;
    if (fstat(*fd, &st) != 0) {
        *err = errno;
        ds = D_ERROR;
    } else if (!is_private(&st)) {
        log_untrusted(c, NULL, &st);
        ds = D_UNTRUSTED;
    }
    if (ds != D_OK) {
        close(*fd);
        *fd = -1;
    }
    return ds;
}

/* ---- loading ---------------------------------------------------------------------------------*/

/* V_MISS: nothing there, or a file that could not be examined (logged at DEBUG when why is set);
 * V_VERSION: another format version (DEBUG); V_DAMAGED: WARN once per cache, then DEBUG;
 * V_UNTRUSTED: not private (log_untrusted). */
typedef enum verdict { V_HIT, V_MISS, V_DAMAGED, V_VERSION, V_UNTRUSTED, V_NOMEM } verdict;

typedef struct reader {
    nx_rt_cache *cache;
    const nx_rt_cache_key *key;
    int fd;
    struct stat st; /* the open file's */
    char why[160];
    void *payload;
    size_t len;
} reader;

static verdict damaged(reader *r, const char *fmt, ...) NX_PRINTF(2, 3);
static verdict damaged(reader *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
    return V_DAMAGED;
}

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISLNK(mode))
        return "a symbolic link";
    if (S_ISCHR(mode) || S_ISBLK(mode))
        return "a device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

static verdict check_header(reader *r, const uint8_t *h, int64_t file_size, uint64_t *pay_len)
{
    if (memcmp(h, MAGIC, 8) != 0)
        return damaged(r, "is not a nitrix cache entry (bad magic)");
    uint32_t version = get_le32(h + 8);
    if (version != NX_CACHE_FORMAT) {
        snprintf(r->why, sizeof r->why, "has format version %u, expected %d", (unsigned)version,
                 NX_CACHE_FORMAT);
        return V_VERSION;
    }
    if (get_le32(h + 12) != NX_CACHE_HEADER_SIZE)
        return damaged(r, "has header size %u, expected %d", (unsigned)get_le32(h + 12),
                       NX_CACHE_HEADER_SIZE);
    if (memcmp(h + 16, r->key->hash, 16) != 0)
        return damaged(r, "holds the entry of another key");
    uint64_t blob_len = get_le64(h + 32);
    if (blob_len != r->key->blob_len)
        return damaged(r, "holds another key (a %llu-byte key blob, expected %zu)",
                       (unsigned long long)blob_len, r->key->blob_len);
    *pay_len = get_le64(h + 40);
    uint64_t want = NX_CACHE_HEADER_SIZE + blob_len;
    if (*pay_len > (uint64_t)INT64_MAX - want || want + *pay_len != (uint64_t)file_size)
        return damaged(r, "is %lld bytes long, but its header describes %llu + %llu + %llu bytes",
                       (long long)file_size, (unsigned long long)NX_CACHE_HEADER_SIZE,
                       (unsigned long long)blob_len, (unsigned long long)*pay_len);
    if (*pay_len > SIZE_MAX)
        return damaged(r, "has a payload too large for this machine");
    return V_HIT;
}

/* Compares the file's blob with the key's, feeding it to the checksum. */
static verdict check_blob(reader *r, nx_rt_cache_hash_state *sum)
{
    uint8_t buf[IO_CHUNK];
    const uint8_t *want = r->key->blob;
    for (size_t off = 0; off < r->key->blob_len;) {
        size_t n = r->key->blob_len - off < IO_CHUNK ? r->key->blob_len - off : IO_CHUNK;
        if (read_full(r->fd, buf, n) != (ssize_t)n)
            return damaged(r, "could not be read to the end of its key blob");
        if (memcmp(buf, want + off, n) != 0)
            return damaged(r, "holds another key (the key blob differs)");
        nx_rt_cache_hash_update(sum, buf, n);
        off += n;
    }
    return V_HIT;
}

/* Opens the entry name in the directory dfd without following a symbolic link and without
 * blocking (a FIFO in place of an entry would otherwise block the open until a writer came),
 * and accepts it only as a private regular file: nothing is read from anything else. */
static verdict open_entry(reader *r, int dfd, const char *name)
{
    r->fd = -1;
    struct stat pre;
    if (fstatat(dfd, name, &pre, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT)
            snprintf(r->why, sizeof r->why, "cannot be examined (%s)", strerror(errno));
        return V_MISS;
    }
    if (!S_ISREG(pre.st_mode))
        return damaged(r, "is %s, not a regular file", file_kind(pre.st_mode));
    r->fd = openat(dfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (r->fd < 0) {
        int err = errno;
        if (err == ENOENT)
            return V_MISS;
        if (err == ELOOP)
            return damaged(r, "is a symbolic link, not a regular file");
        if (err == ENXIO)
            return damaged(r, "is not a regular file");
        snprintf(r->why, sizeof r->why, "cannot be opened (%s)", strerror(err));
        return V_MISS;
    }
    /* the file opened is checked again: it may have been replaced since fstatat */
    if (fstat(r->fd, &r->st) != 0)
        return damaged(r, "cannot be examined (%s)", strerror(errno));
    if (!S_ISREG(r->st.st_mode))
        return damaged(r, "is %s, not a regular file", file_kind(r->st.st_mode));
    if (!is_private(&r->st))
        return V_UNTRUSTED;
    int flags = fcntl(r->fd, F_GETFL);
    if (flags >= 0)
        fcntl(r->fd, F_SETFL, flags & ~O_NONBLOCK);
    return V_HIT;
}

static verdict read_entry(reader *r)
{
    uint8_t h[NX_CACHE_HEADER_SIZE];
    ssize_t got = read_full(r->fd, h, sizeof h);
    if (got != (ssize_t)sizeof h)
        return damaged(r, "is truncated (%lld bytes, shorter than the %d-byte header)",
                       (long long)r->st.st_size, NX_CACHE_HEADER_SIZE);
    uint64_t pay_len = 0;
    verdict v = check_header(r, h, (int64_t)r->st.st_size, &pay_len);
    if (v != V_HIT)
        return v;
    nx_rt_cache_hash_state sum;
    nx_rt_cache_hash_init(&sum, (const uint8_t *)NX_CACHE_SUM_KEY);
    nx_rt_cache_hash_update(&sum, h, SUM_OFFSET);
    if ((v = check_blob(r, &sum)) != V_HIT)
        return v;
    size_t len = (size_t)pay_len;
    void *buf = nx_rt_alloc(r->cache->ctx, len);
    if (!buf) {
        nx_rt_nomem(r->cache->ctx, "kernel cache: loading an entry", len);
        return V_NOMEM;
    }
    if (read_full(r->fd, buf, len) != (ssize_t)len) {
        nx_rt_free(r->cache->ctx, buf, len);
        return damaged(r, "could not be read to the end of its payload");
    }
    nx_rt_cache_hash_update(&sum, buf, len);
    uint8_t digest[16];
    nx_rt_cache_hash_final(&sum, digest);
    if (memcmp(digest, h + SUM_OFFSET, 16) != 0) {
        nx_rt_free(r->cache->ctx, buf, len);
        return damaged(r, "fails its checksum");
    }
    r->payload = buf;
    r->len = len;
    return V_HIT;
}

static void log_miss(nx_rt_cache *c, verdict v, const char *path, const char *why)
{
    nx_log_level level = NX_LOG_DEBUG;
    if (v == V_DAMAGED) {
        bump(&c->damaged);
        if (!atomic_exchange(&c->damage_warned, true))
            level = NX_LOG_WARN;
    }
    nx_ctx_log(c->ctx, level, "kernel cache: %s %s; not used, it will be recompiled and replaced",
               path, why);
}

nx_status nx_rt_cache_load(nx_rt_cache *c, const nx_rt_cache_key *key, void **payload, size_t *len,
                           bool *found)
{
    *payload = NULL;
    *len = 0;
    *found = false;
    bump(&c->loads);
    if (!c->dir)
        return NX_OK;
    int dfd = -1, err = 0;
    dir_state ds = open_dir(c, &dfd, &err);
    if (ds != D_OK) {
        if (ds == D_ERROR)
            nx_ctx_log(c->ctx, NX_LOG_DEBUG, "kernel cache: cannot open the directory %s (%s)",
                       c->dir, strerror(err));
        return NX_OK; /* missing: nothing stored yet; untrusted: logged by open_dir */
    }
    char name[NAME_CAP], path[PATH_CAP];
    entry_name(key, name);
    entry_path(c, key, path);
    reader r = {.cache = c, .key = key, .fd = -1};
    verdict v = open_entry(&r, dfd, name);
    close(dfd);
    if (v == V_HIT)
        v = read_entry(&r);
    if (r.fd >= 0)
        close(r.fd);
    if (v == V_NOMEM)
        return NX_ERR_NOMEM;
    if (v == V_UNTRUSTED) {
        log_untrusted(c, path, &r.st);
        return NX_OK;
    }
    if (v != V_HIT) {
        if (r.why[0])
            log_miss(c, v, path, r.why);
        return NX_OK;
    }
    bump(&c->load_hits);
    *payload = r.payload;
    *len = r.len;
    *found = true;
    return NX_OK;
}

/* ---- storing ---------------------------------------------------------------------------------*/

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* mkdir -p with mode 0700 for the directories it creates; 0 or an errno value. */
static int make_dirs(char *path)
{
    if (mkdir(path, 0700) == 0 || errno == EEXIST)
        return is_dir(path) ? 0 : ENOTDIR;
    if (errno != ENOENT)
        return errno;
    char *slash = strrchr(path, '/');
    while (slash && slash > path && slash[1] == '\0') { /* skip trailing slashes */
        *slash = '\0';
        slash = strrchr(path, '/');
    }
    if (!slash || slash == path)
        return ENOENT;
    *slash = '\0';
    int err = make_dirs(path);
    *slash = '/';
    if (err != 0)
        return err;
    if (mkdir(path, 0700) == 0 || errno == EEXIST)
        return is_dir(path) ? 0 : ENOTDIR;
    return errno;
}

static void disable_disk(nx_rt_cache *c, const char *what, int err)
{
    bump(&c->store_failures);
    if (!atomic_exchange(&c->disk_off, true))
        nx_ctx_log(c->ctx, NX_LOG_WARN,
                   "kernel cache: cannot write to %s (%s: %s); compiled kernels are kept in "
                   "memory only",
                   c->dir, what, strerror(err));
}

static void make_header(const nx_rt_cache_key *key, const void *payload, size_t len, uint8_t *h)
{
    memset(h, 0, NX_CACHE_HEADER_SIZE);
    memcpy(h, MAGIC, 8);
    put_le32(h + 8, NX_CACHE_FORMAT);
    put_le32(h + 12, NX_CACHE_HEADER_SIZE);
    memcpy(h + 16, key->hash, 16);
    put_le64(h + 32, key->blob_len);
    put_le64(h + 40, len);
    nx_rt_cache_hash_state sum;
    nx_rt_cache_hash_init(&sum, (const uint8_t *)NX_CACHE_SUM_KEY);
    nx_rt_cache_hash_update(&sum, h, SUM_OFFSET);
    nx_rt_cache_hash_update(&sum, key->blob, key->blob_len);
    nx_rt_cache_hash_update(&sum, payload, len);
    nx_rt_cache_hash_final(&sum, h + SUM_OFFSET);
}

static bool ensure_dir(nx_rt_cache *c)
{
    if (atomic_load(&c->dir_ready))
        return true;
    char path[PATH_CAP];
    memcpy(path, c->dir, c->dir_len + 1);
    int err = make_dirs(path);
    if (err != 0) {
        disable_disk(c, "creating the directory", err);
        return false;
    }
    atomic_store(&c->dir_ready, true);
    return true;
}

/* Opens the directory (creating it first if needed) and creates the temporary file tmp in it.
 * If the directory went away since it was made (someone removed the cache by hand), makes it
 * again once. Returns the file's descriptor and sets *dfd, or returns -1 (-2: nothing to report,
 * the directory is not private and has been reported, or ensure_dir reported). */
static int open_temp(nx_rt_cache *c, const char *tmp, int *dfd)
{
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!ensure_dir(c))
            return -2;
        int err = 0;
        dir_state ds = open_dir(c, dfd, &err);
        if (ds == D_UNTRUSTED)
            return -2;
        if (ds == D_OK) {
            int fd = openat(*dfd, tmp, flags, 0600);
            if (fd >= 0)
                return fd;
            err = errno;
            close(*dfd);
            *dfd = -1;
            ds = err == ENOENT ? D_MISSING : D_ERROR; /* removed after it was opened */
        }
        if (ds == D_ERROR) {
            errno = err;
            return -1;
        }
        atomic_store(&c->dir_ready, false);
    }
    errno = ENOENT;
    return -1;
}

void nx_rt_cache_store(nx_rt_cache *c, const nx_rt_cache_key *key, const void *payload, size_t len)
{
    bump(&c->stores);
    if (!c->dir || atomic_load(&c->disk_off))
        return;
    uint8_t h[NX_CACHE_HEADER_SIZE];
    make_header(key, payload, len, h);
    char hex[33], tmp[NAME_CAP], name[NAME_CAP];
    nx_rt_cache_key_hex(key, hex);
    unsigned long long seq = atomic_fetch_add(&c->seq, 1);
    snprintf(tmp, sizeof tmp, "tmp-%ld-%llu-%s", (long)getpid(), seq, hex);
    entry_name(key, name);
    int dfd = -1;
    int fd = open_temp(c, tmp, &dfd);
    if (fd < 0) {
        if (fd == -1)
            disable_disk(c, "creating a temporary file", errno);
        return;
    }
    bool ok = write_full(fd, h, sizeof h) && write_full(fd, key->blob, key->blob_len) &&
              write_full(fd, payload, len);
    int err = ok ? 0 : (errno ? errno : EIO);
    if (close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (ok && renameat(dfd, tmp, dfd, name) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        unlinkat(dfd, tmp, 0);
        disable_disk(c, "writing an entry", err);
    }
    close(dfd);
}

/* ---- the directory ---------------------------------------------------------------------------*/

static const char *dir_or_default(nx_ctx *ctx, const char *dir)
{
    return dir ? dir : nx_ctx_cache_dir(ctx);
}

nx_status nx_rt_cache_disk_usage(nx_ctx *ctx, const char *dir, int64_t *bytes, int64_t *entries)
{
    dir = dir_or_default(ctx, dir);
    *bytes = 0;
    *entries = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return NX_OK;
        return nx_rt_error(ctx, NX_ERR_IO, "kernel cache: cannot read the directory %s (%s)", dir,
                           strerror(errno));
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        bool entry = is_entry_name(de->d_name);
        struct stat st;
        if ((!entry && !is_temp_name(de->d_name)) ||
            fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        *bytes += (int64_t)st.st_size;
        *entries += entry;
    }
    closedir(d);
    return NX_OK;
}

nx_status nx_rt_cache_disk_clear(nx_ctx *ctx, const char *dir, int64_t *removed)
{
    dir = dir_or_default(ctx, dir);
    int64_t count = 0;
    if (removed)
        *removed = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return NX_OK;
        return nx_rt_error(ctx, NX_ERR_IO, "kernel cache: cannot read the directory %s (%s)", dir,
                           strerror(errno));
    }
    int err = 0;
    char failed[sizeof((struct dirent *)0)->d_name] = "";
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!is_entry_name(de->d_name) && !is_temp_name(de->d_name))
            continue;
        if (unlinkat(dirfd(d), de->d_name, 0) == 0)
            count++;
        else if (errno != ENOENT && err == 0) {
            err = errno;
            snprintf(failed, sizeof failed, "%s", de->d_name);
        }
    }
    closedir(d);
    if (removed)
        *removed = count;
    if (err != 0)
        return nx_rt_error(ctx, NX_ERR_IO, "kernel cache: cannot remove %s/%s (%s)", dir, failed,
                           strerror(err));
    return NX_OK;
}

void nx_rt_cache_blob_tensor(nx_rt_cache_blob *b, const char *name, const nx_tensor *t)
{
    int64_t sig[NX_MAX_DIMS + 2] = {-1};
    if (t) {
        sig[0] = nx_tensor_dtype(t);
        sig[1] = nx_tensor_ndim(t);
        memcpy(sig + 2, nx_tensor_shape(t), (size_t)sig[1] * sizeof(int64_t));
    }
    nx_rt_cache_blob_bytes(b, name, sig, sizeof sig);
}
