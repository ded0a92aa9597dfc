/* test_main.c - exercises every function of dffs.h, error paths included, on RAM flash devices
 * with a NOR-like and a NAND-like geometry (see ramflash.h), from C as firmware would.
 *
 * Owns the C-side test scenarios; it must never reach into the library other than through
 * dffs.h. Exits 0 when every check holds; prints the failing check and exits 1 otherwise.
 * Run by tests/c_api.rs (cargo test -p dffs-capi).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dffs.h"
#include "ramflash.h"

static const char *label = "";

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "[%s] %s:%d: check failed: %s\n", label, __FILE__, __LINE__, \
                    #cond);                                                               \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#define CHECK_EQ(expr, want)                                                                   \
    do {                                                                                       \
        long long got_ = (long long)(expr), want_ = (long long)(want);                         \
        if (got_ != want_) {                                                                   \
            fprintf(stderr, "[%s] %s:%d: %s = %lld (%s), expected %s = %lld (%s)\n", label,    \
                    __FILE__, __LINE__, #expr, got_,                                           \
                    got_ < 0 && got_ > -200 ? dffs_strerror((int)got_) : "-", #want, want_,    \
                    want_ < 0 && want_ > -200 ? dffs_strerror((int)want_) : "-");              \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#define DATA_LEN 20000

static unsigned char pattern[DATA_LEN];
static unsigned char chunk[4096];

static void make_pattern(void) {
    uint32_t x = 12345;
    for (int i = 0; i < DATA_LEN; i++) {
        x = x * 1103515245u + 12345u;
        pattern[i] = (unsigned char)(x >> 16);
    }
    memcpy(pattern + 100, "HELLO", 5);
}

/* Reads the whole file at `path` and compares it with `want`. */
static void check_content(dffs_t *fs, const char *path, const void *want, uint32_t len) {
    dffs_file_t f;
    CHECK_EQ(dffs_file_open(fs, &f, path, DFFS_O_RDONLY), 0);
    CHECK_EQ(dffs_file_size(fs, &f), len);
    unsigned char *got = malloc(len + 1);
    CHECK(got != NULL);
    uint32_t done = 0;
    while (done < len) {
        uint32_t n = len - done < 777 ? len - done : 777; /* odd chunks cross block edges */
        int32_t r = dffs_file_read(fs, &f, got + done, n);
        CHECK(r > 0);
        done += (uint32_t)r;
    }
    CHECK_EQ(dffs_file_read(fs, &f, got, 1), 0); /* end of file */
    CHECK(memcmp(got, want, len) == 0);
    free(got);
    CHECK_EQ(dffs_file_close(fs, &f), 0);
}

/* Whether directory `path` lists exactly the names in `want` (NULL-terminated), after "." and
 * "..", each once. */
static void check_listing(dffs_t *fs, const char *path, const char *const *want) {
    dffs_dir_t d;
    dffs_info info;
    int seen[16] = {0};
    int nwant = 0;
    while (want[nwant]) nwant++;
    CHECK(nwant <= 16);
    CHECK_EQ(dffs_dir_open(fs, &d, path), 0);
    CHECK_EQ(dffs_dir_read(fs, &d, &info), 1);
    CHECK(strcmp(info.name, ".") == 0 && info.type == DFFS_TYPE_DIR);
    CHECK_EQ(dffs_dir_read(fs, &d, &info), 1);
    CHECK(strcmp(info.name, "..") == 0 && info.type == DFFS_TYPE_DIR);
    int count = 0;
    int r;
    while ((r = dffs_dir_read(fs, &d, &info)) == 1) {
        int found = 0;
        for (int i = 0; i < nwant; i++) {
            if (strcmp(info.name, want[i]) == 0) {
                CHECK(!seen[i]);
                seen[i] = found = 1;
            }
        }
        if (!found) fprintf(stderr, "[%s] unexpected entry %s in %s\n", label, info.name, path);
        CHECK(found);
        count++;
    }
    CHECK_EQ(r, 0);
    CHECK_EQ(count, nwant);
    CHECK_EQ(dffs_dir_read(fs, &d, &info), 0); /* stays at the end */
    CHECK_EQ(dffs_dir_rewind(fs, &d), 0);
    CHECK_EQ(dffs_dir_read(fs, &d, &info), 1);
    CHECK(strcmp(info.name, ".") == 0);
    CHECK_EQ(dffs_dir_close(fs, &d), 0);
    CHECK_EQ(dffs_dir_close(fs, &d), DFFS_ERR_BADF);
    CHECK_EQ(dffs_dir_read(fs, &d, &info), DFFS_ERR_BADF);
}

