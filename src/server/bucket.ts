// Bucket-level operations: listing (V2 and V1), batch delete, and the small
// read-only bucket endpoints clients probe (list buckets, head, location).
import { SvcError } from '../wire/errors';
import { parseXml, textOf, XmlError, XmlTree } from '../wire/xml';
import { uriEncode } from '../wire/signer';
import { JSON_LISTING } from '../wire/listing';
import { finishEmpty, receiveSmall } from './body';
import { Ctx, header, isoDate, sendEmpty, sendXml, setCommonHeaders, xh } from './context';
import { requireWrite } from './objects';
import type { ListResult } from './store';
import { Users } from './users';

function requireRead(ctx: Ctx): void {
  if (!ctx.user || !Users.canRead(ctx.user, ctx.bucket)) throw new SvcError('AccessDenied', 'Access Denied');
}

function maxKeysOf(ctx: Ctx): number {
  const raw = ctx.query.get('max-keys');
  if (raw === undefined || raw === '') return 1000;
  if (!/^\d+$/.test(raw)) throw new SvcError('InvalidArgument', 'Provided max-keys not an integer or within integer range');
  return Math.min(Number(raw), 1000); // pages are cut at 1000, as S3 does
}

const token = {
  encode: (s: string) => Buffer.from(s, 'utf8').toString('base64url'),
  decode: (s: string) => {
    const k = Buffer.from(s, 'base64url').toString('utf8');
    if (token.encode(k) !== s.replace(/=+$/, '')) throw new SvcError('InvalidArgument', 'The continuation token provided is incorrect');
    return k;
  },
};

export function listObjects(ctx: Ctx): void {
  finishEmpty(ctx);
  requireRead(ctx);
  const v2 = ctx.query.get('list-type') === '2';
  if (ctx.query.has('list-type') && !v2) throw new SvcError('InvalidArgument', 'Invalid list-type');
  const prefix = ctx.query.get('prefix') ?? '';
  const delimiter = ctx.query.get('delimiter') ?? '';
  const maxKeys = maxKeysOf(ctx);
  const urlEnc = ctx.query.get('encoding-type');
  if (urlEnc !== undefined && urlEnc !== 'url') throw new SvcError('InvalidArgument', 'Invalid Encoding Method specified in Request');
  const enc = (s: string) => (urlEnc ? uriEncode(s, false) : s);
  const ctoken = ctx.query.get('continuation-token');
  const startAfter = ctx.query.get('start-after') ?? '';
  const marker = ctx.query.get('marker') ?? '';
  const after = v2 ? (ctoken !== undefined ? token.decode(ctoken) : startAfter) : marker;
  const page = ctx.store.list(ctx.bucket, prefix, delimiter, after, maxKeys);
  // Extension (as MinIO's metadata=true): user metadata in each entry, and for a
  // common prefix that has a directory marker, the marker's, so that a mount can
  // show modes and times from a listing without a HEAD per object.
  const withMeta = ctx.query.get('metadata') === 'true';
  const truncated = maxKeys > 0 && page.truncated; // max-keys=0 asks for nothing, and nothing more is to come
  const next = !page.truncated || page.last === undefined ? undefined : v2 ? token.encode(page.last) : delimiter ? page.last : undefined;
  if (ctx.query.get(JSON_LISTING.param) === 'json') return sendJsonListing(ctx, page, withMeta, truncated, next);
  const metaXml = (json: string) => ({ Entry: Object.entries(JSON.parse(json) as Record<string, string>).map(([Name, Value]) => ({ Name, Value: enc(Value) })) });
  // V1 always names each object's owner, V2 when asked to (fetch-owner=true), as S3
  const owner = !v2 || ctx.query.get('fetch-owner') === 'true' ? { ID: ctx.user!.accessKeyId, DisplayName: ctx.user!.name } : undefined;
  const contents = page.contents.map((c) => ({
    Key: enc(c.key), LastModified: isoDate(c.mtime), ETag: `"${c.etag}"`, Size: c.size, Owner: owner, StorageClass: 'STANDARD',
    UserMetadata: withMeta ? metaXml(c.meta) : undefined,
  }));
  const prefixes = page.prefixes.map((p) => ({ Prefix: enc(p), UserMetadata: withMeta && page.markers.has(p) ? metaXml(page.markers.get(p)!) : undefined }));
  const body: XmlTree = { Name: ctx.bucket, Prefix: enc(prefix) };
  if (v2) {
    if (ctoken !== undefined) body.ContinuationToken = ctoken;
    if (startAfter) body.StartAfter = enc(startAfter);
    body.KeyCount = contents.length + prefixes.length;
  } else {
    body.Marker = enc(marker);
  }
  body.MaxKeys = maxKeys;
  if (delimiter) body.Delimiter = enc(delimiter);
  if (urlEnc) body.EncodingType = 'url';
  body.IsTruncated = truncated;
  if (next !== undefined) {
    if (v2) body.NextContinuationToken = next;
    else body.NextMarker = enc(next);
  }
  body.Contents = contents;
  body.CommonPrefixes = prefixes;
  sendXml(ctx, 200, 'ListBucketResult', body);
}

