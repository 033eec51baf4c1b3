// pino loggers for every command. Secrets never reach a log line: the paths
// that could carry them are redacted, and request logs carry no headers.
// A person at a terminal reads sentences (`svcfs: warning: ...`); a log file,
// or --log-format json, gets one JSON object per line for machines.
import pino, { Logger } from 'pino';

export const REDACT = [
  'secretAccessKey', '*.secretAccessKey', 'credentials', '*.credentials', 'authorization', '*.authorization',
  'headers.authorization', '*.headers.authorization', 'signature', '*.signature',
];

export type LogFormat = 'human' | 'json';

const TAGS: Array<[number, string]> = [[50, 'error: '], [40, 'warning: '], [30, ''], [20, 'debug: '], [0, 'trace: ']];

/** One pino JSON line as a sentence: the message, then its details as key=value. */
export function humanLine(json: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json);
  } catch {
    return json;
  }
  const { level, time: _time, pid: _pid, hostname: _host, msg, ...rest } = o;
  const tag = TAGS.find(([l]) => Number(level) >= l)?.[1] ?? '';
  const details = Object.entries(rest)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? (/\s/.test(v) ? JSON.stringify(v) : v) : JSON.stringify(v)}`)
    .join(' ');
  return `svcfs: ${tag}${msg ?? ''}${details ? ` (${details})` : ''}\n`;
}

export function makeLogger(level = 'info', file?: string, format: LogFormat = file ? 'json' : 'human'): Logger {
  // Synchronous writes: a command may exit right after logging, and nothing may be lost then.
  const fd = file ? pino.destination({ dest: file, mkdir: true, sync: true }) : pino.destination({ dest: 2, sync: true });
  const dest = format === 'human' ? { write: (line: string) => void fd.write(humanLine(line)) } : fd;
  return pino({ level, redact: { paths: REDACT, censor: '[redacted]' }, base: { pid: process.pid } }, dest);
}
