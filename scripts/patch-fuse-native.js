#!/usr/bin/env node
// Small fixes and one extension to fuse-native 2.2.6's C addon, applied to the
// source in node_modules and rebuilt (it is compiled from source at install
// anyway). Idempotent; run by `npm install` (postinstall).
//  1. utimens passed atime in both the atime and the mtime argument, so a
//     program that sets only the modification time (rsync, `touch -m`) lost it.
//  2. utimens turned UTIME_NOW and UTIME_OMIT into the same few milliseconds
//     after 1970: they now arrive as 2^53-2 (now) and 2^53-1 (omit).
//  3. The caller (fuse_get_context(): uid, gid, pid, umask of the process that
//     made the request) is written at the start of the per-thread buffer that
//     every handler receives first, so the filesystem can give new files to
//     their creator and apply permission rules (src/fs/caller.ts reads it).
//  4. Operations on a file that was unlinked while open (the mount uses
//     hard_remove) reach the filesystem with no path: libfuse is told that is
//     fine (flag_nullpath_ok) and JavaScript gets '' instead of a crash.
//  5. flag_utime_omit_ok: without it libfuse 2 drops a utimensat that sets only
//     one of the two times (`touch -a`, `touch -m`) instead of passing it on.
//  6. index.js answered fgetattr (fstat, and the size checks the kernel makes
//     around reads and writes) with the path-based getattr, dropping the open
//     file: it now calls the filesystem's fgetattr with the file handle.
//  7. index.js turned a link count of 0 (an open file that was unlinked) into 1.
//  8. open can ask the kernel to keep the file's page cache (keep_cache): the
//     filesystem sets bit 30 of the handle it returns (src/fs/caller.ts
//     KEEP_CACHE), which the addon clears before storing the handle.
//  9. getxattr of a name outside user.* answers ENOTSUP in the FUSE thread, as
//     the filesystem would (src/fs/metadata.ts): `ls -l` asks for
//     security.selinux and system.posix_acl_access, and each trip to
//     JavaScript costs a thread hop. ENOTSUP (the namespace is not supported,
//     as setxattr answers) rather than ENODATA: ls then stops asking for the
//     rest of the file system (coreutils caches it per device), which saves
//     two kernel round trips (about 55 us here) per entry of every ls -l.
// 10. Attributes that readdir returns (the filesystem passes them only when
//     its cache already holds them) answer the getattr that follows for the
//     same path in the FUSE thread, once, within 20 s (the filesystem passes
//     only attributes its cache keeps that long): the lookups of `ls -l` cost
//     no hop to JavaScript. Any operation that may change something
//     (everything but getattr, fgetattr, access, statfs, readdir, opendir,
//     releasedir, getxattr, listxattr, read, readlink) empties this cache when
//     it starts and when it ends, and a listing that overlapped one adds nothing.
// 11. Reads answered in the FUSE thread: the filesystem hands the addon, per
//     open file, the chunk of the file it fetched last (Fuse.svcfsWindow(fh,
//     start, buffer), null to take it back before the buffer is reused); a read
//     that lies inside it is copied from there without a hop to JavaScript.
//     Sequential reads of 128 KiB then cost one hop per 8 MiB chunk instead of
//     64 (the CPU the mount spends per byte read was most of the distance to a
//     plain GET on 2 cores).
// 12. create, mkdir, unlink and rmdir may hand back, with their answer, the
//     attributes of the path and of its parent directory (18 ints each, zeros:
//     none; the filesystem gives only what its cache keeps >= 20 s more). When
//     no other changing operation began or ended meanwhile, these go into the
//     table of (10) as the operation ends: libfuse's lookup right after create
//     (an fgetattr, answered from the table too) and the kernel's permission
//     check on the directory before the next file cost no hop. write, flush,
//     fsync and release change their own file only: they drop its entry and
//     keep the rest (a listing hands over nothing of a file being written).
//     Fuse.svcfsForget() empties the table for a change made outside any
//     operation (an upload that kept a conflict copy beside the file). cp -r
//     of small files: 7 hops per file to 5; rm -r: 3 to 2.
// 13. A getattr that JavaScript answered ENOENT leaves a mark in the table of
//     (10): the next getattr of that path, within the negative timeout the
//     filesystem sets (Fuse.svcfsNegative(ms); 0, the default, turns it off),
//     is answered ENOENT in the FUSE thread, once, unless a changing operation
//     came between. The kernel keeps negative entries that long itself, but an
//     O_EXCL create (cp, tar, editors' temporary files) looks the name up again
//     anyway: one hop per new file less.
// 14. Writes answered in the FUSE thread: the filesystem hands the addon, per
//     open file, the descriptor of the local file that stages its bytes
//     (Fuse.svcfsWriteFile(fh, fd); -1 takes it back, after the writes under
//     way). The addon pwrite()s each write of that handle into its own copy of
//     the descriptor, with no hop to JavaScript, and keeps the range written and
//     a count, which Fuse.svcfsWritten(fh, out) hands over (and clears). After a
//     write, when JavaScript was not told yet, a threadsafe call
//     (Fuse.svcfsOnWrites(fn)) tells it. A 2 GiB file is 16,384 writes of 128 KiB,
//     each a hop to JavaScript and back before: the context switches on 2 cores
//     were a quarter of the mount's CPU.
// 15. index.js checked the mount point with two asynchronous fs.stat calls: the
//     first start of libuv's thread pool and two round trips through it, 5-10 ms
//     of a mount's start (the filesystem needs no pool before that). They are
//     synchronous now.
// 16. open can ask for direct I/O on the handle it returns (bit 29, src/fs/caller.ts
//     DIRECT_IO): reads then reach the filesystem whatever size the kernel has
//     cached, which the mount needs when an open finds that another client
//     replaced the file by a bigger one within the attribute timeout (the kernel
//     would cut reads at the old size).
// 17. Directories this mount made, answered in the FUSE thread: mkdir may hand
//     back a third block (ints[0]: how many ms the directory's listing, empty
//     then, stays in the filesystem's cache; ints[1]: the longest path whose
//     object key the store accepts). Until then, a getattr of a path in that
//     directory that no create, mknod, mkdir, symlink or link of this mount made
//     since is ENOENT without a hop to JavaScript, as JavaScript would answer
//     from its listing: the O_EXCL lookup of every new file of `cp -r`, `tar x`
//     or `rsync` into a new directory. rename, rmdir, any operation of another
//     kind that may change names, a name-making operation that failed, and
//     Fuse.svcfsForget() drop all of them.
// 18. Fuse.svcfsRecycle(fd, dropTo, writeFrom, writeTo): starts the write-back of
//     a range of a staging file (sync_file_range, no wait) and drops the clean
//     pages of [0, dropTo) from the page cache (posix_fadvise DONTNEED), for
//     the parts of a big file already uploaded while it is written: the file
//     then recycles a window of memory instead of taking its whole size, and
//     the server's copy is not competing with it for fresh pages (a 2 GiB cp:
//     8.2-9.9 s -> 6.7-7.2 s on this VM, where memory the page cache has not
//     used lately faults into the host at first touch). What was dropped is
//     read back from the disk when needed. Node has neither call.
// (The tables of (10) and (17), the windows of (11) and the files of (14) are per process: one mount each.)
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const dir = path.join(__dirname, '..', 'node_modules', 'fuse-native');
const src = path.join(dir, 'fuse-native.c');
if (!fs.existsSync(src)) process.exit(0);
const MARK = '/* svcfs patch 22 */';
const jsFile = path.join(dir, 'index.js');
// (6, 7) plain JavaScript: no rebuild needed
const jsEdits = [
  ['    this.ops.getattr(path, (err, stat) => {\n      if (err) return signal(err)\n', '    this.ops.fgetattr(path, fd, (err, stat) => {\n      if (err) return signal(err)\n'],
  ['  ints[6] = (stat && stat.nlink) || 1\n', "  ints[6] = (stat && typeof stat.nlink === 'number') ? stat.nlink : 1\n"],
  // (10) readdir's attributes may come already in array form (src/fs/attrs.ts writeStat)
  // (an earlier version of this script let each entry be a view: that edit is replaced too)
  ['      if (stats) stats = stats.map(getStatArray)\n', '      if (stats && !(stats instanceof Uint32Array)) stats = stats.map(getStatArray)\n',
    '      if (stats) stats = stats.map((s) => (s instanceof Uint32Array ? s : getStatArray(s)))\n'],
  // (12) changing operations may hand back attributes after their answer
  ['  _op_create (signal, path, mode) {\n    this.ops.create(path, mode, (err, fd) => {\n      return signal(err, fd)\n',
    '  _op_create (signal, path, mode) {\n    this.ops.create(path, mode, (err, fd, after) => {\n      return signal(err, fd, after)\n'],
  ['  _op_unlink (signal, path) {\n    this.ops.unlink(path, err => {\n      return signal(err)\n',
    '  _op_unlink (signal, path) {\n    this.ops.unlink(path, (err, after) => {\n      return signal(err, after)\n'],
  ['  _op_mkdir (signal, path, mode) {\n    this.ops.mkdir(path, mode, err => {\n      return signal(err)\n',
    '  _op_mkdir (signal, path, mode) {\n    this.ops.mkdir(path, mode, (err, after) => {\n      return signal(err, after)\n'],
  ['  _op_rmdir (signal, path) {\n    this.ops.rmdir(path, err => {\n      return signal(err)\n',
    '  _op_rmdir (signal, path) {\n    this.ops.rmdir(path, (err, after) => {\n      return signal(err, after)\n'],
  // (15) the mount point's checks, synchronously
  ['  _open (cb) {\n    const self = this\n',
    '  _open (cb) {\n    const self = this\n    const statNow = (p, cb) => { let st; try { st = fs.statSync(p) } catch (err) { return cb(err) } cb(null, st) } // svcfs (15)\n'],
  ['      return fs.stat(self.mnt, (err, stat) => {\n', '      return statNow(self.mnt, (err, stat) => {\n'],
  ["        fs.stat(path.join(self.mnt, '..'), (_, parent) => {\n", "        statNow(path.join(self.mnt, '..'), (_, parent) => {\n"],
  // (11) the read window, for the filesystem to call
  ['Fuse.EPERM = -1\n', 'Fuse.svcfsWindow = binding.fuse_native_svcfs_window\nFuse.svcfsForget = binding.fuse_native_svcfs_forget\nFuse.svcfsNegative = binding.fuse_native_svcfs_negative\n' +
    'Fuse.svcfsWriteFile = binding.fuse_native_svcfs_write_file\nFuse.svcfsWritten = binding.fuse_native_svcfs_written\nFuse.svcfsOnWrites = binding.fuse_native_svcfs_on_writes\nFuse.svcfsRecycle = binding.fuse_native_svcfs_recycle\nFuse.EPERM = -1\n',
    'Fuse.svcfsWindow = binding.fuse_native_svcfs_window\nFuse.svcfsForget = binding.fuse_native_svcfs_forget\nFuse.svcfsNegative = binding.fuse_native_svcfs_negative\n' +
    'Fuse.svcfsWriteFile = binding.fuse_native_svcfs_write_file\nFuse.svcfsWritten = binding.fuse_native_svcfs_written\nFuse.svcfsOnWrites = binding.fuse_native_svcfs_on_writes\nFuse.EPERM = -1\n',
    'Fuse.svcfsWindow = binding.fuse_native_svcfs_window\nFuse.svcfsForget = binding.fuse_native_svcfs_forget\nFuse.svcfsNegative = binding.fuse_native_svcfs_negative\nFuse.EPERM = -1\n',
    'Fuse.svcfsWindow = binding.fuse_native_svcfs_window\nFuse.svcfsForget = binding.fuse_native_svcfs_forget\nFuse.EPERM = -1\n',
    'Fuse.svcfsWindow = binding.fuse_native_svcfs_window\nFuse.EPERM = -1\n'],
];
let js = fs.readFileSync(jsFile, 'utf8');
for (const [first, to, ...older] of jsEdits) {
  if (js.includes(to)) continue;
  // an older version of this edit first: the original text may be part of it
  const from = [...older, first].find((f) => js.includes(f)) ?? first;
  if (!js.includes(from)) throw new Error(`patch-fuse-native: index.js does not contain the expected text: ${from.slice(0, 60)}`);
  js = js.replace(from, to);
}
fs.writeFileSync(jsFile, js);
let text = fs.readFileSync(src, 'utf8');
const built = fs.existsSync(path.join(dir, 'build', 'Release', 'fuse.node'));
if (text.includes(MARK) && built) process.exit(0);
// The edits apply to the addon's original source, kept beside it the first time,
// so that a later version of this script (a new mark) starts again from it.
const orig = `${src}.orig`;
if (!fs.existsSync(orig) && !text.startsWith('/* svcfs patch')) fs.writeFileSync(orig, text);
if (!text.includes(MARK) && fs.existsSync(orig)) text = fs.readFileSync(orig, 'utf8');

