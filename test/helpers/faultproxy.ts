// A fault-injecting HTTP proxy for the tests, between the mount and the
// server: it answers 500 or 503, resets connections in the middle of request
// bodies (multipart parts included), cuts responses in the middle of their
// bodies, or delays, at random with a given rate; or refuses the requests a
// test picks with the error it names; otherwise it forwards.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Fault = 'status500' | 'status503' | 'resetRequest' | 'cutResponse' | 'delay';
const FAULTS: Fault[] = ['status500', 'status503', 'resetRequest', 'cutResponse', 'delay'];

export interface FaultProxy {
  url: string;
  /** probability that a request meets a fault (0 to 1) */
  rate: number;
  /** when set, every connection is dropped: the server is unreachable */
  down: boolean;
  /** when set, a request is held this many milliseconds before it is forwarded (0: not held) */
  delayOf?: (req: http.IncomingMessage) => number;
  /** when set, a request it names an error for gets that error (e.g. 403 AccessDenied) instead of being forwarded */
  refuse?: (req: http.IncomingMessage) => { status: number; code: string } | undefined;
  /** requests refused that way */
  refused: number;
  counts: Record<Fault | 'forwarded', number>;
  close(): Promise<void>;
}

interface Tap {
  teardown(fn: () => unknown): void;
}

export async function startFaultProxy(t: Tap, target: string, rate: number): Promise<FaultProxy> {
  const up = new URL(target);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const p: FaultProxy = { url: '', rate, down: false, refused: 0, counts: { status500: 0, status503: 0, resetRequest: 0, cutResponse: 0, delay: 0, forwarded: 0 }, close: async () => undefined };
  const xmlError = (code: string) => `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>injected by the test proxy</Message></Error>`;

  const forward = (req: http.IncomingMessage, res: http.ServerResponse, cut: boolean) => {
    p.counts.forwarded++;
    const out = http.request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers: req.headers, agent }, (ur) => {
      if (cut) {
        // send the head and some of the body, then drop the connection
        res.writeHead(ur.statusCode ?? 502, ur.headers);
        let sent = 0;
        ur.on('data', (d: Buffer) => {
          if (sent === 0) res.write(d.subarray(0, Math.max(1, Math.floor(d.length / 2))));
          sent += d.length;
          res.socket?.destroy();
          ur.destroy();
        });
        ur.on('end', () => res.socket?.destroy());
        return;
      }
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.pipe(res);
    });
    out.on('error', () => res.socket?.destroy());
    req.pipe(out);
  };

  const server = http.createServer((req, res) => {
    if (p.down) {
      req.socket.destroy();
      return;
    }
    const no = p.refuse?.(req);
    if (no) {
      p.refused++;
      req.resume();
      req.on('end', () => {
        res.writeHead(no.status, { 'content-type': 'application/xml' });
        res.end(req.method === 'HEAD' ? undefined : xmlError(no.code));
      });
      return;
    }
    const held = p.delayOf?.(req) ?? 0;
    if (held > 0) {
      setTimeout(() => forward(req, res, false), held);
      return;
    }
    const fault = Math.random() < p.rate ? FAULTS[Math.floor(Math.random() * FAULTS.length)] : undefined;
    // multipart parts get the mid-body reset more often: the case that loses data in other tools
    const part = /[?&]partNumber=/.test(req.url ?? '');
    const f: Fault | undefined = fault && part && Math.random() < 0.5 ? 'resetRequest' : fault;
    if (f) p.counts[f]++;
    switch (f) {
      case 'status500':
      case 'status503': {
        req.resume();
        req.on('end', () => {
          res.writeHead(f === 'status500' ? 500 : 503, { 'content-type': 'application/xml', connection: 'close' });
          res.end(req.method === 'HEAD' ? undefined : xmlError(f === 'status500' ? 'InternalError' : 'SlowDown'));
        });
        return;
      }
      case 'resetRequest': {
        let seen = 0;
        const limit = Math.floor(Math.random() * 200_000);
        req.on('data', (d: Buffer) => {
          seen += d.length;
          if (seen > limit) req.socket.destroy();
        });
        req.on('end', () => req.socket.destroy());
        return;
      }
      case 'cutResponse':
        return forward(req, res, true);
      case 'delay':
        setTimeout(() => forward(req, res, false), 100 + Math.random() * 700);
        return;
      default:
        return forward(req, res, false);
    }
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  p.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  p.close = async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    agent.destroy();
  };
  t.teardown(() => p.close());
  return p;
}
