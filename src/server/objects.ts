// Object operations: get, head, put, copy, delete, and the tagging endpoints.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { Transform } from 'node:stream';
import { SvcError } from '../wire/errors';
import { parseXml, textOf, XmlError } from '../wire/xml';
import { decodeHeaderText, encodeHeaderText } from '../wire/headertext';
import { uriEncode } from '../wire/signer';
import { finishEmpty, fsyncFile, Received, receiveSmall, receiveToFile } from './body';
import { Ctx, header, isoDate, sendEmpty, sendXml, setCommonHeaders, xh } from './context';
import { ObjectRow } from './store';
import { Users } from './users';

// ---- permissions ----

export function requireWrite(ctx: Ctx): void {
  if (!ctx.user || !Users.canWrite(ctx.user, ctx.bucket)) throw new SvcError('AccessDenied', 'Access Denied');
}

function canRead(ctx: Ctx, bucket: string): boolean {
  return !!ctx.user && Users.canRead(ctx.user, bucket);
}

/**
 * The object, if the caller may read it; anonymous callers learn nothing about
 * private keys. public-read grants the object's content and metadata, not its tags (as S3).
 */
function readable(ctx: Ctx, allowAnonymous = true): ObjectRow {
  const row = ctx.store.get(ctx.bucket, ctx.key);
  if (ctx.auth.anonymous) {
    if (row?.publicRead && allowAnonymous) return row;
    throw new SvcError('AccessDenied', 'Access Denied');
  }
  if (!canRead(ctx, ctx.bucket)) throw new SvcError('AccessDenied', 'Access Denied');
  if (!row) throw new SvcError('NoSuchKey', 'The specified key does not exist.');
  return row;
}

// ---- validation of what a write carries ----

export function validateKey(cfg: Ctx['cfg'], key: string): void {
  if (key === '') throw new SvcError('InvalidArgument', 'An object key is required');
  if (Buffer.byteLength(key, 'utf8') > cfg.maxKeyBytes) throw new SvcError('KeyTooLongError', 'Your key is too long');
  if (key.includes('\uFFFD')) throw new SvcError('InvalidURI', 'The object key is not valid UTF-8');
}

export function validateTags(cfg: Ctx['cfg'], tags: Array<[string, string]>): void {
  if (tags.length > cfg.maxTags) throw new SvcError('InvalidTag', `Object tags cannot be greater than ${cfg.maxTags}`);
  const seen = new Set<string>();
  for (const [k, v] of tags) {
    if (k.length < 1 || [...k].length > 128) throw new SvcError('InvalidTag', 'The TagKey you have provided is invalid');
    if ([...v].length > 256) throw new SvcError('InvalidTag', 'The TagValue you have provided is too long');
    if (seen.has(k)) throw new SvcError('InvalidTag', 'Cannot provide multiple Tags with the same key');
    seen.add(k);
  }
}

function tagsFromHeader(ctx: Ctx): Array<[string, string]> | undefined {
  const raw = header(ctx, xh(ctx, 'tagging'));
  if (raw === undefined) return undefined;
  const tags = [...new URLSearchParams(raw)] as Array<[string, string]>;
  validateTags(ctx.cfg, tags);
  return tags;
}

function metaFromHeaders(ctx: Ctx): Record<string, string> {
  const prefix = xh(ctx, 'meta-');
  const meta: Record<string, string> = {};
  let bytes = 0;
  for (const [k, v] of Object.entries(ctx.req.headers)) {
    if (!k.startsWith(prefix) || v === undefined) continue;
    const name = k.slice(prefix.length);
    meta[name] = decodeHeaderText(Array.isArray(v) ? v.join(',') : v);
    bytes += name.length + meta[name].length;
  }
  if (bytes > ctx.cfg.maxMetaBytes) throw new SvcError('MetadataTooLarge', `Your metadata headers exceed the maximum allowed metadata size (${ctx.cfg.maxMetaBytes} bytes).`);
  return meta;
}

const STORED_HEADERS = ['cache-control', 'content-disposition', 'content-encoding', 'content-language', 'expires'];

function storedHeaders(ctx: Ctx): Record<string, string> {
  const h: Record<string, string> = {};
  for (const n of STORED_HEADERS) {
    let v = header(ctx, n);
    if (n === 'content-encoding' && v) v = v.split(',').map((s) => s.trim()).filter((s) => s && s.toLowerCase() !== 'aws-chunked').join(', ');
    if (v) h[n] = v;
  }
  return h;
}