/* Arguments the library must refuse without touching the device. */
static void test_bad_arguments(ramflash *rf) {
    dffs_config cfg = rf->cfg;
    dffs_t *fs = NULL;
    CHECK_EQ(dffs_format(NULL), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_mount(NULL, &cfg), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_mount(&fs, NULL), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_unmount(NULL), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_sync(NULL), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_mkdir(NULL, "/x"), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_ram_bytes(NULL), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_ram_estimate(NULL), DFFS_ERR_INVAL);
    cfg.read = NULL; /* a required callback missing */
    CHECK_EQ(dffs_format(&cfg), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_mount(&fs, &cfg), DFFS_ERR_INVAL);
    cfg = rf->cfg;
    cfg.geometry.page_size = 3000; /* not a power of two */
    CHECK_EQ(dffs_format(&cfg), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_ram_estimate(&cfg), DFFS_ERR_INVAL);
    cfg = rf->cfg;
    cfg.geometry.kind = 7;
    CHECK_EQ(dffs_format(&cfg), DFFS_ERR_INVAL);
    cfg = rf->cfg;
    cfg.ram_preset = 9;
    CHECK_EQ(dffs_ram_estimate(&cfg), DFFS_ERR_INVAL);
    cfg.ram_preset = DFFS_RAM_DEFAULT;
    cfg.mount_flags = 0x80;
    CHECK_EQ(dffs_ram_estimate(&cfg), DFFS_ERR_INVAL);
    CHECK(fs == NULL);
    CHECK_EQ(rf->progs + rf->erases, 0);
    CHECK(strcmp(dffs_strerror(DFFS_ERR_NOSPC), "no space left on device") == 0);
    CHECK(strcmp(dffs_strerror(12345), "unknown error") == 0);
}

