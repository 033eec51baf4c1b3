// One request as the handlers see it, and the ways to answer it.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Log } from '../cli/log';
import { Dialect } from '../wire/dialect';
import { SvcError } from '../wire/errors';
import { buildXml, XmlTree } from '../wire/xml';
import type { Pending } from './auth';
import type { Store } from './store';
import type { User } from './users';

export interface ServerConfig {
  region: string;
  xmlNamespace: string;
  buckets: Set<string>;
  /** smallest part but the last in a completed multipart upload (S3: 5 MiB) */
  minPartSize: number;
  /** largest single PUT (S3: 5 GiB) */
  maxPutSize: number;
  maxKeyBytes: number;
  maxBatchKeys: number;
  maxTags: number;
  maxMetaBytes: number;
}

export interface Ctx {
  /** the operation (S3's name), once the request is routed: labels metrics */
  op?: string;
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  log: Log;
  store: Store;
  cfg: ServerConfig;
  dialect: Dialect;
  auth: Pending;
  /** set once the signature is verified */
  user?: User;
  bucket: string;
  key: string;
  query: Map<string, string>;
  /** true once the request body has been read to its end */
  bodyDone: boolean;
}

/** `x-svc-` + name, in the request's dialect. */
export function xh(ctx: Ctx, name: string): string {
  return ctx.dialect.headerPrefix + name;
}

export function header(ctx: Ctx, name: string): string | undefined {
  const v = ctx.req.headers[name.toLowerCase()];
  return Array.isArray(v) ? v.join(',') : v;
}

export function setCommonHeaders(ctx: Ctx): void {
  const p = ctx.dialect.name === 'aws' ? 'X-Amz-' : 'X-Svc-';
  ctx.res.setHeader(`${p}Request-Id`, ctx.requestId);
  ctx.res.setHeader('Server', 'svcfs');
}

export function sendEmpty(ctx: Ctx, status: number, headers: Record<string, string | number> = {}): void {
  setCommonHeaders(ctx);
  for (const [k, v] of Object.entries(headers)) ctx.res.setHeader(k, v);
  ctx.res.setHeader('Content-Length', 0);
  ctx.res.writeHead(status);
  ctx.res.end();
}

export function sendXml(ctx: Ctx, status: number, root: string, body: XmlTree, headers: Record<string, string> = {}): void {
  const xml = Buffer.from(buildXml(root, body, ctx.cfg.xmlNamespace), 'utf8');
  setCommonHeaders(ctx);
  for (const [k, v] of Object.entries(headers)) ctx.res.setHeader(k, v);
  ctx.res.setHeader('Content-Type', 'application/xml');
  ctx.res.setHeader('Content-Length', xml.length);
  ctx.res.writeHead(status);
  ctx.res.end(ctx.req.method === 'HEAD' ? undefined : xml);
}

export function sendError(ctx: Ctx, e: SvcError): void {
  const res = ctx.res;
  if (res.headersSent) {
    res.destroy(e);
    return;
  }
  // An unread body would be parsed as the next request: close the connection after answering.
  if (!ctx.bodyDone && ctx.req.method !== 'GET' && ctx.req.method !== 'HEAD') res.setHeader('Connection', 'close');
  const resource = '/' + ctx.bucket + (ctx.key ? '/' + ctx.key : '');
  if (ctx.req.method === 'HEAD') {
    setCommonHeaders(ctx);
    res.setHeader('Content-Length', 0);
    res.writeHead(e.status);
    res.end();
    return;
  }
  const xml = Buffer.from(
    `<?xml version="1.0" encoding="UTF-8"?>\n` +
      buildXml('Error', { Code: e.code, Message: e.message, Resource: resource, RequestId: ctx.requestId }).replace(/^<\?xml[^>]*>\n/, ''),
    'utf8',
  );
  setCommonHeaders(ctx);
  res.setHeader('Content-Type', 'application/xml');
  res.setHeader('Content-Length', xml.length);
  res.writeHead(e.status);
  res.end(xml);
}

export function isoDate(ms: number): string {
  return new Date(ms).toISOString();
}