function aclFromHeader(ctx: Ctx): boolean {
  const acl = header(ctx, xh(ctx, 'acl'));
  if (acl === undefined || acl === 'private' || acl === 'bucket-owner-full-control' || acl === 'bucket-owner-read' || acl === 'authenticated-read') return false;
  if (acl === 'public-read' || acl === 'public-read-write') return true;
  throw new SvcError('InvalidArgument', `unsupported canned ACL ${acl}`);
}

/** Everything an upload (PUT or multipart create) says about the object besides its bytes. */
export function objectAttributes(ctx: Ctx) {
  return {
    contentType: header(ctx, 'content-type') || 'binary/octet-stream',
    meta: metaFromHeaders(ctx),
    tags: tagsFromHeader(ctx) ?? [],
    publicRead: aclFromHeader(ctx),
    headers: storedHeaders(ctx),
  };
}

// ---- conditional requests ----

const secs = (ms: number) => Math.floor(ms / 1000);

function parseHttpDate(s: string | undefined): number | undefined {
  if (!s) return undefined;
  const t = Date.parse(s);
  return Number.isNaN(t) ? undefined : secs(t);
}

function etagMatches(list: string, etag: string): boolean {
  return list.split(',').some((t) => {
    const x = t.trim().replace(/^W\//, '');
    return x === '*' || x.replace(/^"|"$/g, '') === etag;
  });
}

/** GET/HEAD preconditions as S3 orders them: 412 or 304, else nothing. */
function checkReadConditions(ctx: Ctx, row: ObjectRow): 304 | undefined {
  const im = header(ctx, 'if-match');
  const inm = header(ctx, 'if-none-match');
  const ims = parseHttpDate(header(ctx, 'if-modified-since'));
  const ius = parseHttpDate(header(ctx, 'if-unmodified-since'));
  const m = secs(row.mtime);
  if (im !== undefined) {
    if (!etagMatches(im, row.etag)) throw new SvcError('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold');
  } else if (ius !== undefined && m > ius) {
    throw new SvcError('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold');
  }
  if (inm !== undefined) {
    if (etagMatches(inm, row.etag)) return 304;
  } else if (ims !== undefined && m <= ims) {
    return 304;
  }
  return undefined;
}

/** Conditional writes (If-Match / If-None-Match: *), checked inside the commit transaction. */
export function writeCondition(ctx: Ctx): ((old: ObjectRow | undefined) => void) | undefined {
  const im = header(ctx, 'if-match');
  const inm = header(ctx, 'if-none-match');
  if (im === undefined && inm === undefined) return undefined;
  return (old) => {
    if (im !== undefined) {
      if (!old) throw new SvcError('NoSuchKey', 'The specified key does not exist.');
      if (!etagMatches(im, old.etag)) throw new SvcError('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold');
    }
    if (inm !== undefined && old && etagMatches(inm, old.etag)) {
      throw new SvcError('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold');
    }
  };
}

// ---- GET / HEAD ----

function contentDisposition(key: string): string {
  const name = key.replace(/\/+$/, '').split('/').pop() || key;
  const ascii = /^[\x20-\x7e]*$/.test(name);
  const quoted = name.replace(/[\\"]/g, '\\$&');
  return ascii ? `inline; filename="${quoted}"` : `inline; filename="${name.replace(/[^\x20-\x7e]/g, '_').replace(/[\\"]/g, '\\$&')}"; filename*=UTF-8''${uriEncode(name)}`;
}

/** Header-safe text: printable ASCII as is, anything else percent-encoded. */
function headerText(s: string): string {
  return /^[\x20-\x7e]*$/.test(s) ? s : uriEncode(s);
}

function objectHeaders(ctx: Ctx, row: ObjectRow): void {
  const res = ctx.res;
  setCommonHeaders(ctx);
  res.setHeader('Content-Type', row.contentType);
  res.setHeader('Last-Modified', new Date(row.mtime).toUTCString());
  res.setHeader('ETag', `"${row.etag}"`);
  res.setHeader('Content-Disposition', row.headers['content-disposition'] ?? contentDisposition(row.key));
  res.setHeader('Access-Control-Expose-Headers', 'Content-Disposition');
  res.setHeader('Accept-Ranges', 'bytes');
  for (const [k, v] of Object.entries(row.headers)) if (k !== 'content-disposition') res.setHeader(k, v);
  for (const [k, v] of Object.entries(row.meta)) res.setHeader(xh(ctx, 'meta-') + k, encodeHeaderText(v));
  const tagPrefix = ctx.dialect.name === 'aws' ? 'X-Amz-Tagging-' : 'X-Svc-Tagging-';
  for (const [k, v] of row.tags) res.setHeader(tagPrefix + uriEncode(k), headerText(v));
  res.setHeader(tagPrefix + 'Count', row.tags.length);
  // GET response overrides, as pre-signed links use them
  for (const [q, h] of [['response-content-type', 'Content-Type'], ['response-content-disposition', 'Content-Disposition'],
    ['response-cache-control', 'Cache-Control'], ['response-content-encoding', 'Content-Encoding'],
    ['response-content-language', 'Content-Language'], ['response-expires', 'Expires']]) {
    const v = ctx.query.get(q);
    if (v !== undefined) res.setHeader(h, headerText(v));
  }
}

/** `bytes=a-b` | `bytes=a-` | `bytes=-n` -> [start, end] inclusive; undefined to serve it all. */
export function parseRange(spec: string | undefined, size: number): [number, number] | undefined {
  if (!spec) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(spec.trim());
  if (!m || (m[1] === '' && m[2] === '')) return undefined; // multiple or malformed ranges: whole object, as S3
  let start: number, end: number;
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0) throw new SvcError('InvalidRange', 'The requested range is not satisfiable');
    start = Math.max(0, size - n);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (m[2] !== '' && Number(m[2]) < start) return undefined;
  }
  if (start >= size) throw new SvcError('InvalidRange', 'The requested range is not satisfiable');
  return [start, end];
}

/** Write one chunk, waiting for the destination to drain (or fail) when it asks to. */
async function writeChunk(out: NodeJS.WritableStream, chunk: Buffer): Promise<void> {
  if (out.write(chunk)) return;
  await new Promise<void>((ok, ko) => {
    const done = (e?: Error) => {
      out.off('drain', onDrain);
      out.off('close', onClose);
      out.off('error', done);
      if (e) ko(e);
      else ok();
    };
    const onDrain = () => done();
    const onClose = () => done(new Error('destination closed'));
    out.once('drain', onDrain);
    out.once('close', onClose);
    out.once('error', done);
  });
}

/** Stream [start, end] of an object's segments (already opened as fds) into `out`. */
export async function streamSegments(row: ObjectRow, fds: number[], start: number, end: number, out: NodeJS.WritableStream): Promise<void> {
  let base = 0;
  try {
    for (let i = 0; i < row.segments.length && base <= end; i++) {
      const seg = row.segments[i];
      const segEnd = base + seg.size - 1;
      if (segEnd >= start && seg.size > 0) {
        const s = Math.max(start, base) - base;
        const e = Math.min(end, segEnd) - base;
        const rs = fs.createReadStream('', { fd: fds[i], start: s, end: e, autoClose: false, highWaterMark: 256 * 1024 });
        for await (const chunk of rs) await writeChunk(out, chunk as Buffer);
      }
      base += seg.size;
    }
  } finally {
    for (const fd of fds) fs.close(fd, () => undefined);
  }
}

export async function getObject(ctx: Ctx, head: boolean): Promise<void> {
  finishEmpty(ctx);
  const row = readable(ctx);
  const res = ctx.res;
  const cond = checkReadConditions(ctx, row);
  if (cond === 304) {
    setCommonHeaders(ctx);
    res.setHeader('ETag', `"${row.etag}"`);
    res.setHeader('Last-Modified', new Date(row.mtime).toUTCString());
    res.writeHead(304);
    res.end();
    return;
  }
  const range = parseRange(header(ctx, 'range'), row.size);
  objectHeaders(ctx, row);
  const [start, end] = range ?? [0, row.size - 1];
  res.setHeader('Content-Length', row.size === 0 ? 0 : end - start + 1);
  if (range) res.setHeader('Content-Range', `bytes ${start}-${end}/${row.size}`);
  res.writeHead(range ? 206 : 200);
  if (head || row.size === 0) {
    res.end();
    return;
  }
  const fds = ctx.store.openSegments(row);
  await streamSegments(row, fds, start, end, res);
  res.end();
}

// ---- PUT / copy ----

/** Authorise a write, then stream the body into a verified blob; returns its id. */
export async function receiveBlob(ctx: Ctx): Promise<{ id: string; got: Received }> {
  if (ctx.auth.payload.kind !== 'deferred') {
    ctx.user = ctx.auth.finish();
    requireWrite(ctx);
  }
  const tmp = ctx.store.tempPath();
  const got = await receiveToFile(ctx, tmp, ctx.cfg.maxPutSize);
  try {
    requireWrite(ctx); // a deferred signature names its user only now
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  return { id: ctx.store.adoptTemp(tmp), got };
}

export async function putObject(ctx: Ctx): Promise<void> {
  if (header(ctx, xh(ctx, 'copy-source')) !== undefined) return copyObject(ctx);
  validateKey(ctx.cfg, ctx.key);
  const attrs = objectAttributes(ctx);
  const { id, got } = await receiveBlob(ctx);
  const row: ObjectRow = {
    bucket: ctx.bucket, key: ctx.key, segments: [{ id, size: got.size }], size: got.size, etag: got.md5.toString('hex'),
    mtime: Date.now(), ...attrs,
  };
  commit(ctx, row, [id]);
  const extra: Record<string, string> = { ETag: `"${row.etag}"` };
  if (got.checksum) extra[xh(ctx, `checksum-${got.checksum.algorithm}`)] = got.checksum.value;
  sendEmpty(ctx, 200, extra);
}

/** Commit a row whose blobs are already in place; on refusal the new blobs go. */
function commit(ctx: Ctx, row: ObjectRow, newBlobs: string[]): void {
  let replaced;
  try {
    replaced = ctx.store.put(row, writeCondition(ctx));
  } catch (e) {
    ctx.store.dropBlobs(newBlobs);
    throw e;
  }
  ctx.store.dropBlobs(replaced.map((s) => s.id));
}

export function parseCopySource(raw: string): { bucket: string; key: string } {
  let s = raw.split('?versionId=')[0];
  try {
    s = decodeURIComponent(s);
  } catch {
    throw new SvcError('InvalidArgument', 'Copy Source must be URL-encoded');
  }
  s = s.replace(/^\//, '');
  const at = s.indexOf('/');
  if (at <= 0 || at === s.length - 1) throw new SvcError('InvalidArgument', 'Copy Source must mention the source bucket and key: sourcebucket/sourcekey');
  return { bucket: s.slice(0, at), key: s.slice(at + 1) };
}

function checkCopySourceConditions(ctx: Ctx, src: ObjectRow): void {
  const fail = () => { throw new SvcError('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold'); };
  const im = header(ctx, xh(ctx, 'copy-source-if-match'));
  const inm = header(ctx, xh(ctx, 'copy-source-if-none-match'));
  const ims = parseHttpDate(header(ctx, xh(ctx, 'copy-source-if-modified-since')));
  const ius = parseHttpDate(header(ctx, xh(ctx, 'copy-source-if-unmodified-since')));
  const m = secs(src.mtime);
  if (im !== undefined && !etagMatches(im, src.etag)) fail();
  if (im === undefined && ius !== undefined && m > ius) fail();
  if (inm !== undefined && etagMatches(inm, src.etag)) fail();
  if (inm === undefined && ims !== undefined && m <= ims) fail();
}

/** The object a copy request names (X-Svc-Copy-Source), once the caller may read it and its conditions hold. */
export function copySource(ctx: Ctx): ObjectRow {
  const { bucket, key } = parseCopySource(header(ctx, xh(ctx, 'copy-source'))!);
  if (!ctx.cfg.buckets.has(bucket)) throw new SvcError('NoSuchBucket', 'The specified bucket does not exist');
  if (!canRead(ctx, bucket)) throw new SvcError('AccessDenied', 'Access Denied');
  const src = ctx.store.get(bucket, key);
  if (!src) throw new SvcError('NoSuchKey', 'The specified key does not exist.');
  checkCopySourceConditions(ctx, src);
  return src;
}

/**
 * Copy bytes [start, end] of an object into a new blob (fds opened now, so a
 * concurrent overwrite cannot pull them away); with `hash`, their MD5 too.
 */
export async function copyToBlob(ctx: Ctx, src: ObjectRow, start: number, end: number, hash = false): Promise<{ id: string; md5?: Buffer }> {
  const fds = ctx.store.openSegments(src);
  const tmp = ctx.store.tempPath();
  const md5 = hash ? createHash('md5') : undefined;
  try {
    const file = fs.createWriteStream(tmp, { flags: 'wx', mode: 0o600 });
    const out = md5 ? new Transform({ transform: (c: Buffer, _e, cb) => { md5.update(c); cb(null, c); } }) : file;
    if (md5) out.pipe(file);
    if (end >= start) await streamSegments(src, fds, start, end, out);
    else for (const fd of fds) fs.closeSync(fd);
    await new Promise<void>((ok, ko) => {
      file.on('error', ko);
      file.on('finish', () => ok());
      out.end();
    });
    await fsyncFile(tmp);
  } catch (e) {
    await fs.promises.rm(tmp, { force: true });
    throw e;
  }
  return { id: ctx.store.adoptTemp(tmp), md5: md5?.digest() };
}

async function copyObject(ctx: Ctx): Promise<void> {
  finishEmpty(ctx);
  requireWrite(ctx);
  validateKey(ctx.cfg, ctx.key);
  const src = copySource(ctx);
  const metaDirective = (header(ctx, xh(ctx, 'metadata-directive')) ?? 'COPY').toUpperCase();
  const tagDirective = (header(ctx, xh(ctx, 'tagging-directive')) ?? 'COPY').toUpperCase();
  if (!['COPY', 'REPLACE'].includes(metaDirective) || !['COPY', 'REPLACE'].includes(tagDirective)) {
    throw new SvcError('InvalidArgument', 'Unknown metadata or tagging directive');
  }
  const replace = metaDirective === 'REPLACE';
  const attrs = objectAttributes(ctx);
  const sameObject = src.bucket === ctx.bucket && src.key === ctx.key;
  if (sameObject && !replace && tagDirective === 'COPY' && header(ctx, xh(ctx, 'acl')) === undefined) {
    throw new SvcError('InvalidRequest', "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.");
  }
  const row: ObjectRow = {
    bucket: ctx.bucket, key: ctx.key, segments: src.segments, size: src.size, etag: src.etag, mtime: Date.now(),
    contentType: replace ? attrs.contentType : src.contentType,
    meta: replace ? attrs.meta : src.meta,
    headers: replace ? attrs.headers : src.headers,
    tags: tagDirective === 'REPLACE' ? attrs.tags : src.tags,
    publicRead: attrs.publicRead,
  };
  let fresh: string[] = [];
  if (!sameObject) {
    const { id } = await copyToBlob(ctx, src, 0, src.size - 1);
    row.segments = [{ id, size: src.size }];
    fresh = [id];
  }
  commit(ctx, row, fresh);
  sendXml(ctx, 200, 'CopyObjectResult', { LastModified: isoDate(row.mtime), ETag: row.etag }, { ETag: `"${row.etag}"` });
}

// ---- DELETE ----

export function deleteObject(ctx: Ctx): void {
  finishEmpty(ctx);
  requireWrite(ctx);
  ctx.store.dropBlobs(ctx.store.delete(ctx.bucket, ctx.key).map((s) => s.id));
  sendEmpty(ctx, 204);
}

// ---- tagging ----

export function getTagging(ctx: Ctx): void {
  finishEmpty(ctx);
  const row = readable(ctx, false);
  sendXml(ctx, 200, 'Tagging', { TagSet: { Tag: row.tags.map(([Key, Value]) => ({ Key, Value })) } });
}

export async function putTagging(ctx: Ctx): Promise<void> {
  const { body } = await receiveSmall(ctx, 64 * 1024);
  requireWrite(ctx);
  let tags: Array<[string, string]>;
  try {
    const doc = parseXml(body.toString('utf8'));
    const list = doc.Tagging?.TagSet?.Tag ?? [];
    if (!doc.Tagging) throw new XmlError('no Tagging element');
    tags = (list as any[]).map((t) => [textOf(t.Key), textOf(t.Value)] as [string, string]);
  } catch (e) {
    if (e instanceof XmlError) throw new SvcError('MalformedXML', 'The XML you provided was not well-formed or did not validate against our published schema');
    throw e;
  }
  validateTags(ctx.cfg, tags);
  if (!ctx.store.setTags(ctx.bucket, ctx.key, tags)) throw new SvcError('NoSuchKey', 'The specified key does not exist.');
  sendEmpty(ctx, 200);
}

export function deleteTagging(ctx: Ctx): void {
  finishEmpty(ctx);
  requireWrite(ctx);
  if (!ctx.store.setTags(ctx.bucket, ctx.key, [])) throw new SvcError('NoSuchKey', 'The specified key does not exist.');
  sendEmpty(ctx, 204);
}
