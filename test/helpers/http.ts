// Hand-made HTTP requests to the server, signed (or not, or tampered) on purpose.
import { getGlobalDispatcher } from 'undici';
import { Dialect, SVC } from '../../src/wire/dialect';
import { encodePath, sha256Hex, signRequest } from '../../src/wire/signer';
import { parseXml } from '../../src/wire/xml';
import { ADMIN, TestServer } from './server';

export interface RawOptions {
  method: string;
  /** decoded /bucket/key */
  path: string;
  query?: Array<[string, string]>;
  headers?: Record<string, string>;
  body?: Buffer | string;
  dialect?: Dialect;
  /** null: anonymous */
  creds?: typeof ADMIN | null;
  /** the payload hash to sign; default: the body's SHA-256 */
  payloadHash?: string;
  omitContentSha256?: boolean;
  /** change the signed headers before sending */
  tamper?: (h: Record<string, string>) => void;
  now?: Date;
  /** send this body instead of the signed one */
  sendBody?: Buffer | string;
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  body: Buffer;
  code?: string;
}

/** Origin and query as a URL; the encoded path apart (URL would resolve dot segments). */
export function urlFor(s: TestServer, path: string, query: Array<[string, string]> = []): { url: URL; path: string } {
  const url = new URL(s.url);
  url.search = query.map(([k, v]) => (v === '' ? encodeURIComponent(k) : `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)).join('&');
  return { url, path: encodePath(path) };
}

export async function raw(s: TestServer, o: RawOptions): Promise<RawResponse> {
  const { url, path } = urlFor(s, o.path, o.query);
  const body = o.body === undefined ? undefined : Buffer.from(o.body);
  let headers: Record<string, string> = { ...(o.headers ?? {}) };
  if (body !== undefined) headers['content-length'] ??= String(body.length);
  if (o.creds !== null) {
    headers = signRequest({
      dialect: o.dialect ?? SVC, credentials: o.creds ?? ADMIN, region: 'us-east-1', method: o.method, url, path, headers,
      payloadHash: o.payloadHash ?? sha256Hex(body ?? ''), omitContentSha256: o.omitContentSha256, now: o.now,
    });
  }
  o.tamper?.(headers);
  const send = o.sendBody !== undefined ? Buffer.from(o.sendBody) : body;
  const res = await getGlobalDispatcher().request({ origin: url.origin, path: path + url.search, method: o.method as any, headers, body: send });
  const buf = Buffer.from(await res.body.arrayBuffer());
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(res.headers)) h[k] = Array.isArray(v) ? v.join(',') : String(v);
  const text = buf.toString('utf8');
  let code: string | undefined;
  if (text.includes('<Error>')) code = parseXml(text).Error?.Code;
  return { status: res.statusCode, headers: h, text, body: buf, code };
}
