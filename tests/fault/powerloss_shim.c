/* Power-loss shim (LD_PRELOAD): an undo journal of every write not yet made durable.
 *
 *   SQLLOCK_POWERLOSS_DIR=/abs/dir/       files whose real path starts with this are watched
 *   SQLLOCK_POWERLOSS_JOURNAL=/abs/file   the undo journal (must be outside the watched dir)
 *
 * Before every write, pwrite, pwrite64, writev, ftruncate (ftruncate64) to a watched file, the shim
 * appends one record to the journal: W (path, offset, the file's old size, the bytes about to be
 * overwritten) or T (path, old size, the bytes cut off). After fsync, fdatasync or sync_file_range
 * with SYNC_FILE_RANGE_WAIT_AFTER of a watched file returns 0, it appends S (path): every earlier
 * record of that path is durable. unlink of a watched file appends U (path): the file's earlier
 * records no longer apply (directory entries are treated as durable at once: see README).
 * SQLite's -shm file is never watched (it is mmap'd; a reboot loses it and SQLite rebuilds it).
 *
 * Every record is one write(2) to the journal, opened O_APPEND: the journal's order is the global
 * order of records over all processes. Each record carries a magic, its length and a hash, so a
 * record torn by a SIGKILL in the middle of its append (the write it describes never happened) is
 * skipped by the reader (powerloss.py). A write holds a shared flock on the journal from before its
 * record until after the real write; a sync holds it exclusively around fsync and its S record, so
 * an S record never follows the record of a write that had not completed when fsync began. The
 * journal is opened anew for each operation, so flock also separates the threads of one process.
 *
 * powerloss.py pulls the plug afterwards: with every process SIGKILLed, it applies the records not
 * followed by an S or U of their path in reverse order, which is the files' last-synced state.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define PL_MAGIC 0x53534f4c52574f50ULL /* "POWRLOSS" */

struct pl_header {
  uint64_t magic;
  uint32_t total;   /* header + path + data */
  uint32_t hash;    /* CRC-32 of everything after this field */
  uint8_t type;     /* 'W', 'T', 'S', 'U' */
  uint8_t pad[3];
  int32_t pid;
  int64_t offset;   /* W: where the write goes; T: the new size */
  int64_t old_size; /* the file's size before */
  uint32_t path_len;
  uint32_t data_len;
};

