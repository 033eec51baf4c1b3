// Extended attributes kept in user metadata. `user.svc.meta.<name>` is the
// metadata entry <name> itself; any other `user.*` attribute (desktop apps set
// user.xdg.*, cp -a and rsync -X copy them) lives, the way s3fs keeps it, in
// one entry `xattr`: URL-encoded JSON of {"name": "<base64 of value>"}.
// Object tags (`user.svc.tag.<key>`) are handled by the filesystem.
export const TAG = 'user.svc.tag.';
export const META = 'user.svc.meta.';
const BAG = 'xattr';

function bag(meta: Record<string, string>): Record<string, string> {
  const raw = meta[BAG];
  if (!raw) return {};
  try {
    const v = JSON.parse(decodeURIComponent(raw));
    return v && typeof v === 'object' ? v : {};
  } catch {
    return {};
  }
}

export function get(meta: Record<string, string>, name: string): Buffer | undefined {
  if (name.startsWith(META)) {
    const v = meta[name.slice(META.length)];
    return v === undefined ? undefined : Buffer.from(v, 'latin1');
  }
  const v = bag(meta)[name];
  return v === undefined ? undefined : Buffer.from(v, 'base64');
}

export function list(meta: Record<string, string>): string[] {
  return [...Object.keys(meta).filter((k) => k !== BAG).map((k) => META + k), ...Object.keys(bag(meta))];
}

export function set(meta: Record<string, string>, name: string, value: Buffer): Record<string, string> {
  const out = { ...meta };
  if (name.startsWith(META)) {
    const k = name.slice(META.length).toLowerCase();
    if (!/^[a-z0-9!#$%&'*+.^_`|~-]+$/.test(k)) throw Object.assign(new Error('invalid metadata name'), { code: 'EINVAL' });
    out[k] = value.toString('latin1');
    return out;
  }
  const b = bag(meta);
  b[name] = value.toString('base64');
  out[BAG] = encodeURIComponent(JSON.stringify(b));
  return out;
}

export function remove(meta: Record<string, string>, name: string): Record<string, string> {
  const out = { ...meta };
  if (name.startsWith(META)) {
    delete out[name.slice(META.length)];
    return out;
  }
  const b = bag(meta);
  delete b[name];
  if (Object.keys(b).length) out[BAG] = encodeURIComponent(JSON.stringify(b));
  else delete out[BAG];
  return out;
}
