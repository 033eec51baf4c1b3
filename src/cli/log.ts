// pino loggers for every command. Secrets never reach a log line: the paths
// that could carry them are redacted, and request logs carry no headers.
import pino, { Logger } from 'pino';

export const REDACT = [
  'secretAccessKey', '*.secretAccessKey', 'credentials', '*.credentials', 'authorization', '*.authorization',
  'headers.authorization', '*.headers.authorization', 'signature', '*.signature',
];

export function makeLogger(level = 'info', file?: string): Logger {
  // Synchronous writes: a command may exit right after logging, and nothing may be lost then.
  const dest = file ? pino.destination({ dest: file, mkdir: true, sync: true }) : pino.destination({ dest: 2, sync: true });
  return pino({ level, redact: { paths: REDACT, censor: '[redacted]' }, base: { pid: process.pid } }, dest);
}
