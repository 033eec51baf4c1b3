// S3-compatible multipart upload. Parts are blobs of their own; completing an
// upload makes the chosen parts the object's segments, without copying bytes.
import { createHash } from 'node:crypto';
import { SvcError } from '../wire/errors';
import { parseXml, textOf, XmlError } from '../wire/xml';
import { finishEmpty, receiveSmall } from './body';
import { Ctx, header, isoDate, sendEmpty, sendXml, xh } from './context';
import { copySource, copyToBlob, objectAttributes, receiveBlob, requireWrite, validateKey, writeCondition } from './objects';
import { newId, ObjectRow } from './store';

const MAX_PART_NUMBER = 2147483647; // the service sets no part-count limit

function upload(ctx: Ctx) {
  const id = ctx.query.get('uploadId') ?? '';
  const u = ctx.store.getUpload(id);
  if (!u || u.bucket !== ctx.bucket || u.key !== ctx.key) {
    throw new SvcError('NoSuchUpload', 'The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.');
  }
  return u;
}

export function createUpload(ctx: Ctx): void {
  finishEmpty(ctx);
  requireWrite(ctx);
  validateKey(ctx.cfg, ctx.key);
  const uploadId = newId();
  ctx.store.createUpload({ uploadId, bucket: ctx.bucket, key: ctx.key, created: Date.now(), ...objectAttributes(ctx) });
  sendXml(ctx, 200, 'InitiateMultipartUploadResult', { Bucket: ctx.bucket, Key: ctx.key, UploadId: uploadId });
}

function partNumber(ctx: Ctx): number {
  const raw = ctx.query.get('partNumber') ?? '';
  if (!/^\d+$/.test(raw) || +raw < 1 || +raw > MAX_PART_NUMBER) throw new SvcError('InvalidArgument', 'Part number must be a positive integer');
  return +raw;
}

/** Record a part's blob; the blob of a part it replaces goes. */
function keepPart(ctx: Ctx, n: number, blob: string, size: number, etag: string): number {
  const mtime = Date.now();
  const replaced = ctx.store.putPart({ uploadId: ctx.query.get('uploadId')!, partNumber: n, blob, size, etag, mtime });
  if (replaced) ctx.store.dropBlobs([replaced]);
  if (replaced === blob) throw new SvcError('NoSuchUpload', 'The specified upload was aborted while the part was uploading.');
  return mtime;
}

export async function uploadPart(ctx: Ctx): Promise<void> {
  if (ctx.req.headers[xh(ctx, 'copy-source')] !== undefined) return uploadPartCopy(ctx);
  const n = partNumber(ctx);
  upload(ctx);
  const { id: blob, got } = await receiveBlob(ctx);
  const etag = got.md5.toString('hex');
  keepPart(ctx, n, blob, got.size, etag);
  const extra: Record<string, string> = { ETag: `"${etag}"` };
  if (got.checksum) extra[xh(ctx, `checksum-${got.checksum.algorithm}`)] = got.checksum.value;
  sendEmpty(ctx, 200, extra);
}

/**
 * UploadPartCopy: a part made of a range of an existing object
 * (`X-Svc-Copy-Source`, optional `X-Svc-Copy-Source-Range: bytes=a-b`).
 */
async function uploadPartCopy(ctx: Ctx): Promise<void> {
  finishEmpty(ctx);
  requireWrite(ctx);
  const n = partNumber(ctx);
  upload(ctx);
  const src = copySource(ctx);
  let start = 0;
  let end = src.size - 1;
  const range = header(ctx, xh(ctx, 'copy-source-range'));
  if (range !== undefined) {
    const m = /^bytes=(\d+)-(\d+)$/.exec(range.trim());
    if (!m || +m[1] > +m[2] || +m[2] >= src.size) {
      throw new SvcError('InvalidArgument', `The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy, within the source object of size ${src.size}`);
    }
    [start, end] = [+m[1], +m[2]];
  }
  if (end - start + 1 > ctx.cfg.maxPutSize) throw new SvcError('EntityTooLarge', 'Your proposed upload exceeds the maximum allowed object size.');
  const { id, md5 } = await copyToBlob(ctx, src, start, end, true);
  const etag = md5!.toString('hex');
  const mtime = keepPart(ctx, n, id, end - start + 1, etag);
  sendXml(ctx, 200, 'CopyPartResult', { LastModified: isoDate(mtime), ETag: `"${etag}"` });
}