static void test_files(dffs_t *fs) {
    dffs_file_t f;
    char tmp[64];

    /* create and write */
    CHECK_EQ(dffs_mkdir(fs, "/d"), 0);
    CHECK_EQ(dffs_mkdir(fs, "/d"), DFFS_ERR_EXIST);
    CHECK_EQ(dffs_mkdir(fs, "/nope/x"), DFFS_ERR_NOENT);
    CHECK_EQ(dffs_mkdir(fs, "/d/sub"), 0);
    CHECK_EQ(dffs_file_open(fs, &f, "/d/data", DFFS_O_WRONLY | DFFS_O_CREAT | DFFS_O_EXCL), 0);
    CHECK_EQ(dffs_file_write(fs, &f, pattern, DATA_LEN), DATA_LEN);
    CHECK_EQ(dffs_file_tell(fs, &f), DATA_LEN);
    CHECK_EQ(dffs_file_size(fs, &f), DATA_LEN);
    CHECK_EQ(dffs_file_read(fs, &f, tmp, sizeof tmp), DFFS_ERR_BADF); /* write-only */
    CHECK_EQ(dffs_file_seek(fs, &f, 100, DFFS_SEEK_SET), 100);
    CHECK_EQ(dffs_file_write(fs, &f, "WORLD", 5), 5);
    CHECK_EQ(dffs_file_seek(fs, &f, -5, DFFS_SEEK_CUR), 100);
    CHECK_EQ(dffs_file_write(fs, &f, "HELLO", 5), 5); /* as in `pattern` */
    CHECK_EQ(dffs_file_seek(fs, &f, -10, DFFS_SEEK_END), DATA_LEN - 10);
    CHECK_EQ(dffs_file_seek(fs, &f, -1, DFFS_SEEK_SET), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_file_seek(fs, &f, 0, 7), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_file_tell(fs, &f), DATA_LEN - 10);
    CHECK_EQ(dffs_file_write(fs, &f, NULL, 4), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_file_write(fs, &f, NULL, 0), 0);
    CHECK_EQ(dffs_file_sync(fs, &f), 0);
    CHECK_EQ(dffs_file_seek(fs, &f, 0, DFFS_SEEK_END), DATA_LEN);
    CHECK_EQ(dffs_file_write(fs, &f, "tail", 4), 4);
    CHECK_EQ(dffs_file_datasync(fs, &f), 0);
    CHECK_EQ(dffs_file_size(fs, &f), DATA_LEN + 4);
    CHECK_EQ(dffs_file_truncate(fs, &f, DATA_LEN), 0);
    CHECK_EQ(dffs_file_datasync(fs, &f), 0);
    CHECK_EQ(dffs_file_datasync(fs, NULL), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_file_datasync(NULL, &f), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_file_close(fs, &f), 0);
    CHECK_EQ(dffs_file_datasync(fs, &f), DFFS_ERR_BADF);
    /* a closed handle is refused, even once its slot is reused */
    CHECK_EQ(dffs_file_close(fs, &f), DFFS_ERR_BADF);
    CHECK_EQ(dffs_file_write(fs, &f, "x", 1), DFFS_ERR_BADF);
    CHECK_EQ(dffs_file_tell(fs, &f), DFFS_ERR_BADF);
    check_content(fs, "/d/data", pattern, DATA_LEN);

    /* read-only handles */
    CHECK_EQ(dffs_file_open(fs, &f, "/d/data", DFFS_O_RDONLY), 0);
    CHECK_EQ(dffs_file_seek(fs, &f, 100, DFFS_SEEK_SET), 100);
    CHECK_EQ(dffs_file_read(fs, &f, tmp, 5), 5);
    CHECK(memcmp(tmp, "HELLO", 5) == 0);
    CHECK_EQ(dffs_file_tell(fs, &f), 105);
    CHECK_EQ(dffs_file_seek(fs, &f, DATA_LEN + 50, DFFS_SEEK_SET), DATA_LEN + 50);
    CHECK_EQ(dffs_file_read(fs, &f, tmp, sizeof tmp), 0); /* past the end */
    CHECK_EQ(dffs_file_write(fs, &f, "x", 1), DFFS_ERR_BADF);
    CHECK_EQ(dffs_file_truncate(fs, &f, 0), DFFS_ERR_BADF);
    CHECK_EQ(dffs_file_sync(fs, &f), 0);
    CHECK_EQ(dffs_file_close(fs, &f), 0);

    /* open errors */
    CHECK_EQ(dffs_file_open(fs, &f, "/d/data", DFFS_O_WRONLY | DFFS_O_CREAT | DFFS_O_EXCL),
             DFFS_ERR_EXIST);
    CHECK_EQ(dffs_file_open(fs, &f, "/d/missing", DFFS_O_RDONLY), DFFS_ERR_NOENT);
    CHECK_EQ(dffs_file_open(fs, &f, "/nodir/x", DFFS_O_WRONLY | DFFS_O_CREAT), DFFS_ERR_NOENT);
    CHECK_EQ(dffs_file_open(fs, &f, "/d", DFFS_O_RDONLY), DFFS_ERR_ISDIR);
    CHECK_EQ(dffs_file_open(fs, &f, "/d/data/x", DFFS_O_RDONLY), DFFS_ERR_NOTDIR);
    CHECK_EQ(dffs_file_open(fs, &f, "/d/data", 0), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_file_open(fs, &f, "/d/data", DFFS_O_RDONLY | 0x40000), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_file_open(fs, &f, NULL, DFFS_O_RDONLY), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_file_open(fs, NULL, "/d/data", DFFS_O_RDONLY), DFFS_ERR_INVAL);
    {
        char longname[300];
        longname[0] = '/';
        memset(longname + 1, 'n', 280);
        longname[281] = 0;
        CHECK_EQ(dffs_file_open(fs, &f, longname, DFFS_O_WRONLY | DFFS_O_CREAT),
                 DFFS_ERR_NAMETOOLONG);
    }

    /* append */
    CHECK_EQ(dffs_file_open(fs, &f, "/d/log", DFFS_O_WRONLY | DFFS_O_CREAT | DFFS_O_APPEND), 0);
    CHECK_EQ(dffs_file_write(fs, &f, "abc", 3), 3);
    CHECK_EQ(dffs_file_seek(fs, &f, 0, DFFS_SEEK_SET), 0);
    CHECK_EQ(dffs_file_write(fs, &f, "def", 3), 3); /* still at the end */
    CHECK_EQ(dffs_file_tell(fs, &f), 6);
    CHECK_EQ(dffs_file_close(fs, &f), 0);
    check_content(fs, "/d/log", "abcdef", 6);

    /* truncate at open, truncate and extend through the handle */
    CHECK_EQ(dffs_file_open(fs, &f, "/d/log", DFFS_O_RDWR | DFFS_O_TRUNC), 0);
    CHECK_EQ(dffs_file_size(fs, &f), 0);
    CHECK_EQ(dffs_file_write(fs, &f, "0123456789", 10), 10);
    CHECK_EQ(dffs_file_truncate(fs, &f, 4), 0);
    CHECK_EQ(dffs_file_size(fs, &f), 4);
    CHECK_EQ(dffs_file_tell(fs, &f), 10); /* the position does not move */
    CHECK_EQ(dffs_file_truncate(fs, &f, 8), 0);
    CHECK_EQ(dffs_file_seek(fs, &f, 0, DFFS_SEEK_SET), 0);
    CHECK_EQ(dffs_file_read(fs, &f, tmp, sizeof tmp), 8);
    CHECK(memcmp(tmp, "0123\0\0\0\0", 8) == 0);
    CHECK_EQ(dffs_file_close(fs, &f), 0);

    /* synchronous writes, and a hole */
    CHECK_EQ(dffs_file_open(fs, &f, "/d/sync", DFFS_O_WRONLY | DFFS_O_CREAT | DFFS_O_SYNC), 0);
    CHECK_EQ(dffs_file_seek(fs, &f, 1000, DFFS_SEEK_SET), 1000);
    CHECK_EQ(dffs_file_write(fs, &f, "end", 3), 3);
    CHECK_EQ(dffs_file_close(fs, &f), 0);
    {
        unsigned char want[1003] = {0};
        memcpy(want + 1000, "end", 3);
        check_content(fs, "/d/sync", want, sizeof want);
    }

    /* stat */
    dffs_info info;
    CHECK_EQ(dffs_stat(fs, "/d/data", &info), 0);
    CHECK(info.type == DFFS_TYPE_REG && info.size == DATA_LEN && strcmp(info.name, "data") == 0);
    CHECK_EQ(info.mtime, 1700000000); /* the config's clock */
    CHECK_EQ(dffs_stat(fs, "/d/", &info), 0);
    CHECK(info.type == DFFS_TYPE_DIR && strcmp(info.name, "d") == 0);
    CHECK_EQ(dffs_stat(fs, "/", &info), 0);
    CHECK(info.type == DFFS_TYPE_DIR && strcmp(info.name, "/") == 0);
    CHECK_EQ(dffs_stat(fs, "/zzz", &info), DFFS_ERR_NOENT);
    CHECK_EQ(dffs_stat(fs, "/d/data", NULL), DFFS_ERR_INVAL);

    /* directories */
    {
        const char *const want[] = {"data", "log", "sync", "sub", NULL};
        check_listing(fs, "/d", want);
        const char *const root[] = {"d", NULL};
        check_listing(fs, "/", root);
        const char *const none[] = {NULL};
        check_listing(fs, "/d/sub", none);
    }
    dffs_dir_t d;
    CHECK_EQ(dffs_dir_open(fs, &d, "/d/data"), DFFS_ERR_NOTDIR);
    CHECK_EQ(dffs_dir_open(fs, &d, "/nope"), DFFS_ERR_NOENT);

    /* rename and remove */
    CHECK_EQ(dffs_remove(fs, "/d"), DFFS_ERR_NOTEMPTY);
    CHECK_EQ(dffs_rename(fs, "/d/data", "/d/data2"), 0);
    CHECK_EQ(dffs_stat(fs, "/d/data", &info), DFFS_ERR_NOENT);
    CHECK_EQ(dffs_stat(fs, "/d/data2", &info), 0);
    CHECK_EQ(info.size, DATA_LEN);
    CHECK_EQ(dffs_rename(fs, "/d/nothere", "/d/x"), DFFS_ERR_NOENT);
    CHECK_EQ(dffs_rename(fs, "/d", "/d/sub/inside"), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_rename(fs, "/d/sync", "/d/sub"), DFFS_ERR_ISDIR);
    CHECK_EQ(dffs_mkdir(fs, "/e"), 0);
    CHECK_EQ(dffs_mkdir(fs, "/e/full"), 0);
    CHECK_EQ(dffs_rename(fs, "/d/sub", "/e"), DFFS_ERR_NOTEMPTY);
    CHECK_EQ(dffs_remove(fs, "/e/full"), 0);
    CHECK_EQ(dffs_rename(fs, "/d/sub", "/e"), 0); /* replaces the empty directory */
    CHECK_EQ(dffs_remove(fs, "/e"), 0);
    CHECK_EQ(dffs_remove(fs, "/e"), DFFS_ERR_NOENT);
    CHECK_EQ(dffs_remove(fs, "/"), DFFS_ERR_INVAL);
    CHECK_EQ(dffs_remove(fs, NULL), DFFS_ERR_INVAL);
}

