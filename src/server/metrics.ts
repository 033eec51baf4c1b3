// Metrics of the object server in Prometheus's text format: requests by
// operation and status, bytes received and sent, and a latency histogram by
// operation. Served, with a health check, on a listener of their own
// (`svcfs serve --metrics [HOST:]PORT`), so that they need no signature and
// can stay off the service's port and network.
import * as http from 'node:http';
import type { IncomingMessage } from 'node:http';

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface Histogram { counts: number[]; sum: number; count: number }

/** S3 names a copy by its header, not its method and path. */
function operation(op: string | undefined, req: IncomingMessage): string {
  if (!op) return 'Unrouted';
  const copy = req.headers['x-amz-copy-source'] !== undefined || req.headers['x-svc-copy-source'] !== undefined;
  if (copy && op === 'PutObject') return 'CopyObject';
  if (copy && op === 'UploadPart') return 'UploadPartCopy';
  return op;
}

const label = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

export class Metrics {
  private readonly requests = new Map<string, number>();
  private readonly latency = new Map<string, Histogram>();
  bytesReceived = 0;
  bytesSent = 0;
  private readonly started = Date.now();

  /** One finished request. */
  observe(op: string | undefined, req: IncomingMessage, status: number, seconds: number, received: number, sent: number): void {
    const name = operation(op, req);
    const key = `${name}\u0000${status}`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
    let h = this.latency.get(name);
    if (!h) this.latency.set(name, (h = { counts: BUCKETS.map(() => 0), sum: 0, count: 0 }));
    BUCKETS.forEach((b, i) => {
      if (seconds <= b) h!.counts[i]++;
    });
    h.sum += seconds;
    h.count++;
    this.bytesReceived += received;
    this.bytesSent += sent;
  }

  render(): string {
    const out: string[] = [];
    out.push('# HELP svcfs_requests_total Requests answered, by operation and HTTP status.', '# TYPE svcfs_requests_total counter');
    for (const [key, n] of [...this.requests].sort()) {
      const [op, status] = key.split('\u0000');
      out.push(`svcfs_requests_total{operation="${label(op)}",status="${status}"} ${n}`);
    }
    out.push('# HELP svcfs_received_bytes_total Bytes received from clients (headers and bodies).', '# TYPE svcfs_received_bytes_total counter');
    out.push(`svcfs_received_bytes_total ${this.bytesReceived}`);
    out.push('# HELP svcfs_sent_bytes_total Bytes sent to clients (headers and bodies).', '# TYPE svcfs_sent_bytes_total counter');
    out.push(`svcfs_sent_bytes_total ${this.bytesSent}`);
    out.push('# HELP svcfs_request_duration_seconds Time from a request\'s arrival to the end of its answer, by operation.', '# TYPE svcfs_request_duration_seconds histogram');
    for (const [op, h] of [...this.latency].sort()) {
      const l = label(op);
      BUCKETS.forEach((b, i) => out.push(`svcfs_request_duration_seconds_bucket{operation="${l}",le="${b}"} ${h.counts[i]}`));
      out.push(`svcfs_request_duration_seconds_bucket{operation="${l}",le="+Inf"} ${h.count}`);
      out.push(`svcfs_request_duration_seconds_sum{operation="${l}"} ${h.sum}`, `svcfs_request_duration_seconds_count{operation="${l}"} ${h.count}`);
    }
    out.push('# HELP svcfs_uptime_seconds Seconds since the server started.', '# TYPE svcfs_uptime_seconds gauge');
    out.push(`svcfs_uptime_seconds ${Math.round((Date.now() - this.started) / 1000)}`);
    return out.join('\n') + '\n';
  }
}

/**
 * The metrics listener: GET /-/metrics (Prometheus text) and GET /-/health
 * (200 when the index answers, 503 when it does not).
 */
export function metricsServer(metrics: Metrics, healthy: () => boolean): http.Server {
  return http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
    } else if (path === '/-/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(metrics.render());
    } else if (path === '/-/health') {
      const ok = healthy();
      res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ status: ok ? 'ok' : 'unavailable' }) + '\n');
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /-/metrics or /-/health\n');
    }
  });
}
