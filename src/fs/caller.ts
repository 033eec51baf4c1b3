// Who made the request being served: uid, gid, pid and umask from libfuse's
// fuse_get_context(), which scripts/patch-fuse-native.js has fuse-native write
// at the start of the per-thread buffer handed to every handler. New files
// belong to their creator (as on any local filesystem, and as pjdfstest and
// allow_other users expect); the kernel (default_permissions) checks access
// against the owners and modes the mount reports.
import { readFileSync } from 'node:fs';

export interface Caller {
  uid: number;
  gid: number;
  pid: number;
  umask: number;
}

let self: Caller = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0, pid: process.pid, umask: 0 };
let current: Caller = self;

/** Who owns new entries when the caller is not known (the mount's uid= and gid=). */
export function setFallbackCaller(uid: number, gid: number): void {
  self = { ...self, uid, gid };
  current = self;
}

/** The caller of the operation whose handler is running now (read it before the first await). */
export function caller(): Caller {
  return current;
}

type Handler = (buf: Buffer, ...rest: unknown[]) => unknown;

/**
 * Wrap fuse-native's handler table so that each operation records its caller
 * before the filesystem sees it. Without the patch the buffer starts with
 * other fields: then the mount's own identity stands for every caller.
 */
export function recordCallers(fuse: { _handlers: (Handler | undefined)[] }): boolean {
  if (!patched()) return false;
  fuse._handlers = fuse._handlers.map((h) => h && ((buf: Buffer, ...rest: unknown[]) => {
    current = Buffer.isBuffer(buf) && buf.length >= 16
      ? { uid: buf.readUInt32LE(0), gid: buf.readUInt32LE(4), pid: buf.readUInt32LE(8), umask: buf.readUInt32LE(12) }
      : self;
    return h(buf, ...rest);
  }));
  return true;
}

/**
 * Bit 30 of the handle open returns: keep the kernel's page cache of the file
 * (the patched addon sets keep_cache and clears the bit).
 */
export const KEEP_CACHE = 0x40000000;
/** Bit 29: direct I/O on this handle (patch 16 of the addon sets direct_io and clears the bit). */
export const DIRECT_IO = 0x20000000;
/** Handles stay below the bits open may add. */
export const HANDLE_LIMIT = DIRECT_IO;

/** The version of the install-time patch the addon's source carries (0: none); the build follows it. */
export function patchLevel(): number {
  try {
    const m = /svcfs patch (\d+)/.exec(readFileSync(require.resolve('fuse-native/fuse-native.c'), 'utf8').slice(0, 100));
    return m === null ? 0 : Number(m[1]);
  } catch {
    return 0;
  }
}

/** Patch 7 brought the caller and keep_cache. */
export function patched(): boolean {
  return patchLevel() >= 7;
}