static void test_transactions(dffs_t *fs) {
    dffs_file_t f;
    dffs_info info;
    CHECK_EQ(dffs_tx_commit(fs), DFFS_ERR_INVAL); /* none open */
    CHECK_EQ(dffs_tx_abort(fs), DFFS_ERR_INVAL);

    CHECK_EQ(dffs_tx_begin(fs), 0);
    CHECK_EQ(dffs_tx_begin(fs), DFFS_ERR_BUSY);
    CHECK_EQ(dffs_file_open(fs, &f, "/tx-gone", DFFS_O_WRONLY | DFFS_O_CREAT), 0);
    CHECK_EQ(dffs_file_write(fs, &f, "gone", 4), 4);
    CHECK_EQ(dffs_file_close(fs, &f), 0);
    CHECK_EQ(dffs_mkdir(fs, "/tx-dir"), 0);
    CHECK_EQ(dffs_remove(fs, "/d/log"), 0);
    CHECK_EQ(dffs_tx_abort(fs), 0);
    CHECK_EQ(dffs_stat(fs, "/tx-gone", &info), DFFS_ERR_NOENT);
    CHECK_EQ(dffs_stat(fs, "/tx-dir", &info), DFFS_ERR_NOENT);
    CHECK_EQ(dffs_stat(fs, "/d/log", &info), 0); /* the removal was undone */

    CHECK_EQ(dffs_tx_begin(fs), 0);
    CHECK_EQ(dffs_file_open(fs, &f, "/tx-kept", DFFS_O_WRONLY | DFFS_O_CREAT), 0);
    CHECK_EQ(dffs_file_write(fs, &f, "kept", 4), 4);
    CHECK_EQ(dffs_file_close(fs, &f), 0);
    CHECK_EQ(dffs_rename(fs, "/d/log", "/d/log2"), 0);
    CHECK_EQ(dffs_tx_commit(fs), 0);
    CHECK_EQ(dffs_stat(fs, "/tx-kept", &info), 0);
    CHECK_EQ(dffs_stat(fs, "/d/log2", &info), 0);
    CHECK_EQ(dffs_sync(fs), 0);
}