// (10) attributes from readdir for the getattr that follows, in C
const ATTR_CACHE = `/* svcfs (10): attributes readdir returned, each answering one getattr of its path in the FUSE thread */
#define SVCFS_AC_BUCKETS 16384
#define SVCFS_AC_MAX 100000
#define SVCFS_AC_LIFE_NS 20000000000ULL
/* the stat in fuse-native's array form (18 ints, half a struct stat): 100,000 entries of a listing are all here at once */
typedef struct svcfs_ac_entry { struct svcfs_ac_entry *next; uint64_t expires; int absent; uint32_t ints[18]; char path[]; } svcfs_ac_entry;
static svcfs_ac_entry *svcfs_ac[SVCFS_AC_BUCKETS];
static uint32_t svcfs_ac_count = 0;
static uint64_t svcfs_ac_gen = 0;
static pthread_mutex_t svcfs_ac_lock = PTHREAD_MUTEX_INITIALIZER;
/* (13) how long a path JavaScript found missing is answered ENOENT here (0: not at all) */
static uint64_t svcfs_neg_life_ns = 0;

static uint32_t svcfs_ac_hash (const char *dir, const char *name) {
  uint32_t h = 2166136261u;
  while (*dir) { h ^= (unsigned char) *dir++; h *= 16777619u; }
  if (name) { h ^= '/'; h *= 16777619u; while (*name) { h ^= (unsigned char) *name++; h *= 16777619u; } }
  return h % SVCFS_AC_BUCKETS;
}

/* something may change: what is cached may be stale, and a listing in flight must not add to it; returns the new generation */
static uint64_t svcfs_ac_invalidate (void) {
  pthread_mutex_lock(&svcfs_ac_lock);
  uint64_t gen = ++svcfs_ac_gen;
  for (uint32_t i = 0; svcfs_ac_count > 0 && i < SVCFS_AC_BUCKETS; i++) {
    svcfs_ac_entry *e = svcfs_ac[i];
    while (e) { svcfs_ac_entry *n = e->next; free(e); svcfs_ac_count--; e = n; }
    svcfs_ac[i] = NULL;
  }
  pthread_mutex_unlock(&svcfs_ac_lock);
  return gen;
}

static int svcfs_ac_take (const char *path, struct stat *st);
static void svcfs_cd_clear (void);

/* (12) one path's entry goes (no new generation: a listing hands over nothing of a file being written) */
static void svcfs_ac_forget (const char *path) {
  if (path != NULL) svcfs_ac_take(path, NULL);
}

/* before an operation goes to JavaScript: 1 when it may change something (invalidate now and when it ends), 2 when only its own path */
static int svcfs_ac_begin (uint32_t op, fuse_thread_locals_t *l) {
  if (op == op_readdir || (op == op_getattr && svcfs_neg_life_ns > 0)) {
    pthread_mutex_lock(&svcfs_ac_lock);
    l->svcfs_gen = svcfs_ac_gen;
    pthread_mutex_unlock(&svcfs_ac_lock);
    return 0;
  }
  if (op == op_getattr || op == op_fgetattr || op == op_access || op == op_statfs || op == op_opendir || op == op_releasedir ||
      op == op_getxattr || op == op_listxattr || op == op_read || op == op_readlink) return 0;
  /* (12) writing to an open file changes that file only: its entry goes, the rest (its directory's) stays */
  if (op == op_write || op == op_flush || op == op_fsync || op == op_release) {
    svcfs_ac_forget(l->path);
    return 2;
  }
  l->svcfs_after_n = 0;
  l->svcfs_gen = svcfs_ac_invalidate();
  return 1;
}

/* from readdir's answer (JavaScript thread): the dir's path joined with the entry's name; absent (13): a mark, no attributes */
static void svcfs_ac_add (uint64_t gen, const char *dir, const char *name, uint32_t *ints, int absent) {
  if (name == NULL) name = "";
  else if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) return;
  size_t dl = strlen(dir), nl = strlen(name);
  int whole = nl == 0; /* dir is the entry's own path */
  int root = dl == 1 && dir[0] == '/';
  pthread_mutex_lock(&svcfs_ac_lock);
  if (gen == svcfs_ac_gen && svcfs_ac_count < SVCFS_AC_MAX) {
    svcfs_ac_entry *e = malloc(sizeof(svcfs_ac_entry) + dl + nl + 2);
    if (e) {
      char *p = e->path;
      if (whole) memcpy(p, dir, dl + 1);
      else {
        if (!root) { memcpy(p, dir, dl); p += dl; }
        *p++ = '/';
        memcpy(p, name, nl + 1);
      }
      e->absent = absent;
      if (absent) memset(e->ints, 0, sizeof(e->ints));
      else memcpy(e->ints, ints, sizeof(e->ints));
      e->expires = uv_hrtime() + (absent ? svcfs_neg_life_ns : SVCFS_AC_LIFE_NS);
      uint32_t b = svcfs_ac_hash(e->path, NULL);
      e->next = svcfs_ac[b];
      svcfs_ac[b] = e;
      svcfs_ac_count++;
    }
  }
  pthread_mutex_unlock(&svcfs_ac_lock);
}

static void svcfs_ac_put (uint64_t gen, const char *dir, const char *name, uint32_t *ints) {
  svcfs_ac_add(gen, dir, name, ints, 0);
}

/* (13) Fuse.svcfsNegative(ms), from JavaScript */
NAPI_METHOD(fuse_native_svcfs_negative) {
  NAPI_ARGV(1)
  uint32_t ms = 0;
  napi_get_value_uint32(env, argv[0], &ms);
  svcfs_neg_life_ns = (uint64_t) ms * 1000000ULL;
  return NULL;
}

/* getattr in the FUSE thread: 1 (and the entry is used up) when readdir left one for this path, -1 for a mark of (13); st NULL: just drop it */
static int svcfs_ac_take (const char *path, struct stat *st) {
  int found = 0;
  pthread_mutex_lock(&svcfs_ac_lock);
  if (svcfs_ac_count > 0) {
    svcfs_ac_entry **pe = &svcfs_ac[svcfs_ac_hash(path, NULL)];
    for (svcfs_ac_entry *e = *pe; e; pe = &e->next, e = e->next) {
      if (strcmp(e->path, path) != 0) continue;
      *pe = e->next;
      svcfs_ac_count--;
      if (st != NULL && e->expires > uv_hrtime()) {
        if (e->absent) found = -1;
        else { populate_stat(e->ints, st); found = 1; }
      }
      free(e);
      break;
    }
  }
  pthread_mutex_unlock(&svcfs_ac_lock);
  return found;
}

/* (12) from a signal (JavaScript thread): attributes the operation hands back, path's then parent's */
static void svcfs_ac_after (napi_env env, napi_value v, fuse_thread_locals_t *l) {
  bool ta = false;
  l->svcfs_after_n = 0;
  if (napi_is_typedarray(env, v, &ta) != napi_ok || !ta) return;
  void *data = NULL;
  size_t bytes = 0;
  if (napi_get_buffer_info(env, v, &data, &bytes) != napi_ok || bytes < 18 * sizeof(uint32_t)) return;
  uint32_t n = bytes / (18 * sizeof(uint32_t));
  if (n > 3) n = 3;
  memcpy(l->svcfs_after, data, n * 18 * sizeof(uint32_t));
  l->svcfs_after_n = n;
}

/* (12) Fuse.svcfsForget(), from JavaScript: something changed outside any operation (a conflict copy appeared) */
NAPI_METHOD(fuse_native_svcfs_forget) {
  svcfs_ac_invalidate();
  svcfs_cd_clear();
  return NULL;
}

/* svcfs (17): directories this mount made (empty then), and the paths made in them since */
#define SVCFS_CD_DIRS 64
#define SVCFS_CD_NAMES_MAX 100000
typedef struct svcfs_cd_name { struct svcfs_cd_name *next; char path[]; } svcfs_cd_name;
typedef struct { char *path; uint64_t expires; uint32_t maxpath; } svcfs_cd_dir;
static svcfs_cd_dir svcfs_cd[SVCFS_CD_DIRS];
static svcfs_cd_name *svcfs_cd_names[SVCFS_AC_BUCKETS];
static uint32_t svcfs_cd_count = 0;
static uint32_t svcfs_cd_marked = 0;
static pthread_mutex_t svcfs_cd_lock = PTHREAD_MUTEX_INITIALIZER;

/* (lock held) */
static void svcfs_cd_clear_locked (void) {
  for (uint32_t i = 0; i < SVCFS_CD_DIRS; i++) { free(svcfs_cd[i].path); svcfs_cd[i].path = NULL; }
  for (uint32_t i = 0; svcfs_cd_count > 0 && i < SVCFS_AC_BUCKETS; i++) {
    svcfs_cd_name *e = svcfs_cd_names[i];
    while (e) { svcfs_cd_name *n = e->next; free(e); svcfs_cd_count--; e = n; }
    svcfs_cd_names[i] = NULL;
  }
  svcfs_cd_count = 0;
  svcfs_cd_marked = 0;
}

static void svcfs_cd_clear (void) {
  pthread_mutex_lock(&svcfs_cd_lock);
  if (svcfs_cd_marked) svcfs_cd_clear_locked();
  pthread_mutex_unlock(&svcfs_cd_lock);
}

/* (lock held) the live mark of path's parent directory, or NULL; *name: where the last component starts */
static svcfs_cd_dir *svcfs_cd_parent_locked (const char *path, const char **name) {
  const char *slash = strrchr(path, '/');
  if (slash == NULL) return NULL;
  size_t pl = slash == path ? 1 : (size_t) (slash - path);
  uint64_t now = uv_hrtime();
  for (uint32_t i = 0; i < SVCFS_CD_DIRS; i++) {
    svcfs_cd_dir *d = &svcfs_cd[i];
    if (d->path == NULL || d->expires <= now || strlen(d->path) != pl || strncmp(d->path, path, pl) != 0) continue;
    *name = slash + 1;
    return d;
  }
  return NULL;
}

/* (lock held) is path among the names made in a marked directory */
static int svcfs_cd_made_locked (const char *path) {
  for (svcfs_cd_name *e = svcfs_cd_names[svcfs_ac_hash(path, NULL)]; e; e = e->next) if (strcmp(e->path, path) == 0) return 1;
  return 0;
}

/* a name-making operation succeeded (FUSE thread): remember the path when its directory is marked */
static void svcfs_cd_made (const char *path) {
  const char *name = NULL;
  pthread_mutex_lock(&svcfs_cd_lock);
  if (svcfs_cd_marked && svcfs_cd_parent_locked(path, &name) != NULL && !svcfs_cd_made_locked(path)) {
    svcfs_cd_name *e = svcfs_cd_count < SVCFS_CD_NAMES_MAX ? malloc(sizeof(svcfs_cd_name) + strlen(path) + 1) : NULL;
    if (e == NULL) svcfs_cd_clear_locked(); /* full: forget it all, JavaScript answers */
    else {
      strcpy(e->path, path);
      uint32_t b = svcfs_ac_hash(path, NULL);
      e->next = svcfs_cd_names[b];
      svcfs_cd_names[b] = e;
      svcfs_cd_count++;
    }
  }
  pthread_mutex_unlock(&svcfs_cd_lock);
}

/* mkdir handed back a mark (FUSE thread): the new directory is empty for ms */
static void svcfs_cd_mark (const char *path, uint32_t ms, uint32_t maxpath) {
  size_t n = strlen(path);
  char *copy = malloc(n + 1);
  if (copy == NULL) return;
  memcpy(copy, path, n + 1);
  pthread_mutex_lock(&svcfs_cd_lock);
  uint64_t now = uv_hrtime();
  /* no mark alive: the names made under the old ones go with them */
  int alive = 0;
  for (uint32_t i = 0; i < SVCFS_CD_DIRS && !alive; i++) alive = svcfs_cd[i].path != NULL && svcfs_cd[i].expires > now;
  if (!alive && svcfs_cd_marked) svcfs_cd_clear_locked();
  /* the same path's slot, else a free or expired one, else the one that ends first */
  svcfs_cd_dir *slot = NULL;
  for (uint32_t i = 0; i < SVCFS_CD_DIRS; i++) {
    svcfs_cd_dir *d = &svcfs_cd[i];
    if (d->path != NULL && strcmp(d->path, path) == 0) { slot = d; break; }
    if (slot == NULL || (slot->path != NULL && (d->path == NULL || d->expires <= now || d->expires < slot->expires))) slot = d;
  }
  free(slot->path);
  slot->path = copy;
  slot->expires = now + (uint64_t) ms * 1000000ULL;
  slot->maxpath = maxpath;
  svcfs_cd_marked = 1;
  pthread_mutex_unlock(&svcfs_cd_lock);
}

/* getattr in the FUSE thread: 1 when path lies in a marked directory and this mount made no such name there since */
static int svcfs_cd_absent (const char *path) {
  int absent = 0;
  const char *name = NULL;
  pthread_mutex_lock(&svcfs_cd_lock);
  if (svcfs_cd_marked) {
    svcfs_cd_dir *d = svcfs_cd_parent_locked(path, &name);
    /* a name too long for the store is JavaScript's to refuse (ENAMETOOLONG) */
    if (d != NULL && name[0] != 0 && strlen(name) <= 255 && strlen(path) <= d->maxpath) absent = !svcfs_cd_made_locked(path);
  }
  pthread_mutex_unlock(&svcfs_cd_lock);
  return absent;
}

/* a changing operation ended (FUSE thread): names made go in, the rest keeps the marks or drops them */
static void svcfs_cd_after (fuse_thread_locals_t *l) {
  uint32_t op = l->op;
  if (op == op_create || op == op_mknod || op == op_mkdir || op == op_symlink || op == op_link) {
    const char *made = op == op_symlink || op == op_link ? l->dest : l->path;
    if (l->res < 0 || made == NULL || made[0] != '/') { svcfs_cd_clear(); return; }
    svcfs_cd_made(made);
    if (op == op_mkdir && l->svcfs_after_n > 2 && l->svcfs_after[36] > 0) svcfs_cd_mark(made, l->svcfs_after[36], l->svcfs_after[37]);
    return;
  }
  /* these change no names (unlink only takes one away: a made name that went is JavaScript's to answer) */
  if (op == op_unlink || op == op_chmod || op == op_chown || op == op_truncate || op == op_ftruncate || op == op_utimens ||
      op == op_setxattr || op == op_removexattr || op == op_open || op == op_fsyncdir) return;
  svcfs_cd_clear();
}

/* (12) a changing operation ended (FUSE thread): empty the table; what it handed back goes in if nothing else changed meanwhile */
static void svcfs_ac_end (fuse_thread_locals_t *l) {
  uint32_t n = l->svcfs_after_n;
  svcfs_cd_after(l);
  l->svcfs_after_n = 0;
  uint64_t gen = svcfs_ac_invalidate();
  if (n == 0 || gen != l->svcfs_gen + 1 || l->res < 0 || l->path == NULL || l->path[0] != '/') return;
  if (l->svcfs_after[0] != 0) svcfs_ac_put(gen, l->path, NULL, &l->svcfs_after[0]);
  const char *slash = strrchr(l->path, '/');
  size_t pl = slash == l->path ? 1 : (size_t) (slash - l->path);
  if (n > 1 && l->svcfs_after[18] != 0 && pl < 4096) {
    char parent[4096];
    memcpy(parent, l->path, pl);
    parent[pl] = 0;
    svcfs_ac_put(gen, parent, NULL, &l->svcfs_after[18]);
  }
}
`;

