// pino loggers for every command. Secrets never reach a log line: the paths
// that could carry them are redacted, and request logs carry no headers.
// A person at a terminal reads sentences (`svcfs: warning: ...`); a log file,
// or --log-format json, gets one JSON object per line for machines.
//
// pino itself is loaded at the first line written at an enabled level: its
// import is ~15 ms of a mount's 0.3 s start, and a mount at the default level
// writes nothing before it is ready.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Logger } from 'pino';
import { UsageError } from './config';

/** What svcfs logs through: these methods of pino's (a pino logger is one). */
export type Log = Pick<Logger, 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'flush'>;

const LEVELS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Infinity };

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

export function makeLogger(level = 'info', file?: string, format: LogFormat = file ? 'json' : 'human'): Log {
  const min = LEVELS[level];
  if (min === undefined) throw new UsageError(`--log-level must be one of ${Object.keys(LEVELS).join(', ')}; got "${level}"`);
  // The file is opened now: a log file that cannot be written fails the command at once.
  let out = 2;
  if (file) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    out = fs.openSync(file, 'a');
  }
  let real: Logger | undefined;
  const logger = (): Logger => {
    if (real) return real;
    const pino = require('pino') as typeof import('pino');
    // Synchronous writes: a command may exit right after logging, and nothing may be lost then.
    const fd = pino.destination({ dest: out, sync: true });
    const dest = format === 'human' ? { write: (line: string) => void fd.write(humanLine(line)) } : fd;
    return (real = pino({ level, redact: { paths: REDACT, censor: '[redacted]' }, base: { pid: process.pid } }, dest));
  };
  const noop = () => undefined;
  const at = (name: keyof typeof LEVELS & keyof Logger) =>
    (LEVELS[name] < min ? noop : (...args: unknown[]) => (logger()[name] as (...a: unknown[]) => void)(...args)) as Logger['info'];
  return {
    trace: at('trace'), debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), fatal: at('fatal'),
    flush: (cb?: (err?: Error) => void) => (real ? real.flush(cb) : cb?.()),
  };
}