export async function completeUpload(ctx: Ctx): Promise<void> {
  const { body } = await receiveSmall(ctx, 4 * 1024 * 1024);
  requireWrite(ctx);
  // the same completion again (its first reply was lost): the same answer, while the object is the one it made
  const done = ctx.store.getCompleted(ctx.query.get('uploadId') ?? '');
  if (done && done.bucket === ctx.bucket && done.key === ctx.key && ctx.store.get(done.bucket, done.key)?.etag === done.etag) {
    sendXml(ctx, 200, 'CompleteMultipartUploadResult', { Location: `/${done.bucket}/${done.key}`, Bucket: done.bucket, Key: done.key, ETag: `"${done.etag}"` });
    return;
  }
  const u = upload(ctx);
  let wanted: Array<{ n: number; etag: string }>;
  try {
    const doc = parseXml(body.toString('utf8'));
    if (!doc.CompleteMultipartUpload) throw new XmlError('no CompleteMultipartUpload element');
    wanted = ((doc.CompleteMultipartUpload.Part ?? []) as any[]).map((p) => ({
      n: Number(textOf(p.PartNumber)),
      etag: textOf(p.ETag).trim().replace(/^"|"$/g, ''),
    }));
  } catch (e) {
    if (e instanceof XmlError) throw new SvcError('MalformedXML', 'The XML you provided was not well-formed or did not validate against our published schema');
    throw e;
  }
  if (wanted.length === 0) throw new SvcError('MalformedXML', 'You must specify at least one part');
  const have = new Map(ctx.store.allParts(u.uploadId).map((p) => [p.partNumber, p]));
  const md5s: Buffer[] = [];
  const segments = [];
  let size = 0;
  for (let i = 0; i < wanted.length; i++) {
    const w = wanted[i];
    if (i > 0 && w.n <= wanted[i - 1].n) throw new SvcError('InvalidPartOrder', 'The list of parts was not in ascending order. Parts must be ordered by part number.');
    const p = have.get(w.n);
    if (!p || p.etag !== w.etag) throw new SvcError('InvalidPart', 'One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not have matched the part\'s entity tag.');
    if (i < wanted.length - 1 && p.size < ctx.cfg.minPartSize) throw new SvcError('EntityTooSmall', 'Your proposed upload is smaller than the minimum allowed object size.');
    md5s.push(Buffer.from(p.etag, 'hex'));
    segments.push({ id: p.blob, size: p.size });
    size += p.size;
  }
  const etag = `${createHash('md5').update(Buffer.concat(md5s)).digest('hex')}-${wanted.length}`;
  const row: ObjectRow = {
    bucket: u.bucket, key: u.key, segments, size, etag, mtime: Date.now(), contentType: u.contentType, meta: u.meta,
    tags: u.tags, publicRead: u.publicRead, headers: u.headers,
  };
  ctx.store.dropBlobs(ctx.store.completeUpload(u.uploadId, row, writeCondition(ctx)));
  sendXml(ctx, 200, 'CompleteMultipartUploadResult', {
    Location: `/${u.bucket}/${u.key}`, Bucket: u.bucket, Key: u.key, ETag: `"${etag}"`,
  });
}

export function abortUpload(ctx: Ctx): void {
  finishEmpty(ctx);
  requireWrite(ctx);
  const u = upload(ctx);
  ctx.store.dropBlobs(ctx.store.abortUpload(u.uploadId));
  sendEmpty(ctx, 204);
}

export function listParts(ctx: Ctx): void {
  finishEmpty(ctx);
  requireWrite(ctx);
  const u = upload(ctx);
  const after = Number(ctx.query.get('part-number-marker') ?? 0) || 0;
  const max = Math.min(Number(ctx.query.get('max-parts') ?? 1000) || 1000, 1000);
  const parts = ctx.store.listParts(u.uploadId, after, max + 1);
  const truncated = parts.length > max;
  const shown = parts.slice(0, max);
  sendXml(ctx, 200, 'ListPartsResult', {
    Bucket: u.bucket, Key: u.key, UploadId: u.uploadId, PartNumberMarker: after,
    NextPartNumberMarker: shown.length ? shown[shown.length - 1].partNumber : after, MaxParts: max, IsTruncated: truncated,
    Part: shown.map((p) => ({ PartNumber: p.partNumber, LastModified: isoDate(p.mtime), ETag: `"${p.etag}"`, Size: p.size })),
  });
}

export function listUploads(ctx: Ctx): void {
  finishEmpty(ctx);
  requireWrite(ctx);
  const prefix = ctx.query.get('prefix') ?? '';
  const ups = ctx.store.listUploads(ctx.bucket, prefix);
  sendXml(ctx, 200, 'ListMultipartUploadsResult', {
    Bucket: ctx.bucket, Prefix: prefix, MaxUploads: 1000, IsTruncated: false,
    Upload: ups.map((u) => ({ Key: u.key, UploadId: u.uploadId, Initiated: isoDate(u.created), StorageClass: 'STANDARD' })),
  });
}