/**
 * Extension (svcfs-format=json, asked for by svcfs mount): the same page as
 * JSON (src/wire/listing.ts). A fresh mount process parsed a 500-entry XML page in
 * ~27 ms (its JIT is cold), JSON in ~1.5 ms; here the stored metadata, already
 * JSON, is spliced in as it is instead of being parsed and escaped per entry.
 * Keys are exact (no encoding-type); times are milliseconds since the epoch.
 */
function sendJsonListing(ctx: Ctx, page: ListResult, withMeta: boolean, truncated: boolean, next: string | undefined): void {
  const parts = [`{"isTruncated":${truncated}`];
  if (next !== undefined) parts.push(`,"next":${JSON.stringify(next)}`);
  parts.push(',"contents":[');
  page.contents.forEach((c, i) => {
    parts.push(`${i ? ',' : ''}{"key":${JSON.stringify(c.key)},"lastModified":${c.mtime},"etag":${JSON.stringify(c.etag)},"size":${c.size}${withMeta ? `,"meta":${c.meta}` : ''}}`);
  });
  parts.push('],"prefixes":[');
  page.prefixes.forEach((p, i) => {
    const marker = withMeta ? page.markers.get(p) : undefined;
    parts.push(`${i ? ',' : ''}{"prefix":${JSON.stringify(p)}${marker !== undefined ? `,"meta":${marker}` : ''}}`);
  });
  parts.push(']}');
  const body = Buffer.from(parts.join(''), 'utf8');
  setCommonHeaders(ctx);
  ctx.res.setHeader('Content-Type', JSON_LISTING.contentType);
  ctx.res.setHeader('Content-Length', body.length);
  ctx.res.writeHead(200);
  ctx.res.end(ctx.req.method === 'HEAD' ? undefined : body);
}

export async function deleteObjects(ctx: Ctx): Promise<void> {
  const hasChecksum = Object.keys(ctx.req.headers).some((h) => h.startsWith(xh(ctx, 'checksum-')) || h === xh(ctx, 'sdk-checksum-algorithm'));
  if (header(ctx, 'content-md5') === undefined && !hasChecksum) {
    throw new SvcError('InvalidRequest', 'Missing required header for this request: Content-MD5');
  }
  const { body } = await receiveSmall(ctx, 4 * 1024 * 1024);
  requireWrite(ctx);
  let keys: string[];
  let quiet: boolean;
  try {
    const doc = parseXml(body.toString('utf8'));
    if (!doc.Delete) throw new XmlError('no Delete element');
    const objs = (doc.Delete.Object ?? []) as any[];
    keys = objs.map((o) => {
      if (!o || typeof o !== 'object' || o.Key === undefined) throw new XmlError('Object without Key');
      return textOf(o.Key);
    });
    quiet = textOf(doc.Delete.Quiet).trim().toLowerCase() === 'true';
  } catch (e) {
    if (e instanceof XmlError) throw new SvcError('MalformedXML', 'The XML you provided was not well-formed or did not validate against our published schema');
    throw e;
  }
  if (keys.length === 0 || keys.length > ctx.cfg.maxBatchKeys) {
    throw new SvcError('MalformedXML', `The request must name between 1 and ${ctx.cfg.maxBatchKeys} objects`);
  }
  const deleted: XmlTree[] = [];
  const errors: XmlTree[] = [];
  const valid: string[] = [];
  for (const key of keys) {
    if (key === '' || Buffer.byteLength(key, 'utf8') > ctx.cfg.maxKeyBytes) {
      errors.push({ Key: key, Code: key === '' ? 'InvalidArgument' : 'KeyTooLongError', Message: key === '' ? 'An object key is required' : 'Your key is too long' });
    } else valid.push(key);
  }
  try {
    // one transaction for the lot (a sync of the log per key made a batch slower than single DELETEs)
    ctx.store.dropBlobs(ctx.store.deleteMany(ctx.bucket, valid).map((s) => s.id));
    if (!quiet) for (const key of valid) deleted.push({ Key: key });
  } catch {
    // rolled back whole: key by key, so that each failure is told apart
    for (const key of valid) {
      try {
        ctx.store.dropBlobs(ctx.store.delete(ctx.bucket, key).map((s) => s.id));
        if (!quiet) deleted.push({ Key: key });
      } catch (e) {
        errors.push({ Key: key, Code: 'InternalError', Message: (e as Error).message });
      }
    }
  }
  sendXml(ctx, 200, 'DeleteResult', { Deleted: deleted, Error: errors });
}

export function listBuckets(ctx: Ctx): void {
  finishEmpty(ctx);
  if (!ctx.user) throw new SvcError('AccessDenied', 'Access Denied');
  const u = ctx.user;
  const names = [...ctx.cfg.buckets].filter((b) => Users.canRead(u, b)).sort();
  sendXml(ctx, 200, 'ListAllMyBucketsResult', {
    Owner: { ID: u.accessKeyId, DisplayName: u.name },
    Buckets: { Bucket: names.map((Name) => ({ Name, CreationDate: isoDate(0) })) },
  });
}

export function headBucket(ctx: Ctx): void {
  finishEmpty(ctx);
  requireRead(ctx);
  sendEmpty(ctx, 200, { [ctx.dialect.name === 'aws' ? 'X-Amz-Bucket-Region' : 'X-Svc-Bucket-Region']: ctx.cfg.region });
}

export function bucketLocation(ctx: Ctx): void {
  finishEmpty(ctx);
  requireRead(ctx);
  sendXml(ctx, 200, 'LocationConstraint', {}, {});
}
