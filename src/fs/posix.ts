// POSIX rules the mount applies on top of the bucket: name limits, who owns a
// new entry, how utimensat's special times arrive, and directory times.
import { Attr, S_IFDIR } from './attrs';
import type { Caller } from './caller';
import { E, fsError } from './errors';

/** The longest file name (bytes), as reported by statfs. */
export const NAME_MAX = 255;
/** The longest key the service accepts (bytes). */
export const KEY_MAX = 1024;

/**
 * ENAMETOOLONG for a component over NAME_MAX bytes or a key over KEY_MAX
 * bytes (which the store would refuse), before any request is made.
 */
export function checkName(path: string, key: string): void {
  for (const part of path.split('/')) if (Buffer.byteLength(part) > NAME_MAX) throw fsError(E.ENAMETOOLONG);
  if (Buffer.byteLength(key) > KEY_MAX) throw fsError(E.ENAMETOOLONG);
}

export function parentOf(path: string): string {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

const S_ISGID = 0o2000;

/**
 * Owner and mode of a new entry: the caller's uid; the caller's gid, or the
 * parent's when the parent has the set-group-ID bit (which new directories
 * inherit), as Linux filesystems do.
 */
export function newOwner(parent: Attr | null, who: Caller, mode: number): { uid: number; gid: number; mode: number } {
  const inherit = parent !== null && (parent.mode & S_ISGID) !== 0;
  const isDir = (mode & 0o170000) === S_IFDIR;
  return { uid: who.uid, gid: inherit ? parent!.gid : who.gid, mode: inherit && isDir ? mode | S_ISGID : mode };
}

// utimensat's UTIME_NOW and UTIME_OMIT, as the patched fuse-native passes them
// (scripts/patch-fuse-native.js); an unpatched build passes a time in the first
// seconds of 1970 for both.
const UTIME_NOW = 2 ** 53 - 2;
const UTIME_OMIT = 2 ** 53 - 1;

/** The time to set (ms), or undefined to leave it as it is. */
export function utimeArg(t: number, now: number): number | undefined {
  if (t === UTIME_OMIT) return undefined;
  if (t === UTIME_NOW || t < 10_000) return now;
  return t;
}

/**
 * Modification and change times of directories, moved by entries created,
 * removed or renamed through this mount. They are kept in memory only (the
 * most recent `limit` directories): recording them in the bucket would cost a
 * request per change to the directory.
 */
export class DirTimes {
  private readonly times = new Map<string, number>();

  constructor(private readonly limit = 10_000) {}

  /** Entries of these directories changed now. */
  touch(...dirs: string[]): void {
    const now = Date.now();
    for (const d of dirs) {
      this.times.delete(d);
      this.times.set(d, now);
      if (this.times.size > this.limit) this.times.delete(this.times.keys().next().value as string);
    }
  }

  /** A directory's attributes with the later of the recorded and the remembered times. */
  apply(path: string, a: Attr): Attr {
    const t = this.times.get(path);
    if (t === undefined || (t <= a.mtime && t <= a.ctime)) return a;
    return { ...a, mtime: Math.max(a.mtime, t), ctime: Math.max(a.ctime, t) };
  }

  /** This directory's times were set explicitly. */
  drop(path: string): void {
    this.times.delete(path);
  }

  /** The directory and everything below it is gone or moved. */
  forget(path: string): void {
    for (const k of [...this.times.keys()]) if (k === path || k.startsWith(path + '/')) this.times.delete(k);
  }
}