/* CRC-32 (IEEE, as zlib.crc32). */
static uint32_t crc32_of(const unsigned char* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

static const char* watched_dir(void) {
  static const char* dir = NULL;
  static int init = 0;
  if (!init) {
    dir = getenv("SQLLOCK_POWERLOSS_DIR");
    if (dir && !*dir) dir = NULL;
    init = 1;
  }
  return dir;
}

/* The real path of fd when it is a watched file (not -shm), else 0. */
static int watched_path(int fd, char* path, size_t size) {
  const char* dir = watched_dir();
  if (!dir || fd < 0) return 0;
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = syscall(SYS_readlinkat, AT_FDCWD, link, path, size - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  if (strncmp(path, dir, strlen(dir)) != 0) return 0;
  if (n >= 4 && strcmp(path + n - 4, "-shm") == 0) return 0;
  if (n >= 10 && strcmp(path + n - 10, " (deleted)") == 0) return 0;
  return 1;
}

static int journal_open(int how) {
  const char* j = getenv("SQLLOCK_POWERLOSS_JOURNAL");
  if (!j) return -1;
  int fd = (int)syscall(SYS_openat, AT_FDCWD, j, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    fprintf(stderr, "powerloss_shim: cannot open %s\n", j);
    abort();
  }
  while (flock(fd, how) != 0 && errno == EINTR) {
  }
  return fd;
}

static void journal_close(int jfd) {
  if (jfd >= 0) syscall(SYS_close, jfd); /* closing drops the flock */
}

static void journal_append(int jfd, char type, const char* path, int64_t offset, int64_t old_size,
                           const unsigned char* data, size_t data_len) {
  if (jfd < 0) return;
  struct pl_header h;
  memset(&h, 0, sizeof h);
  size_t path_len = strlen(path);
  size_t total = sizeof h + path_len + data_len;
  h.magic = PL_MAGIC;
  h.total = (uint32_t)total;
  h.type = (uint8_t)type;
  h.pid = (int32_t)getpid();
  h.offset = offset;
  h.old_size = old_size;
  h.path_len = (uint32_t)path_len;
  h.data_len = (uint32_t)data_len;
  unsigned char* buf = malloc(total);
  if (!buf) abort();
  memcpy(buf, &h, sizeof h);
  memcpy(buf + sizeof h, path, path_len);
  if (data_len) memcpy(buf + sizeof h + path_len, data, data_len);
  const size_t hashed_from = offsetof(struct pl_header, type);
  uint32_t hash = crc32_of(buf + hashed_from, total - hashed_from);
  memcpy(buf + offsetof(struct pl_header, hash), &hash, sizeof hash);
  ssize_t n = syscall(SYS_write, jfd, buf, total);
  free(buf);
  if (n != (ssize_t)total) {
    fprintf(stderr, "powerloss_shim: short journal write\n");
    abort();
  }
}

static int64_t file_size(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -1;
  return (int64_t)st.st_size;
}

/* Record the undo of a write of len bytes at offset (offset < 0: the fd's position, or the end
 * with O_APPEND). Returns the journal fd (held with a shared flock) or -1 when not watched. */
static int before_write(int fd, int64_t offset, size_t len) {
  char path[PATH_MAX];
  if (!watched_path(fd, path, sizeof path)) return -1;
  int jfd = journal_open(LOCK_SH);
  int64_t size = file_size(fd);
  if (offset < 0) {
    int fl = fcntl(fd, F_GETFL);
    offset = (fl >= 0 && (fl & O_APPEND)) ? size : (int64_t)lseek(fd, 0, SEEK_CUR);
  }
  size_t keep = 0;
  if (offset < size) keep = (size_t)((size - offset) < (int64_t)len ? (size - offset) : (int64_t)len);
  unsigned char* old = keep ? malloc(keep) : NULL;
  if (keep && !old) abort();
  ssize_t got = keep ? syscall(SYS_pread64, fd, old, keep, offset) : 0;
  if (got < 0) got = 0;
  journal_append(jfd, 'W', path, offset, size, old, (size_t)got);
  free(old);
  return jfd;
}

#define REAL(name) \
  static __typeof__(name)* real_##name = NULL; \
  if (!real_##name) real_##name = (__typeof__(name)*)dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void* buf, size_t n) {
  REAL(write);
  int j = before_write(fd, -1, n);
  ssize_t r = real_write(fd, buf, n);
  journal_close(j);
  return r;
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  REAL(pwrite);
  int j = before_write(fd, off, n);
  ssize_t r = real_pwrite(fd, buf, n, off);
  journal_close(j);
  return r;
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off_t off) {
  REAL(pwrite64);
  int j = before_write(fd, off, n);
  ssize_t r = real_pwrite64(fd, buf, n, off);
  journal_close(j);
  return r;
}

ssize_t writev(int fd, const struct iovec* iov, int cnt) {
  REAL(writev);
  size_t n = 0;
  for (int i = 0; i < cnt; ++i) n += iov[i].iov_len;
  int j = before_write(fd, -1, n);
  ssize_t r = real_writev(fd, iov, cnt);
  journal_close(j);
  return r;
}

static int before_truncate(int fd, int64_t len) {
  char path[PATH_MAX];
  if (!watched_path(fd, path, sizeof path)) return -1;
  int jfd = journal_open(LOCK_SH);
  int64_t size = file_size(fd);
  size_t cut = size > len ? (size_t)(size - len) : 0;
  unsigned char* old = cut ? malloc(cut) : NULL;
  if (cut && !old) abort();
  ssize_t got = cut ? syscall(SYS_pread64, fd, old, cut, len) : 0;
  if (got < 0) got = 0;
  journal_append(jfd, 'T', path, len, size, old, (size_t)got);
  free(old);
  return jfd;
}

int ftruncate(int fd, off_t len) {
  REAL(ftruncate);
  int j = before_truncate(fd, len);
  int r = real_ftruncate(fd, len);
  journal_close(j);
  return r;
}

int ftruncate64(int fd, off_t len) {
  REAL(ftruncate64);
  int j = before_truncate(fd, len);
  int r = real_ftruncate64(fd, len);
  journal_close(j);
  return r;
}

/* A sync: exclusive flock, so every write whose record is earlier has completed. */
static int sync_begin(int fd, char* path, size_t size) {
  if (!watched_path(fd, path, size)) return -1;
  return journal_open(LOCK_EX);
}

static void sync_end(int jfd, const char* path, int ok) {
  if (jfd < 0) return;
  if (ok) journal_append(jfd, 'S', path, 0, 0, NULL, 0);
  journal_close(jfd);
}

int fsync(int fd) {
  REAL(fsync);
  char path[PATH_MAX];
  int j = sync_begin(fd, path, sizeof path);
  int r = real_fsync(fd);
  sync_end(j, path, r == 0);
  return r;
}

int fdatasync(int fd) {
  REAL(fdatasync);
  char path[PATH_MAX];
  int j = sync_begin(fd, path, sizeof path);
  int r = real_fdatasync(fd);
  sync_end(j, path, r == 0);
  return r;
}

/* Only a whole-file range with WAIT_AFTER counts as a sync (anything else: no record). */
int sync_file_range(int fd, off_t off, off_t n, unsigned int flags) {
  REAL(sync_file_range);
  char path[PATH_MAX];
  const int whole = off == 0 && n == 0 && (flags & SYNC_FILE_RANGE_WAIT_AFTER);
  int j = whole ? sync_begin(fd, path, sizeof path) : -1;
  int r = real_sync_file_range(fd, off, n, flags);
  sync_end(j, path, r == 0);
  return r;
}

/* The watched path an unlink removes (written into path), else 0. */
static int unlink_path(int dirfd, const char* name, char* path, size_t size) {
  const char* dir = watched_dir();
  if (!dir || !name) return 0;
  if (name[0] == '/') {
    snprintf(path, size, "%s", name);
  } else {
    char link[64], base[PATH_MAX / 2];
    if (dirfd == AT_FDCWD) snprintf(link, sizeof link, "/proc/self/cwd");
    else snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
    ssize_t n = syscall(SYS_readlinkat, AT_FDCWD, link, base, sizeof base - 1);
    if (n <= 0) return 0;
    base[n] = '\0';
    snprintf(path, size, "%s/%s", base, name);
  }
  return strncmp(path, dir, strlen(dir)) == 0;
}

/* Exclusive flock from before the unlink to its U record: no write of a new file of the same name
 * can fall between them. */
int unlink(const char* p) {
  REAL(unlink);
  char path[PATH_MAX];
  int j = unlink_path(AT_FDCWD, p, path, sizeof path) ? journal_open(LOCK_EX) : -1;
  int r = real_unlink(p);
  if (j >= 0 && r == 0) journal_append(j, 'U', path, 0, 0, NULL, 0);
  journal_close(j);
  return r;
}

int unlinkat(int dirfd, const char* p, int flags) {
  REAL(unlinkat);
  char path[PATH_MAX];
  int j = !(flags & AT_REMOVEDIR) && unlink_path(dirfd, p, path, sizeof path) ? journal_open(LOCK_EX) : -1;
  int r = real_unlinkat(dirfd, p, flags);
  if (j >= 0 && r == 0) journal_append(j, 'U', path, 0, 0, NULL, 0);
  journal_close(j);
  return r;
}
