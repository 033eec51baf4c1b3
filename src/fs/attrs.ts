// File attributes and how they are kept in user metadata, with the names
// s3fs and rclone use (mode, uid, gid, mtime, ctime, atime, rdev), so buckets
// written by either look right. Missing values fall back to the mount's
// defaults. Special files (fifos, sockets, devices) are empty objects whose
// mode carries the type, as s3fs keeps them.
import { constants } from 'node:fs';

export const S_IFMT = constants.S_IFMT;
export const S_IFREG = constants.S_IFREG;
export const S_IFDIR = constants.S_IFDIR;
export const S_IFLNK = constants.S_IFLNK;

export type Kind = 'file' | 'dir' | 'symlink' | 'special';

/** Is this file type a fifo, socket or device (kept as an empty object)? */
export function isSpecialType(type: number): boolean {
  return type === constants.S_IFIFO || type === constants.S_IFSOCK || type === constants.S_IFCHR || type === constants.S_IFBLK;
}

export interface Attr {
  kind: Kind;
  mode: number; // with file type bits
  uid: number;
  gid: number;
  size: number;
  mtime: number; // ms
  ctime: number; // ms
  atime?: number; // ms (mtime when not recorded)
  /** device number of a character or block device */
  rdev?: number;
  /** 0 for an open file that was unlinked; otherwise 1 (2 for directories) */
  nlink?: number;
  etag?: string;
  /** all user metadata of the object, as stored */
  meta: Record<string, string>;
  /** true when mode/uid/gid came from the object (not defaults) */
  fromMeta: boolean;
  /**
   * from a listing that carried no metadata (stores without the listing
   * extension): mode, owner and times may be defaults until a HEAD completes them
   */
  partial?: boolean;
}

export interface AttrDefaults {
  uid: number;
  gid: number;
  umask: number;
  /** for implicit directories */
  mountTime: number;
}

function num(v: string | undefined): number | undefined {
  if (v === undefined || v.trim() === '') return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

/** Attributes of an object (file, symlink or directory marker) from its size, time and metadata. */
export function attrFromObject(d: AttrDefaults, o: { size: number; lastModified: Date; etag?: string; meta: Record<string, string> }, isDirMarker = false): Attr {
  const m = o.meta;
  const rawMode = num(m.mode);
  const rawType = rawMode !== undefined ? rawMode & S_IFMT : 0;
  let kind: Kind = isDirMarker ? 'dir' : 'file';
  if (!isDirMarker && rawType === S_IFLNK) kind = 'symlink';
  if (!isDirMarker && isSpecialType(rawType)) kind = 'special';
  if (rawType === S_IFDIR) kind = 'dir';
  const type = kind === 'dir' ? S_IFDIR : kind === 'symlink' ? S_IFLNK : kind === 'special' ? rawType : S_IFREG;
  const perm = rawMode !== undefined ? rawMode & 0o7777 : (kind === 'dir' ? 0o777 : kind === 'symlink' ? 0o777 : 0o666) & ~d.umask;
  const secs = (v: string | undefined) => (num(v) !== undefined ? num(v)! * 1000 : undefined);
  const mtime = secs(m.mtime) ?? o.lastModified.getTime();
  const rdev = kind === 'special' ? num(m.rdev) : undefined;
  return {
    kind, mode: type | perm, uid: num(m.uid) ?? d.uid, gid: num(m.gid) ?? d.gid, size: kind === 'dir' ? 4096 : kind === 'special' ? 0 : o.size,
    mtime, ctime: secs(m.ctime) ?? mtime, atime: secs(m.atime), rdev, etag: o.etag, meta: { ...m }, fromMeta: rawMode !== undefined,
  };
}

export function implicitDir(d: AttrDefaults): Attr {
  return { kind: 'dir', mode: S_IFDIR | (0o777 & ~d.umask), uid: d.uid, gid: d.gid, size: 4096, mtime: d.mountTime, ctime: d.mountTime, meta: {}, fromMeta: false };
}

const seconds = (ms: number) => (ms / 1000).toFixed(3).replace(/\.?0+$/, '');

/** The metadata that records an attribute set (merged over the object's other metadata). */
export function metaFromAttr(a: Pick<Attr, 'mode' | 'uid' | 'gid' | 'mtime' | 'meta'> & Partial<Pick<Attr, 'ctime' | 'atime' | 'rdev'>>): Record<string, string> {
  const m: Record<string, string> = {
    ...a.meta,
    mode: String(a.mode),
    uid: String(a.uid),
    gid: String(a.gid),
    mtime: seconds(a.mtime),
  };
  if (a.ctime !== undefined) m.ctime = seconds(a.ctime);
  if (a.atime !== undefined) m.atime = seconds(a.atime);
  if (a.rdev) m.rdev = String(a.rdev);
  return m;
}

/** Length of one stat in fuse-native's array form (index.js getStatArray). */
export const STAT_INTS = 18;

/**
 * toStat's values written straight into fuse-native's array form at `at`: a
 * listing of 100,000 entries passes one array instead of 100,000 objects,
 * three Dates each and the typed arrays fuse-native would make of them.
 */
export function writeStat(a: Attr, out: Uint32Array, at: number): void {
  const two = (i: number, v: number) => {
    out[at + i] = v % 4294967296;
    out[at + i + 1] = Math.floor(v / 4294967296);
  };
  out[at] = a.mode;
  out[at + 1] = a.uid;
  out[at + 2] = a.gid;
  two(3, a.size);
  out[at + 6] = a.nlink ?? (a.kind === 'dir' ? 2 : 1);
  out[at + 8] = a.rdev ?? 0;
  out[at + 9] = 4096;
  two(10, Math.ceil(a.size / 512));
  two(12, a.atime ?? a.mtime);
  two(14, a.mtime);
  two(16, a.ctime);
}

/** The shape fuse-native wants. */
export function toStat(a: Attr, ino?: number) {
  return {
    mode: a.mode, uid: a.uid, gid: a.gid, size: a.size, nlink: a.nlink ?? (a.kind === 'dir' ? 2 : 1),
    mtime: new Date(a.mtime), atime: new Date(a.atime ?? a.mtime), ctime: new Date(a.ctime),
    blksize: 4096, blocks: Math.ceil(a.size / 512), ino: ino ?? 0, rdev: a.rdev ?? 0,
  };
}
