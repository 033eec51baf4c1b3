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
//  9. getxattr of a name outside user.* answers ENODATA in the FUSE thread, as
//     the filesystem would (src/fs/metadata.ts): `ls -l` asks for
//     security.selinux and system.posix_acl_access of every entry, and each
//     trip to JavaScript costs a thread hop.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const dir = path.join(__dirname, '..', 'node_modules', 'fuse-native');
const src = path.join(dir, 'fuse-native.c');
if (!fs.existsSync(src)) process.exit(0);
const MARK = '/* svcfs patch 7 */';
const jsFile = path.join(dir, 'index.js');
// (6, 7) plain JavaScript: no rebuild needed
const jsEdits = [
  ['    this.ops.getattr(path, (err, stat) => {\n      if (err) return signal(err)\n', '    this.ops.fgetattr(path, fd, (err, stat) => {\n      if (err) return signal(err)\n'],
  ['  ints[6] = (stat && stat.nlink) || 1\n', "  ints[6] = (stat && typeof stat.nlink === 'number') ? stat.nlink : 1\n"],
];
let js = fs.readFileSync(jsFile, 'utf8');
for (const [from, to] of jsEdits) {
  if (js.includes(to)) continue;
  if (!js.includes(from)) throw new Error(`patch-fuse-native: index.js does not contain the expected text: ${from.slice(0, 60)}`);
  js = js.replace(from, to);
}
fs.writeFileSync(jsFile, js);
let text = fs.readFileSync(src, 'utf8');
const built = fs.existsSync(path.join(dir, 'build', 'Release', 'fuse.node'));
if (text.includes(MARK) && built) process.exit(0);

const edits = [
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
    '  NAPI_ARGV_INT32(fd, 2)\n  if (fd & 0x40000000) {\n    l->info->keep_cache = 1;\n    fd &= ~0x40000000;\n  }\n  if (fd != 0) {\n    l->info->fh = fd;\n  }\n})\n\nFUSE_METHOD(opendir,'],
  // 9 (the Linux getxattr, without the macOS position argument)
  ['FUSE_METHOD(getxattr, 4, 1, (const char *path, const char *name, char *value, size_t size), {\n  l->path = path;',
    'FUSE_METHOD(getxattr, 4, 1, (const char *path, const char *name, char *value, size_t size), {\n  if (strncmp(name, "user.", 5) != 0) return -ENODATA;\n  l->path = path;'],
  // 4
  ['  struct fuse_operations ops = { };\n', '  struct fuse_operations ops = { };\n  ops.flag_nullpath_ok = 1;\n  ops.flag_utime_omit_ok = 1;\n'],
  ['napi_create_string_utf8(env, l->path, NAPI_AUTO_LENGTH', 'napi_create_string_utf8(env, l->path ? l->path : "", NAPI_AUTO_LENGTH'],
];
for (const [from, to] of edits) {
  if (text.includes(to)) continue;
  if (!text.includes(from)) throw new Error(`patch-fuse-native: fuse-native.c does not contain the expected text: ${from.slice(0, 60)}`);
  text = text.split(from).join(to);
}
if (!text.startsWith(MARK)) text = `${MARK}\n${text}`;
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
