// GETs whose body goes from the socket straight into the caller's buffer.
//
// A cold sequential read through the mount is ranged GETs of 8 MiB. Through
// undici, every socket read lands in a fresh 64 KiB buffer that Node allocates,
// is copied into llhttp's WebAssembly memory to be parsed, then copied to its
// place; and the allocations (as many bytes as the file) start a full garbage
// collection every 64 MiB. Here the socket reads the body into the destination
// itself (net.Socket's `onread`, with the buffer chosen before each read): no
// copy in JavaScript, no allocation, no collection. A 2 GiB cold read through a
// mount: the mount's user CPU 0.8-1.0 s -> 0.35-0.4 s.
//
// Only what such a GET needs: HTTP/1.1 with keep-alive, over http or https, a
// body framed by Content-Length. Anything else (a chunked body, no length) is
// refused with UnsupportedResponse before a byte is taken: the caller sends the
// request again through undici.
import * as net from 'node:net';
import * as tls from 'node:tls';

export interface IntoResult {
  status: number;
  headers: Record<string, string>;
  /** body bytes placed in the buffer (success) */
  received: number;
  /** the body of an error response */
  text: string;
}

/** The response is not one this path reads (chunked, no Content-Length): send the request another way. */
export class UnsupportedResponse extends Error {}

/** A connection failure with a code the callers' retry rules know (network errors are retried). */
class ConnError extends Error {
  constructor(message: string, readonly code: string) {
    super(message);
  }
}

/** A kept-alive connection closed as the request went out (nothing came back): try a new one. */
class StaleConnection extends Error {}

const HEAD_MAX = 64 * 1024;
const ERROR_TEXT_MAX = 64 * 1024;
/** an idle connection is closed before the server's keep-alive limit would (Node's is 5 s) */
const IDLE_MS = 4_000;

interface Job {
  into: Buffer;
  resolve: (r: IntoResult) => void;
  reject: (e: unknown) => void;
  /** the response head, while it is incomplete */
  head: Buffer[];
  headLen: number;
  status: number;
  headers: Record<string, string>;
  /** body length (-1: head not read yet) */
  length: number;
  got: number;
  text?: Buffer;
  close: boolean;
}

class Conn {
  readonly socket: net.Socket;
  job?: Job;
  /** it served a response before: a close before any answer may be its keep-alive ending */
  reused = false;
  private readonly scratch = Buffer.allocUnsafe(16 * 1024);

  constructor(url: URL, private readonly o: DirectGetsOptions, private readonly gone: (c: Conn) => void) {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const https = url.protocol === 'https:';
    const port = Number(url.port) || (https ? 443 : 80);
    const onread = { buffer: () => this.nextBuffer(), callback: (n: number, b: Buffer) => { this.took(n, b); return true; } };
    this.socket = https
      ? tls.connect({ host, port, servername: net.isIP(host) ? undefined : host, ALPNProtocols: ['http/1.1'],
        ...(o.ca ? { ca: [...tls.rootCertificates, o.ca.toString()] } : {}),
        // (tls.connect passes onread to its socket; the typings do not list it)
        ...({ onread } as object) })
      : net.connect({ host, port, onread });
    this.socket.setNoDelay(true);
    this.socket.on('error', (e) => this.end(e));
    this.socket.on('close', () => this.end());
    this.socket.on('timeout', () => this.end(this.job ? new ConnError('the store sent nothing for too long', 'ETIMEDOUT') : undefined));
  }

  send(path: string, headers: Record<string, string>, into: Buffer): Promise<IntoResult> {
    let req = `GET ${path} HTTP/1.1\r\n`;
    for (const [k, v] of Object.entries(headers)) {
      if (/[\r\n]/.test(k) || /[\r\n]/.test(v)) return Promise.reject(new TypeError(`invalid header ${k}`));
      req += `${k}: ${v}\r\n`;
    }
    return new Promise((resolve, reject) => {
      this.job = { into, resolve, reject, head: [], headLen: 0, status: 0, headers: {}, length: -1, got: 0, close: false };
      this.socket.setTimeout(this.o.headersTimeoutMs);
      this.socket.write(`${req}\r\n`, 'latin1');
    });
  }

  /** Where the next socket read goes: the caller's buffer once the body started, else scratch. */
  private nextBuffer(): Buffer {
    const j = this.job;
    if (j && j.length >= 0 && !j.text && j.got < j.length) return j.into.subarray(j.got, j.length);
    return this.scratch;
  }

  private took(n: number, b: Buffer): void {
    const j = this.job;
    if (!j) return this.end(); // bytes nobody asked for: this connection cannot be trusted
    if (j.length >= 0) return this.body(j, b, 0, n);
    j.head.push(Buffer.from(b.subarray(0, n)));
    j.headLen += n;
    const all = j.head.length === 1 ? j.head[0]! : Buffer.concat(j.head);
    j.head = [all];
    const at = all.indexOf('\r\n\r\n');
    if (at < 0) {
      if (j.headLen > HEAD_MAX) this.end(new ConnError('response head too long', 'EPROTO'));
      return;
    }
    if (!this.parseHead(j, all.toString('latin1', 0, at))) return;
    j.head = [];
    if (j.status >= 100 && j.status < 200) {
      // an interim response: the real one follows
      const rest = all.subarray(at + 4);
      j.headLen = 0;
      if (rest.length) this.took(rest.length, rest);
      return;
    }
    this.socket.setTimeout(this.o.bodyTimeoutMs);
    this.body(j, all, at + 4, all.length);
  }