// (11) per open file, a range of its bytes held by JavaScript, answering reads inside it in the FUSE thread
const READ_WINDOW = `/* svcfs (11): per open file, one range of its bytes that JavaScript holds; reads inside it need no hop */
#define SVCFS_RW_SLOTS 4096
typedef struct { uint64_t fh; int64_t start; size_t len; char *data; napi_ref ref; } svcfs_rw_t;
static svcfs_rw_t svcfs_rw[SVCFS_RW_SLOTS];
static pthread_rwlock_t svcfs_rw_lock = PTHREAD_RWLOCK_INITIALIZER;

/* read in the FUSE thread: 1 when the whole range was copied from the file's window */
static int svcfs_rw_take (uint64_t fh, char *buf, size_t len, off_t offset) {
  int done = 0;
  svcfs_rw_t *w = &svcfs_rw[fh % SVCFS_RW_SLOTS];
  pthread_rwlock_rdlock(&svcfs_rw_lock);
  if (w->data != NULL && w->fh == fh && offset >= w->start && (int64_t) (offset + len) <= w->start + (int64_t) w->len) {
    memcpy(buf, w->data + (offset - w->start), len);
    done = 1;
  }
  pthread_rwlock_unlock(&svcfs_rw_lock);
  return done;
}

/* Fuse.svcfsWindow(fh, start, buffer | null), from JavaScript: the buffer is kept referenced while it is the window */
NAPI_METHOD(fuse_native_svcfs_window) {
  NAPI_ARGV(3)
  uint32_t fh = 0;
  int64_t start = 0;
  bool isbuf = false;
  char *data = NULL;
  size_t len = 0;
  napi_ref ref = NULL, old = NULL;
  napi_get_value_uint32(env, argv[0], &fh);
  napi_get_value_int64(env, argv[1], &start);
  napi_is_buffer(env, argv[2], &isbuf);
  if (isbuf) {
    napi_get_buffer_info(env, argv[2], (void **) &data, &len);
    napi_create_reference(env, argv[2], 1, &ref);
  }
  svcfs_rw_t *w = &svcfs_rw[fh % SVCFS_RW_SLOTS];
  pthread_rwlock_wrlock(&svcfs_rw_lock);
  /* a slot another open file holds is taken over (its reads go to JavaScript); clearing touches only one's own */
  if (isbuf || w->fh == fh) {
    old = w->ref;
    w->fh = fh; w->start = start; w->len = len; w->data = data; w->ref = ref;
  }
  pthread_rwlock_unlock(&svcfs_rw_lock);
  if (old != NULL) napi_delete_reference(env, old);
  return NULL;
}
`;