/* Hard links: two names of one file, and the errors. */
static void test_links(dffs_t *fs) {
    dffs_file_t f;
    dffs_info a, b;
    char buf[8];
    CHECK_EQ(dffs_file_open(fs, &f, "/linked", DFFS_O_WRONLY | DFFS_O_CREAT), 0);
    CHECK_EQ(dffs_file_write(fs, &f, "shared", 6), 6);
    CHECK_EQ(dffs_file_close(fs, &f), 0);
    CHECK_EQ(dffs_link(fs, "/linked", "/d/second"), 0);
    CHECK_EQ(dffs_stat(fs, "/linked", &a), 0);
    CHECK_EQ(dffs_stat(fs, "/d/second", &b), 0);
    CHECK_EQ(a.ino, b.ino);
    CHECK_EQ(a.nlink, 2);
    CHECK_EQ(dffs_file_open(fs, &f, "/d/second", DFFS_O_RDONLY), 0);
    CHECK_EQ(dffs_file_read(fs, &f, buf, sizeof buf), 6);
    CHECK(memcmp(buf, "shared", 6) == 0);
    CHECK_EQ(dffs_file_close(fs, &f), 0);
    CHECK_EQ(dffs_link(fs, "/d", "/d-again"), DFFS_ERR_PERM);
    CHECK_EQ(dffs_link(fs, "/linked", "/d/second"), DFFS_ERR_EXIST);
    CHECK_EQ(dffs_link(fs, "/missing", "/x"), DFFS_ERR_NOENT);
    CHECK(strcmp(dffs_strerror(DFFS_ERR_MLINK), "too many links") == 0);
    CHECK_EQ(dffs_remove(fs, "/linked"), 0);
    CHECK_EQ(dffs_stat(fs, "/d/second", &b), 0);
    CHECK_EQ(b.nlink, 1);
    CHECK_EQ(b.size, 6);
    CHECK_EQ(dffs_remove(fs, "/d/second"), 0);
}

