// A code cache for the process that serves a mount: the code V8 compiled for
// svcfs's modules (its own and its dependencies'), kept from one run to the
// next, so that a mount's start and its first operations (the first listing,
// the first upload) skip parsing and compiling. Node 22 has this built in
// (module.enableCompileCache), and it is used there; Node 20 has not.
//
// One file per role, Node version and installation in the user's cache
// directory. Each module's entry carries a CRC-32 of its source: V8 itself
// checks only the source's length (and its own version and flags), so an
// edited file of the same length would otherwise run its old code. The file is
// written when the process exits, if a module was compiled without a usable
// entry, or if the one that wrote it had not lived long enough to have run
// much (a mount that ran a while has compiled the functions of its
// operations, which V8 compiles lazily, at their first call).
import Module = require('node:module');
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vm from 'node:vm';
import { crc32 } from 'node:zlib';

/** a writer that lived this long has run a mount's common operations */
const WARM_MS = 5000;

interface Entry { crc: number; offset: number; length: number }
interface Header { warm: boolean; files: Record<string, Entry> }

export interface CodeCacheStats {
  /** the cache file, '' when off */
  file: string;
  /** modules compiled from their cached code */
  fromCache: number;
  /** modules compiled without (no entry, changed source, or refused by V8) */
  compiled: number;
}

const stats: CodeCacheStats = { file: '', fromCache: 0, compiled: 0 };
export const codeCacheStats = (): CodeCacheStats => ({ ...stats });

type CompileFn = (this: NodeJS.Module, content: string, filename: string) => unknown;
interface ModuleInternals {
  prototype: { _compile: CompileFn };
  _resolveFilename(request: string, parent: NodeJS.Module, isMain: boolean, options?: unknown): string;
  _resolveLookupPaths(request: string, parent: NodeJS.Module): string[] | null;
  _extensions: unknown;
  _cache: unknown;
  wrap(content: string): string;
  enableCompileCache?: (dir: string) => unknown;
}

/**
 * Compile the modules under `root` loaded from now on with the cache in `dir`
 * (created when missing). Never fails: without a usable cache, modules compile
 * as usual. SVCFS_CODE_CACHE=0 turns it off.
 */
export function enableCodeCache(dir: string, role: string, root = path.join(__dirname, '..', '..')): void {
  if (process.env.SVCFS_CODE_CACHE === '0') return;
  const M = Module as unknown as ModuleInternals;
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (M.enableCompileCache) {
      M.enableCompileCache(dir);
      stats.file = dir;
      return;
    }
  } catch {
    return;
  }
  const install = createHash('sha256').update(root).digest('hex').slice(0, 12);
  const file = path.join(dir, `${role}-node${process.version}-${process.arch}-${install}.bin`);
  const prefix = root.endsWith(path.sep) ? root : root + path.sep;
  const { header, blob } = load(file);
  const scripts: Array<{ filename: string; crc: number; script: vm.Script }> = [];
  let misses = 0;
  const original = M.prototype._compile;
  M.prototype._compile = function (this: NodeJS.Module, content: string, filename: string) {
    // (a file that starts with #! is a launcher: Node strips that line itself)
    if (!filename.startsWith(prefix) || content.startsWith('#!')) return original.call(this, content, filename);
    const crc = crc32(content);
    const e = header.files[filename];
    const cachedData = e && e.crc === crc && e.offset + e.length <= blob.length ? blob.subarray(e.offset, e.offset + e.length) : undefined;
    const script = new vm.Script(M.wrap(content), {
      filename, cachedData, importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
    });
    if (cachedData && !script.cachedDataRejected) stats.fromCache++;
    else {
      stats.compiled++;
      misses++;
    }
    scripts.push({ filename, crc, script });
    return script.runInThisContext({ displayErrors: true }).call(this.exports, this.exports, requireFor(M, this), this, filename, path.dirname(filename));
  };
  stats.file = file;
  process.once('exit', () => {
    if (misses === 0 && (header.warm || process.uptime() * 1000 < WARM_MS)) return;
    save(file, scripts, process.uptime() * 1000 >= WARM_MS, { header, blob });
  });
}

/** the require function Node gives a module (lib/internal/modules/helpers.js makeRequireFunction) */
function requireFor(M: ModuleInternals, mod: NodeJS.Module): NodeJS.Require {
  const require = ((id: string) => mod.require(id)) as NodeJS.Require;
  const resolve = ((request: string, options?: unknown) => M._resolveFilename(request, mod, false, options)) as NodeJS.RequireResolve;
  resolve.paths = (request: string) => M._resolveLookupPaths(request, mod);
  require.resolve = resolve;
  require.main = process.mainModule;
  require.extensions = M._extensions as NodeJS.Require['extensions'];
  require.cache = M._cache as NodeJS.Require['cache'];
  return require;
}

/** The file: a 4-byte length, the JSON header, then each module's code back to back. */
function load(file: string): { header: Header; blob: Buffer } {
  const none = { header: { warm: false, files: {} }, blob: Buffer.alloc(0) };
  let buf: Buffer;
  try {
    buf = fs.readFileSync(file);
  } catch {
    return none;
  }
  try {
    const n = buf.readUInt32LE(0);
    const header = JSON.parse(buf.subarray(4, 4 + n).toString('utf8')) as Header;
    if (typeof header !== 'object' || typeof header.files !== 'object') return none;
    return { header, blob: buf.subarray(4 + n) };
  } catch {
    return none;
  }
}

/** Write this run's code, and the earlier entries of modules this run did not load (pino loads only when a line is logged). */
function save(file: string, scripts: Array<{ filename: string; crc: number; script: vm.Script }>, warm: boolean, old: { header: Header; blob: Buffer }): void {
  const header: Header = { warm, files: {} };
  const parts: Buffer[] = [];
  let offset = 0;
  const add = (filename: string, crc: number, data: Buffer) => {
    header.files[filename] = { crc, offset, length: data.length };
    parts.push(data);
    offset += data.length;
  };
  for (const s of scripts) add(s.filename, s.crc, s.script.createCachedData());
  for (const [filename, e] of Object.entries(old.header.files)) {
    if (!(filename in header.files) && e.offset + e.length <= old.blob.length) add(filename, e.crc, old.blob.subarray(e.offset, e.offset + e.length));
  }
  const json = Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(4);
  len.writeUInt32LE(json.length);
  // several mounts may end at once: each writes its own file and renames it into place
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    fs.writeFileSync(tmp, Buffer.concat([len, json, ...parts]), { mode: 0o600 });
    fs.renameSync(tmp, file);
  } catch {
    fs.rmSync(tmp, { force: true });
  }
}