// (14) per open file, a staging file JavaScript registered: writes go there from the FUSE thread
const WRITE_FILES = `/* svcfs (14): writes of a registered handle go to its staging file from the FUSE thread */
#include <unistd.h>
#include <fcntl.h>
#include <errno.h>
#define SVCFS_WF_SLOTS 4096
/* fd1: the addon's copy of the descriptor plus one (0: none); lo, hi, count: what was written since JavaScript last asked */
typedef struct { uint64_t fh; int fd1; int64_t lo; int64_t hi; uint64_t count; } svcfs_wf_t;
static svcfs_wf_t svcfs_wf[SVCFS_WF_SLOTS];
/* writes hold it shared; registering and taking back hold it alone (no write is then under way) */
static pthread_rwlock_t svcfs_wf_lock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t svcfs_wf_stat = PTHREAD_MUTEX_INITIALIZER;
static napi_threadsafe_function svcfs_wf_tsfn = NULL;
static int svcfs_wf_told = 0;

/* write in the FUSE thread: 1 when the handle is registered (res: bytes written or -errno) */
static int svcfs_wf_write (uint64_t fh, const char *buf, size_t len, off_t offset, int *res) {
  svcfs_wf_t *w = &svcfs_wf[fh % SVCFS_WF_SLOTS];
  pthread_rwlock_rdlock(&svcfs_wf_lock);
  if (w->fd1 == 0 || w->fh != fh) {
    pthread_rwlock_unlock(&svcfs_wf_lock);
    return 0;
  }
  size_t done = 0;
  int err = 0;
  while (done < len) {
    ssize_t n = pwrite(w->fd1 - 1, buf + done, len - done, offset + (off_t) done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) { err = n < 0 ? errno : EIO; break; }
    done += (size_t) n;
  }
  int tell = 0;
  if (done > 0) {
    pthread_mutex_lock(&svcfs_wf_stat);
    int64_t end = (int64_t) offset + (int64_t) done;
    if (w->count == 0 || (int64_t) offset < w->lo) w->lo = offset;
    if (w->count == 0 || end > w->hi) w->hi = end;
    w->count++;
    if (!svcfs_wf_told && svcfs_wf_tsfn != NULL) { svcfs_wf_told = 1; tell = 1; }
    pthread_mutex_unlock(&svcfs_wf_stat);
  }
  pthread_rwlock_unlock(&svcfs_wf_lock);
  if (tell) napi_call_threadsafe_function(svcfs_wf_tsfn, NULL, napi_tsfn_nonblocking);
  *res = done > 0 ? (int) done : -err;
  return 1;
}

/* svcfs (18): the uploaded front of a big staging file leaves the page cache */
NAPI_METHOD(fuse_native_svcfs_recycle) {
  NAPI_ARGV(4)
  int32_t fd = -1;
  int64_t drop = 0, from = 0, to = 0;
  napi_get_value_int32(env, argv[0], &fd);
  napi_get_value_int64(env, argv[1], &drop);
  napi_get_value_int64(env, argv[2], &from);
  napi_get_value_int64(env, argv[3], &to);
  if (fd >= 0) {
    if (to > from && from >= 0) sync_file_range(fd, from, to - from, SYNC_FILE_RANGE_WRITE);
    if (drop > 0) posix_fadvise(fd, 0, drop, POSIX_FADV_DONTNEED);
  }
  return NULL;
}

/* Fuse.svcfsWriteFile(fh, fd): true when the addon writes fh's data to (a copy of) fd now; fd -1: no more */
NAPI_METHOD(fuse_native_svcfs_write_file) {
  NAPI_ARGV(2)
  uint32_t fh = 0;
  int32_t fd = -1;
  napi_get_value_uint32(env, argv[0], &fh);
  napi_get_value_int32(env, argv[1], &fd);
  int mine = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
  int old = -1, ok = fd < 0;
  svcfs_wf_t *w = &svcfs_wf[fh % SVCFS_WF_SLOTS];
  pthread_rwlock_wrlock(&svcfs_wf_lock);
  if (w->fh == fh && w->fd1 != 0) { old = w->fd1 - 1; w->fd1 = 0; }
  /* a slot another handle holds stays its own (what was written through it is not lost): this one writes through JavaScript */
  if (mine >= 0 && (w->fd1 == 0 && (w->fh == fh || w->count == 0))) {
    w->fh = fh; w->fd1 = mine + 1; w->count = 0;
    ok = 1;
    mine = -1;
  }
  pthread_rwlock_unlock(&svcfs_wf_lock);
  if (old >= 0) close(old);
  if (mine >= 0) close(mine);
  napi_value r;
  napi_get_boolean(env, ok, &r);
  return r;
}

/* Fuse.svcfsWritten(fh, out): how many writes since the last call; out (a Float64Array) gets [count, lo, hi] */
NAPI_METHOD(fuse_native_svcfs_written) {
  NAPI_ARGV(2)
  uint32_t fh = 0;
  napi_get_value_uint32(env, argv[0], &fh);
  napi_typedarray_type type;
  size_t length = 0, offset = 0;
  void *data = NULL;
  napi_value ab;
  napi_get_typedarray_info(env, argv[1], &type, &length, &data, &ab, &offset);
  double count = 0;
  if (type == napi_float64_array && length >= 3) {
    double *out = (double *) data;
    svcfs_wf_t *w = &svcfs_wf[fh % SVCFS_WF_SLOTS];
    pthread_mutex_lock(&svcfs_wf_stat);
    if (w->fh == fh && w->count > 0) {
      count = (double) w->count;
      out[0] = count; out[1] = (double) w->lo; out[2] = (double) w->hi;
      w->count = 0;
    }
    pthread_mutex_unlock(&svcfs_wf_stat);
  }
  napi_value r;
  napi_create_double(env, count, &r);
  return r;
}

static void svcfs_wf_call (napi_env env, napi_value fn, void *context, void *data) {
  if (env == NULL || fn == NULL) return;
  pthread_mutex_lock(&svcfs_wf_stat);
  svcfs_wf_told = 0;
  pthread_mutex_unlock(&svcfs_wf_stat);
  napi_value undef;
  napi_get_undefined(env, &undef);
  napi_call_function(env, undef, fn, 0, NULL, NULL);
}

/* Fuse.svcfsOnWrites(fn): fn() runs in the JavaScript thread after writes it was not told of (once per batch) */
NAPI_METHOD(fuse_native_svcfs_on_writes) {
  NAPI_ARGV(1)
  if (svcfs_wf_tsfn == NULL) {
    napi_value name;
    napi_create_string_utf8(env, "svcfs writes", NAPI_AUTO_LENGTH, &name);
    napi_create_threadsafe_function(env, argv[0], NULL, name, 0, 1, NULL, NULL, NULL, svcfs_wf_call, &svcfs_wf_tsfn);
    napi_unref_threadsafe_function(env, svcfs_wf_tsfn);
  }
  return NULL;
}
`;

