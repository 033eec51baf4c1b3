// File attributes and how they are kept in user metadata, with the names
// s3fs and rclone use (mode, uid, gid, mtime), so buckets written by either
// look right. Missing values fall back to the mount's defaults.
import { constants } from 'node:fs';

export const S_IFMT = constants.S_IFMT;
export const S_IFREG = constants.S_IFREG;
export const S_IFDIR = constants.S_IFDIR;
export const S_IFLNK = constants.S_IFLNK;

export type Kind = 'file' | 'dir' | 'symlink';

export interface Attr {
  kind: Kind;
  mode: number; // with file type bits
  uid: number;
  gid: number;
  size: number;
  mtime: number; // ms
  ctime: number; // ms
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
  let kind: Kind = isDirMarker ? 'dir' : 'file';
  if (!isDirMarker && rawMode !== undefined && (rawMode & S_IFMT) === S_IFLNK) kind = 'symlink';
  if (rawMode !== undefined && (rawMode & S_IFMT) === S_IFDIR) kind = 'dir';
  const type = kind === 'dir' ? S_IFDIR : kind === 'symlink' ? S_IFLNK : S_IFREG;
  const perm = rawMode !== undefined ? rawMode & 0o7777 : (kind === 'dir' ? 0o777 : kind === 'symlink' ? 0o777 : 0o666) & ~d.umask;
  const mtimeSec = num(m.mtime);
  const mtime = mtimeSec !== undefined ? mtimeSec * 1000 : o.lastModified.getTime();
  return {
    kind, mode: type | perm, uid: num(m.uid) ?? d.uid, gid: num(m.gid) ?? d.gid, size: kind === 'dir' ? 4096 : o.size,
    mtime, ctime: num(m.ctime) !== undefined ? num(m.ctime)! * 1000 : mtime, etag: o.etag, meta: { ...m }, fromMeta: rawMode !== undefined,
  };
}

export function implicitDir(d: AttrDefaults): Attr {
  return { kind: 'dir', mode: S_IFDIR | (0o777 & ~d.umask), uid: d.uid, gid: d.gid, size: 4096, mtime: d.mountTime, ctime: d.mountTime, meta: {}, fromMeta: false };
}

/** The metadata that records an attribute set (merged over the object's other metadata). */
export function metaFromAttr(a: Pick<Attr, 'mode' | 'uid' | 'gid' | 'mtime' | 'meta'>): Record<string, string> {
  return {
    ...a.meta,
    mode: String(a.mode),
    uid: String(a.uid),
    gid: String(a.gid),
    mtime: (a.mtime / 1000).toFixed(3).replace(/\.?0+$/, ''),
  };
}

/** The shape fuse-native wants. */
export function toStat(a: Attr, ino?: number) {
  return {
    mode: a.mode, uid: a.uid, gid: a.gid, size: a.size, nlink: a.kind === 'dir' ? 2 : 1,
    mtime: new Date(a.mtime), atime: new Date(a.mtime), ctime: new Date(a.ctime),
    blksize: 4096, blocks: Math.ceil(a.size / 512), ino: ino ?? 0,
  };
}