/* Fills the device until ENOSPC, then checks that deleting makes room again. */
static void test_full(dffs_t *fs, uint64_t capacity) {
    dffs_file_t f;
    dffs_fsinfo si;
    CHECK_EQ(dffs_statfs(fs, &si), 0);
    CHECK(si.block_size > 0 && si.blocks_free <= si.blocks && si.name_max == DFFS_NAME_MAX);
    CHECK(si.files >= 5);
    CHECK_EQ(dffs_statfs(fs, NULL), DFFS_ERR_INVAL);

    CHECK_EQ(dffs_file_open(fs, &f, "/big", DFFS_O_WRONLY | DFFS_O_CREAT), 0);
    uint64_t written = 0;
    int32_t r;
    for (uint32_t i = 0;; i++) {
        memset(chunk, (int)(i & 0xFF), sizeof chunk);
        r = dffs_file_write(fs, &f, chunk, sizeof chunk);
        if (r < 0) break;
        CHECK_EQ(r, sizeof chunk);
        written += (uint64_t)r;
        CHECK(written <= capacity);
    }
    CHECK_EQ(r, DFFS_ERR_NOSPC);
    printf("[%s] ENOSPC after %llu of %llu bytes\n", label, (unsigned long long)written,
           (unsigned long long)capacity);
    CHECK(written >= capacity / 4);
    int c = dffs_file_close(fs, &f);
    CHECK(c == 0 || c == DFFS_ERR_NOSPC);
    /* other writers are refused too */
    int o = dffs_file_open(fs, &f, "/more", DFFS_O_WRONLY | DFFS_O_CREAT);
    if (o == 0) {
        CHECK_EQ(dffs_file_write(fs, &f, chunk, sizeof chunk), DFFS_ERR_NOSPC);
        CHECK_EQ(dffs_file_close(fs, &f), 0);
    } else {
        CHECK_EQ(o, DFFS_ERR_NOSPC);
    }
    /* deleting makes room */
    CHECK_EQ(dffs_remove(fs, "/big"), 0);
    dffs_remove(fs, "/more");
    CHECK_EQ(dffs_sync(fs), 0);
    CHECK_EQ(dffs_file_open(fs, &f, "/after-full", DFFS_O_WRONLY | DFFS_O_CREAT), 0);
    for (int i = 0; i < 4; i++) CHECK_EQ(dffs_file_write(fs, &f, pattern + i * 4000, 4000), 4000);
    CHECK_EQ(dffs_file_close(fs, &f), 0);
    check_content(fs, "/after-full", pattern, 16000);
    CHECK_EQ(dffs_statfs(fs, &si), 0);
    CHECK(si.blocks_free > 0);
}