const edits = [
  // 14: the registered staging files, the write handler's shortcut, the exports
  ['// Methods\n\nFUSE_METHOD(statfs', `${WRITE_FILES}\n// Methods\n\nFUSE_METHOD(statfs`],
  ['FUSE_METHOD(write, 6, 2, (const char *path, const char *buf, size_t len, off_t offset, struct fuse_file_info *info), {\n  l->path = path;',
    'FUSE_METHOD(write, 6, 2, (const char *path, const char *buf, size_t len, off_t offset, struct fuse_file_info *info), {\n' +
    '  int svcfs_res = 0;\n  if (info != NULL && svcfs_wf_write(info->fh, buf, len, offset, &svcfs_res)) {\n    svcfs_ac_forget(path);\n    return svcfs_res;\n  }\n  l->path = path;'],
  // 11: the window, the read handler's shortcut, the export
  ['// Methods\n\nFUSE_METHOD(statfs', `${READ_WINDOW}\n// Methods\n\nFUSE_METHOD(statfs`],
  ['FUSE_METHOD(read, 6, 2, (const char *path, char *buf, size_t len, off_t offset, struct fuse_file_info *info), {\n  l->path = path;',
    'FUSE_METHOD(read, 6, 2, (const char *path, char *buf, size_t len, off_t offset, struct fuse_file_info *info), {\n  if (info != NULL && svcfs_rw_take(info->fh, buf, len, offset)) return (int) len;\n  l->path = path;'],
  ['  NAPI_EXPORT_FUNCTION(fuse_native_unmount)\n', '  NAPI_EXPORT_FUNCTION(fuse_native_unmount)\n  NAPI_EXPORT_FUNCTION(fuse_native_svcfs_window)\n  NAPI_EXPORT_FUNCTION(fuse_native_svcfs_forget)\n  NAPI_EXPORT_FUNCTION(fuse_native_svcfs_negative)\n  NAPI_EXPORT_FUNCTION(fuse_native_svcfs_write_file)\n  NAPI_EXPORT_FUNCTION(fuse_native_svcfs_written)\n  NAPI_EXPORT_FUNCTION(fuse_native_svcfs_on_writes)\n  NAPI_EXPORT_FUNCTION(fuse_native_svcfs_recycle)\n'],
  // 1 (and the reason the old patch, which only did this, may be present)
  ['FUSE_UINT64_TO_INTS_ARGV(l->atime, 5)', 'FUSE_UINT64_TO_INTS_ARGV(l->mtime, 5)'],
  // 2
  ['  l->atime = timespec_to_uint64(&tv[0]);\n  l->mtime = timespec_to_uint64(&tv[1]);',
    '  l->atime = utime_arg(&tv[0]);\n  l->mtime = utime_arg(&tv[1]);'],
  ['static void populate_stat (',
    '#define SVCFS_UTIME_NOW 9007199254740990ULL\n#define SVCFS_UTIME_OMIT 9007199254740991ULL\n' +
    'static uint64_t utime_arg (const struct timespec* ts) {\n' +
    '  if (ts->tv_nsec == UTIME_NOW) return SVCFS_UTIME_NOW;\n' +
    '  if (ts->tv_nsec == UTIME_OMIT) return SVCFS_UTIME_OMIT;\n' +
    '  return timespec_to_uint64(ts);\n}\n\nstatic void populate_stat ('],
  // 3: caller fields first in the thread locals (the buffer JS holds), filled before each dispatch
  ['typedef struct {\n  napi_ref self;', `typedef struct {\n  uint32_t caller_uid;\n  uint32_t caller_gid;\n  uint32_t caller_pid;\n  uint32_t caller_umask;\n  napi_ref self;`],
  ['  fuse_thread_locals_t *l = get_thread_locals();\\\n  l->op = op_##name;\\',
    '  fuse_thread_locals_t *l = get_thread_locals();\\\n  {\\\n    struct fuse_context *fc = fuse_get_context();\\\n' +
    '    l->caller_uid = fc->uid; l->caller_gid = fc->gid; l->caller_pid = fc->pid; l->caller_umask = fc->umask;\\\n  }\\\n  l->op = op_##name;\\'],
  // 8 (the open handler's signal block: the one opendir follows)
  ['  NAPI_ARGV_INT32(fd, 2)\n  if (fd != 0) {\n    l->info->fh = fd;\n  }\n})\n\nFUSE_METHOD(opendir,',
    '  NAPI_ARGV_INT32(fd, 2)\n  if (fd & 0x40000000) {\n    l->info->keep_cache = 1;\n    fd &= ~0x40000000;\n  }\n' +
    // (16) bit 29: direct_io for this handle
    '  if (fd & 0x20000000) {\n    l->info->direct_io = 1;\n    fd &= ~0x20000000;\n  }\n  if (fd != 0) {\n    l->info->fh = fd;\n  }\n})\n\nFUSE_METHOD(opendir,'],
  // 9 (the Linux getxattr, without the macOS position argument)
  ['FUSE_METHOD(getxattr, 4, 1, (const char *path, const char *name, char *value, size_t size), {\n  l->path = path;',
    'FUSE_METHOD(getxattr, 4, 1, (const char *path, const char *name, char *value, size_t size), {\n  if (strncmp(name, "user.", 5) != 0) return -ENOTSUP;\n  l->path = path;'],
  // 10: the cache, its generation in the thread locals, the handler hooks
  ['  uint32_t caller_umask;\n  napi_ref self;', '  uint32_t caller_umask;\n  napi_ref self;\n  uint64_t svcfs_gen;\n  uint32_t svcfs_after_n;\n  uint32_t svcfs_after[54];'],
  ['// Methods\n\nFUSE_METHOD(statfs', `${ATTR_CACHE}\n// Methods\n\nFUSE_METHOD(statfs`],
  ['  blk\\\n  uv_async_send(&(l->async));\\\n  uv_sem_wait(&(l->sem));\\\n  return l->res;',
    '  blk\\\n  int svcfs_change = svcfs_ac_begin(op_##name, l);\\\n  uv_async_send(&(l->async));\\\n  uv_sem_wait(&(l->sem));\\\n  if (svcfs_change == 2) svcfs_ac_forget(l->path);\\\n  else if (svcfs_change) svcfs_ac_end(l);\\\n  else if (op_##name == op_getattr && l->res == -ENOENT && svcfs_neg_life_ns > 0 && l->path != NULL) svcfs_ac_add(l->svcfs_gen, l->path, NULL, NULL, 1);\\\n  return l->res;'],
  // (12) the attributes changing operations hand back, and fgetattr answered from the table as getattr is
  ['FUSE_METHOD(fgetattr, 2, 1, (const char *path, struct stat *stat, struct fuse_file_info *info), {\n  l->path = path;',
    'FUSE_METHOD(fgetattr, 2, 1, (const char *path, struct stat *stat, struct fuse_file_info *info), {\n  int svcfs_hit = path != NULL ? svcfs_ac_take(path, stat) : 0;\n  if (svcfs_hit) return svcfs_hit > 0 ? 0 : -ENOENT;\n  l->path = path;'],
  ['FUSE_METHOD(create, 2, 1, (const char *path, mode_t mode, struct fuse_file_info *info), {', 'FUSE_METHOD(create, 2, 2, (const char *path, mode_t mode, struct fuse_file_info *info), {'],
  ['  NAPI_ARGV_INT32(fd, 2)\n  if (fd != 0) {\n    l->info->fh = fd;\n  }\n})\n\nFUSE_METHOD_VOID(utimens,',
    '  NAPI_ARGV_INT32(fd, 2)\n  if (fd != 0) {\n    l->info->fh = fd;\n  }\n  svcfs_ac_after(env, argv[3], l);\n})\n\nFUSE_METHOD_VOID(utimens,'],
  ['FUSE_METHOD_VOID(unlink, 1, 0, (const char *path), {\n  l->path = path;\n}, {\n  napi_create_string_utf8(env, l->path, NAPI_AUTO_LENGTH, &(argv[2]));\n})',
    'FUSE_METHOD(unlink, 1, 1, (const char *path), {\n  l->path = path;\n}, {\n  napi_create_string_utf8(env, l->path, NAPI_AUTO_LENGTH, &(argv[2]));\n}, {\n  svcfs_ac_after(env, argv[2], l);\n})'],
  ['FUSE_METHOD_VOID(rmdir, 1, 0, (const char *path), {\n  l->path = path;\n}, {\n  napi_create_string_utf8(env, l->path, NAPI_AUTO_LENGTH, &(argv[2]));\n})',
    'FUSE_METHOD(rmdir, 1, 1, (const char *path), {\n  l->path = path;\n}, {\n  napi_create_string_utf8(env, l->path, NAPI_AUTO_LENGTH, &(argv[2]));\n}, {\n  svcfs_ac_after(env, argv[2], l);\n})'],
  ['FUSE_METHOD_VOID(mkdir, 2, 0, (const char *path, mode_t mode), {\n  l->path = path;\n  l->mode = mode;\n}, {\n  napi_create_string_utf8(env, l->path, NAPI_AUTO_LENGTH, &(argv[2]));\n  napi_create_uint32(env, l->mode, &(argv[3]));\n})',
    'FUSE_METHOD(mkdir, 2, 1, (const char *path, mode_t mode), {\n  l->path = path;\n  l->mode = mode;\n}, {\n  napi_create_string_utf8(env, l->path, NAPI_AUTO_LENGTH, &(argv[2]));\n  napi_create_uint32(env, l->mode, &(argv[3]));\n}, {\n  svcfs_ac_after(env, argv[2], l);\n})'],
  ['FUSE_METHOD(getattr, 1, 1, (const char *path, struct stat *stat), {\n  l->path = path;',
    'FUSE_METHOD(getattr, 1, 1, (const char *path, struct stat *stat), {\n  int svcfs_hit = path != NULL ? svcfs_ac_take(path, stat) : 0;\n  if (svcfs_hit) return svcfs_hit > 0 ? 0 : -ENOENT;\n  if (path != NULL && svcfs_cd_absent(path)) return -ENOENT;\n  l->path = path;'],
  ['      int err = l->readdir_filler((char *) l->buf, name, (struct stat *) &st, 0);',
    '      int err = l->readdir_filler((char *) l->buf, name, st.st_mode ? (struct stat *) &st : NULL, 0);\n      if (st.st_mode && l->path) svcfs_ac_put(l->svcfs_gen, l->path, name, stats_array);'],
  // the stats may come as one Uint32Array of 18 ints per name (no object per entry: 100,000 of them were ~10 MiB)
  ['  napi_get_array_length(env, argv[3], &stats_length);\n',
    '  bool svcfs_listed = true;\n  uint32_t *svcfs_flat = NULL;\n  napi_is_array(env, argv[3], &svcfs_listed);\n' +
    '  if (svcfs_listed) napi_get_array_length(env, argv[3], &stats_length);\n' +
    '  else { size_t n = 0; napi_get_buffer_info(env, argv[3], (void **) &svcfs_flat, &n); stats_length = n / (18 * sizeof(uint32_t)); }\n'],
  ['      napi_value raw_stat;\n      napi_get_element(env, raw_stats, i, &raw_stat);\n\n      NAPI_BUFFER_CAST(uint32_t*, stats_array, raw_stat);\n',
    '      uint32_t *stats_array = svcfs_flat + (size_t) i * 18;\n      if (svcfs_flat == NULL) {\n        napi_value raw_stat;\n        napi_get_element(env, raw_stats, i, &raw_stat);\n        NAPI_BUFFER_CAST(uint32_t*, one, raw_stat);\n        stats_array = one;\n      }\n'],
  // 4
  ['  struct fuse_operations ops = { };\n', '  struct fuse_operations ops = { };\n  ops.flag_nullpath_ok = 1;\n  ops.flag_utime_omit_ok = 1;\n'],
  ['napi_create_string_utf8(env, l->path, NAPI_AUTO_LENGTH', 'napi_create_string_utf8(env, l->path ? l->path : "", NAPI_AUTO_LENGTH'],
];
for (const [from, to] of edits) {
  if (text.includes(to)) continue;
  if (!text.includes(from)) throw new Error(`patch-fuse-native: fuse-native.c does not contain the expected text: ${from.slice(0, 60)}`);
  text = text.split(from).join(to);
}
text = `${MARK}\n#define _GNU_SOURCE\n${text.replace(/^\/\* svcfs patch \d+ \*\/\n(#define _GNU_SOURCE\n)?/, '')}`;
fs.writeFileSync(src, text);
/** node-gyp: a copy beside us, else the one npm runs install scripts with, else npm's own. */
function nodeGyp() {
  try {
    return require.resolve('node-gyp/bin/node-gyp.js', { paths: [path.join(__dirname, '..'), dir] });
  } catch {
    if (process.env.npm_config_node_gyp && fs.existsSync(process.env.npm_config_node_gyp)) return process.env.npm_config_node_gyp;
    const npmOwn = path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
    if (fs.existsSync(npmOwn)) return npmOwn;
    throw new Error('patch-fuse-native: node-gyp not found (npm install -g node-gyp)');
  }
}
const gyp = nodeGyp();
process.stderr.write('svcfs: patching fuse-native (utimens times, caller context) and rebuilding it\n');
// Build against the local Node headers, as npm does for install scripts (no download).
const nodedir = process.env.npm_config_nodedir || ['/usr', '/usr/local'].find((d) => fs.existsSync(path.join(d, 'include', 'node', 'node_api.h')));
const args = [gyp, 'rebuild', '--release', '--loglevel=error', ...(nodedir ? [`--nodedir=${nodedir}`] : [])];
execFileSync(process.execPath, args, { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