  /** Status line and headers; false when the response is not one this path takes (the job is over). */
  private parseHead(j: Job, text: string): boolean {
    const lines = text.split('\r\n');
    const m = /^HTTP\/1\.([01]) (\d{3})/.exec(lines[0] ?? '');
    if (!m) {
      this.end(new ConnError(`not an HTTP/1.x response: ${JSON.stringify(lines[0]?.slice(0, 40))}`, 'EPROTO'));
      return false;
    }
    j.status = Number(m[2]);
    j.headers = {};
    for (const line of lines.slice(1)) {
      const c = line.indexOf(':');
      if (c <= 0) continue;
      const k = line.slice(0, c).trim().toLowerCase();
      const v = line.slice(c + 1).trim();
      j.headers[k] = j.headers[k] === undefined ? v : `${j.headers[k]},${v}`;
    }
    if (j.status < 200) return true;
    const cl = j.headers['content-length'];
    if (j.headers['transfer-encoding'] !== undefined || cl === undefined || !/^\d+$/.test(cl)) {
      this.end(new UnsupportedResponse(`a ${j.status} response without a Content-Length body`));
      return false;
    }
    j.length = Number(cl);
    j.close = m[1] === '0' || /(^|,)\s*close\s*(,|$)/i.test(j.headers.connection ?? '');
    if (j.status >= 200 && j.status < 300) {
      if (j.length !== j.into.length) {
        this.end(new ConnError(`a body of ${j.length} bytes for ${j.into.length} asked`, 'ERANGE'));
        return false;
      }
    } else {
      j.text = Buffer.allocUnsafe(Math.min(j.length, ERROR_TEXT_MAX));
    }
    return true;
  }

  /** Body bytes b[from, to): in place already (read into the caller's buffer), or copied there. */
  private body(j: Job, b: Buffer, from: number, to: number): void {
    const n = Math.min(to - from, j.length - j.got);
    if (j.text) {
      if (j.got < j.text.length) b.copy(j.text, j.got, from, from + Math.min(n, j.text.length - j.got));
    } else if (!(b.buffer === j.into.buffer && b.byteOffset + from === j.into.byteOffset + j.got)) {
      b.copy(j.into, j.got, from, from + n);
    }
    j.got += n;
    if (to - from > n) return this.end(new ConnError('more bytes than the response announced', 'EPROTO'));
    if (j.got < j.length) return;
    this.job = undefined;
    const text = j.text ? j.text.toString('utf8', 0, Math.min(j.got, j.text.length)) : '';
    j.resolve({ status: j.status, headers: j.headers, received: j.text ? 0 : j.got, text });
    if (j.close) return this.end();
    this.reused = true;
    this.socket.setTimeout(IDLE_MS);
    this.gone(this); // back to the pool (`end` takes it out for good)
  }

  /** Close the connection; a job still on it fails with `e` (a reset when none is given). */
  end(e?: unknown): void {
    const j = this.job;
    this.job = undefined;
    if (!this.socket.destroyed) this.socket.destroy();
    if (j) {
      const code = (e as { code?: string } | undefined)?.code;
      const silent = j.headLen === 0 && j.length === -1 && (e === undefined || code === 'ECONNRESET' || code === 'EPIPE' || code === 'ERR_STREAM_WRITE_AFTER_END');
      if (silent && this.reused) j.reject(new StaleConnection());
      else j.reject(e ?? new ConnError('the connection closed before the response ended', 'ECONNRESET'));
    }
    this.gone(this);
  }
}

export interface DirectGetsOptions {
  ca?: string | Buffer;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  /** connections in use at most; past it `get` answers undefined */
  maxSockets: number;
}

/** GET into a buffer over a small pool of keep-alive connections to one origin. */
export class DirectGets {
  private readonly idle: Conn[] = [];
  private busy = 0;
  private closed = false;
  /** connections opened, requests sent (for tests and `svcfs status`) */
  opened = 0;
  sent = 0;

  constructor(private readonly url: URL, private readonly o: DirectGetsOptions) {}

  /**
   * GET path (with its query) with these headers (host included), the body
   * into `into`, whose length is what a success must carry. undefined: every
   * connection is busy (send it another way).
   */
  get(path: string, headers: Record<string, string>, into: Buffer): Promise<IntoResult> | undefined {
    if (this.closed || this.busy >= this.o.maxSockets) return undefined;
    this.busy++;
    this.sent++;
    const run = async (): Promise<IntoResult> => {
      try {
        let c = this.idle.pop();
        // (one the server ended a moment ago, its close not handled yet)
        while (c && !c.socket.writable) {
          c.end();
          c = this.idle.pop();
        }
        if (c) {
          try {
            return await c.send(path, headers, into);
          } catch (e) {
            // the server closed a kept-alive connection as the request went out: once more on a new one
            if (!(e instanceof StaleConnection)) throw e;
          }
        }
        return await this.open().send(path, headers, into);
      } finally {
        this.busy--;
      }
    };
    return run();
  }

  close(): void {
    this.closed = true;
    for (const c of this.idle.splice(0)) c.end();
  }

  private open(): Conn {
    this.opened++;
    const c: Conn = new Conn(this.url, this.o, (conn) => {
      const i = this.idle.indexOf(conn);
      if (conn.socket.destroyed) {
        if (i >= 0) this.idle.splice(i, 1);
      } else if (i < 0 && !conn.job) {
        if (this.closed || this.idle.length >= this.o.maxSockets) conn.end();
        else this.idle.push(conn);
      }
    });
    return c;
  }
}