static void test_too_many_open(ramflash *rf) {
    dffs_config cfg = rf->cfg;
    cfg.context = rf;
    cfg.max_open = 2;
    dffs_t *fs;
    dffs_file_t a, b, c;
    CHECK_EQ(dffs_mount(&fs, &cfg), 0);
    CHECK_EQ(dffs_file_open(fs, &a, "/d/data2", DFFS_O_RDONLY), 0);
    CHECK_EQ(dffs_file_open(fs, &b, "/d/data2", DFFS_O_RDONLY), 0);
    CHECK_EQ(dffs_file_open(fs, &c, "/d/data2", DFFS_O_RDONLY), DFFS_ERR_MFILE);
    CHECK_EQ(dffs_file_open(fs, &c, "/new", DFFS_O_WRONLY | DFFS_O_CREAT), DFFS_ERR_MFILE);
    dffs_info info;
    CHECK_EQ(dffs_stat(fs, "/new", &info), DFFS_ERR_NOENT); /* not created either */
    CHECK_EQ(dffs_file_close(fs, &a), 0);
    CHECK_EQ(dffs_file_open(fs, &c, "/d/data2", DFFS_O_RDONLY), 0);
    /* unmount commits and frees even with files open */
    CHECK_EQ(dffs_unmount(fs), 0);
}

static void test_read_only(ramflash *rf) {
    dffs_config cfg = rf->cfg;
    cfg.mount_flags = DFFS_MOUNT_READ_ONLY;
    dffs_t *fs;
    dffs_file_t f;
    unsigned long progs = rf->progs, erases = rf->erases;
    CHECK_EQ(dffs_mount(&fs, &cfg), 0);
    CHECK_EQ(dffs_file_open(fs, &f, "/d/data2", DFFS_O_WRONLY), DFFS_ERR_ROFS);
    CHECK_EQ(dffs_mkdir(fs, "/ro"), DFFS_ERR_ROFS);
    CHECK_EQ(dffs_tx_begin(fs), DFFS_ERR_ROFS);
    check_content(fs, "/d/data2", pattern, DATA_LEN);
    CHECK_EQ(dffs_unmount(fs), 0);
    CHECK_EQ(rf->progs, progs);
    CHECK_EQ(rf->erases, erases);
}

static void run_device(const char *name, ramflash *rf) {
    label = name;
    uint64_t capacity = (uint64_t)rf->cfg.geometry.page_size * rf->cfg.geometry.pages_per_block *
                        rf->cfg.geometry.block_count;
    dffs_t *fs = NULL;
    size_t heap0 = dffs_heap_current();

    test_bad_arguments(rf);

    /* a blank device holds no file system */
    CHECK_EQ(dffs_mount(&fs, &rf->cfg), DFFS_ERR_INVAL);
    CHECK(fs == NULL);
    CHECK_EQ(dffs_heap_current(), heap0);

    int64_t est = dffs_ram_estimate(&rf->cfg);
    CHECK(est > 0);
    CHECK_EQ(dffs_format(&rf->cfg), 0);
    dffs_heap_reset_peak();
    CHECK_EQ(dffs_mount(&fs, &rf->cfg), 0);
    CHECK(fs != NULL);

    test_files(fs);
    test_transactions(fs);
    test_links(fs);
    int64_t ram = dffs_ram_bytes(fs);
    CHECK(ram > 0);
    printf("[%s] ram_estimate %lld, ram_bytes %lld, heap peak %zu\n", name, (long long)est,
           (long long)ram, dffs_heap_peak() - heap0);
    CHECK_EQ(dffs_unmount(fs), 0);
    CHECK_EQ(dffs_heap_current(), heap0); /* everything freed */

    /* remount: everything is still there */
    CHECK_EQ(dffs_mount(&fs, &rf->cfg), 0);
    check_content(fs, "/d/data2", pattern, DATA_LEN);
    check_content(fs, "/d/log2", "0123\0\0\0\0", 8);
    check_content(fs, "/tx-kept", "kept", 4);
    {
        const char *const want[] = {"data2", "log2", "sync", NULL};
        check_listing(fs, "/d", want);
        const char *const root[] = {"d", "tx-kept", NULL};
        check_listing(fs, "/", root);
    }
    test_full(fs, capacity);
    CHECK_EQ(dffs_unmount(fs), 0);

    test_too_many_open(rf);
    test_read_only(rf);

    /* the smallest configuration mounts the same file system */
    dffs_config small = rf->cfg;
    small.ram_preset = DFFS_RAM_SMALLEST;
    dffs_heap_reset_peak();
    CHECK_EQ(dffs_mount(&fs, &small), 0);
    check_content(fs, "/d/data2", pattern, DATA_LEN);
    check_content(fs, "/after-full", pattern, 16000);
    printf("[%s] smallest: ram_estimate %lld, ram_bytes %lld, heap peak %zu\n", name,
           (long long)dffs_ram_estimate(&small), (long long)dffs_ram_bytes(fs),
           dffs_heap_peak() - heap0);
    CHECK_EQ(dffs_unmount(fs), 0);
    CHECK_EQ(dffs_heap_current(), heap0);
    printf("[%s] ok: %lu reads, %lu programs, %lu erases, %lu blocks marked bad\n", name,
           rf->reads, rf->progs, rf->erases, rf->marked_bad);
}

