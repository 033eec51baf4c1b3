// Credentials and mount options for the command line.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Credentials } from '../wire/signer';

export class UsageError extends Error {
  constructor(message: string, readonly exitCode = 2) {
    super(message);
  }
}

export function configDir(): string {
  return path.join(process.env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config'), 'svcfs');
}

export function cacheDir(): string {
  return path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'svcfs');
}

/** `[profile]` sections of `key = value` lines. */
export function parseIni(text: string): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  let section = 'default';
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#') || line.startsWith(';')) continue;
    const m = /^\[\s*(?:profile\s+)?([^\]]+?)\s*\]$/.exec(line);
    if (m) {
      section = m[1];
      continue;
    }
    const at = line.indexOf('=');
    if (at < 0) continue;
    (out[section] ??= {})[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
  }
  return out;
}

/**
 * Credentials: SVC_ACCESS_KEY_ID and SVC_SECRET_ACCESS_KEY, else the profile of
 * a credentials file that only its owner can read.
 */
export function loadCredentials(o: { credentials?: string; profile?: string }): Credentials {
  const ak = process.env.SVC_ACCESS_KEY_ID;
  const sk = process.env.SVC_SECRET_ACCESS_KEY;
  if (ak && sk && !o.credentials && !o.profile) return { accessKeyId: ak, secretAccessKey: sk };
  const file = o.credentials ?? path.join(configDir(), 'credentials');
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch {
    throw new UsageError(`no credentials: set SVC_ACCESS_KEY_ID and SVC_SECRET_ACCESS_KEY, or write ${file} ([default] access_key_id = ..., secret_access_key = ...)`);
  }
  if (st.mode & 0o077) throw new UsageError(`${file} can be read by others (mode ${(st.mode & 0o777).toString(8)}): run chmod 600 ${file}`);
  const profile = o.profile ?? 'default';
  const sec = parseIni(fs.readFileSync(file, 'utf8'))[profile];
  if (!sec) throw new UsageError(`${file} has no profile [${profile}]`);
  const id = sec.access_key_id ?? sec.aws_access_key_id;
  const secret = sec.secret_access_key ?? sec.aws_secret_access_key;
  if (!id || !secret) throw new UsageError(`profile [${profile}] in ${file} needs access_key_id and secret_access_key`);
  return { accessKeyId: id, secretAccessKey: secret };
}

export interface FileConfig {
  endpoint?: string;
  region?: string;
  dialect?: string;
  signature?: string;
  /** mount options, as for -o */
  options?: string;
  /** PEM certificates to trust for an https:// endpoint */
  ca?: string;
}

/**
 * The optional config file (INI, one section per profile, like the credentials
 * file): defaults for endpoint, region, dialect, signature and mount options.
 * Command-line flags and -o options win over it.
 */
export function loadConfig(o: { config?: string; profile?: string }): FileConfig {
  const file = o.config ?? path.join(configDir(), 'config');
  if (!fs.existsSync(file)) {
    if (o.config) throw new UsageError(`config file ${file} does not exist`);
    return {};
  }
  const sec = parseIni(fs.readFileSync(file, 'utf8'))[o.profile ?? 'default'] ?? {};
  const known = new Set(['endpoint', 'region', 'dialect', 'signature', 'options', 'ca']);
  for (const k of Object.keys(sec)) if (!known.has(k)) throw new UsageError(`${file}: unknown setting "${k}" (known: ${[...known].join(', ')})`);
  return sec;
}

export interface MountOpts {
  allowOther: boolean;
  readOnly: boolean;
  uid?: number;
  gid?: number;
  umask?: number;
  cacheTtl?: number;
  cacheDir?: string;
  nonEmpty: boolean;
  /** every unlink waits for its DELETE (no delete-behind) */
  syncUnlink: boolean;
  retryBudget?: number;
  writeBack?: number;
  /** MiB of buffers (read-ahead, upload parts) the mount may hold */
  memoryLimit?: number;
  conflictCheck: 'on' | 'head' | 'off';
  /** uploads signed with their SHA-256: always, never, or auto (unless TLS or loopback) */
  payloadHash: 'auto' | 'always' | 'never';
  /** options for fstab/mount(8) that mount.svcfs handles: endpoint=, region=, dialect=, profile=, credentials=, ca= */
  passthrough: Record<string, string>;
}

const FLAGS = new Set(['allow_other', 'ro', 'rw', 'nonempty', 'sync_unlink', '_netdev', 'auto', 'noauto', 'user', 'nouser', 'defaults', 'exec', 'noexec', 'suid', 'nosuid', 'dev', 'nodev', 'atime', 'noatime', 'relatime']);
const PASSTHROUGH = new Set(['endpoint', 'region', 'dialect', 'profile', 'credentials', 'log_file', 'log_level', 'signature', 'ca']);

/** `-o a,b=c` strings (repeatable) in the usual FUSE style. */
export function parseMountOptions(list: string[]): MountOpts {
  const o: MountOpts = { allowOther: false, readOnly: false, nonEmpty: false, syncUnlink: false, conflictCheck: 'on', payloadHash: 'auto', passthrough: {} };
  const int = (k: string, v: string, base = 10) => {
    const n = parseInt(v, base);
    if (!/^\d+$/.test(v) || Number.isNaN(n)) throw new UsageError(`-o ${k}= needs a number, got "${v}"`);
    return n;
  };
  for (const item of list.flatMap((s) => s.split(',')).map((s) => s.trim()).filter(Boolean)) {
    const at = item.indexOf('=');
    const k = at < 0 ? item : item.slice(0, at);
    const v = at < 0 ? '' : item.slice(at + 1);
    if (k.startsWith('x-') || k === 'comment') continue; // for mount(8) and systemd
    if (at < 0 && FLAGS.has(k)) {
      if (k === 'allow_other') o.allowOther = true;
      if (k === 'ro') o.readOnly = true;
      if (k === 'nonempty') o.nonEmpty = true;
      if (k === 'sync_unlink') o.syncUnlink = true;
      continue;
    }
    switch (k) {
      case 'uid': o.uid = int(k, v); break;
      case 'gid': o.gid = int(k, v); break;
      case 'umask': o.umask = int(k, v, 8); break;
      case 'cache_ttl': o.cacheTtl = int(k, v); break;
      case 'cache_dir': o.cacheDir = v; break;
      case 'retry_budget': o.retryBudget = int(k, v); break;
      case 'write_back': o.writeBack = int(k, v); break;
      case 'memory_limit':
        o.memoryLimit = int(k, v);
        if (o.memoryLimit < 16) throw new UsageError('-o memory_limit= is in MiB and needs at least 16');
        break;
      case 'conflict_check':
        if (v !== 'on' && v !== 'off' && v !== 'head') throw new UsageError('-o conflict_check= takes on, head or off');
        o.conflictCheck = v;
        break;
      case 'payload_hash':
        if (v !== 'auto' && v !== 'always' && v !== 'never') throw new UsageError('-o payload_hash= takes auto, always or never');
        o.payloadHash = v;
        break;
      default:
        if (PASSTHROUGH.has(k) && at > 0) o.passthrough[k] = v;
        else throw new UsageError(`unknown mount option "${item}"`);
    }
  }
  return o;
}