int main(void) {
    make_pattern();
    ramflash rf;

    /* NOR: 256 B program pages, 4 KiB sectors, 128 sectors (512 KiB). */
    CHECK(ramflash_init_nor(&rf, 256, 4096, 128) == 0);
    run_device("nor", &rf);
    ramflash_free(&rf);

#ifdef DFFS_NO_NAND
    /* A library built without the `nand` feature refuses NAND before it touches the device. */
    CHECK(ramflash_init_nand(&rf, 2048, 64, 64, 64) == 0);
    {
        dffs_t *fs = NULL;
        CHECK_EQ(dffs_format(&rf.cfg), DFFS_ERR_NOTSUP);
        CHECK_EQ(dffs_mount(&fs, &rf.cfg), DFFS_ERR_NOTSUP);
        CHECK_EQ(rf.progs + rf.erases, 0);
        printf("[nand] refused: this library has no NAND support\n");
    }
    ramflash_free(&rf);
#else
    /* NAND: 2048 + 64 B pages, 64 pages per block, 64 blocks (8 MiB), one factory bad block,
     * a corrected bit error now and then, and an erase that fails (a grown bad block). */
    CHECK(ramflash_init_nand(&rf, 2048, 64, 64, 64) == 0);
    ramflash_factory_bad(&rf, 5);
    rf.ecc_every = 997;
    run_device("nand", &rf);
    rf.fail_erase_in = 3;
    {
        /* erases happen on reclaiming space: write and delete until the failure happened */
        dffs_t *fs;
        dffs_file_t f;
        CHECK_EQ(dffs_mount(&fs, &rf.cfg), 0);
        for (int round = 0; round < 40 && rf.failed_block == UINT32_MAX; round++) {
            CHECK_EQ(dffs_file_open(fs, &f, "/churn", DFFS_O_WRONLY | DFFS_O_CREAT | DFFS_O_TRUNC),
                     0);
            for (int i = 0; i < 64; i++)
                CHECK_EQ(dffs_file_write(fs, &f, chunk, sizeof chunk), sizeof chunk);
            CHECK_EQ(dffs_file_close(fs, &f), 0);
            CHECK_EQ(dffs_sync(fs), 0);
        }
        CHECK(rf.failed_block != UINT32_MAX);
        CHECK_EQ(dffs_unmount(fs), 0);
        CHECK(rf.marked_bad >= 1);
        CHECK_EQ(dffs_mount(&fs, &rf.cfg), 0);
        check_content(fs, "/d/data2", pattern, DATA_LEN);
        CHECK_EQ(dffs_unmount(fs), 0);
        printf("[nand] grown bad block %u retired and marked\n", rf.failed_block);
    }
    ramflash_free(&rf);
#endif

    printf("all C API checks passed\n");
    return 0;
}
