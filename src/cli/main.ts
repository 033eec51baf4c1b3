// The `svcfs` command line.
import { Command, InvalidArgumentError } from 'commander';
import { makeLogger } from './log';
import { serve } from './serve';

function intArg(min: number, max: number) {
  return (v: string) => {
    if (!/^\d+$/.test(v) || +v < min || +v > max) throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}`);
    return +v;
  };
}

const collect = (v: string, prev: string[]) => [...prev, v];

export function program(): Command {
  const p = new Command('svcfs')
    .description('Mount an object storage bucket as a local directory; serve the object storage interface.')
    .showHelpAfterError('(run with --help for usage)')
    .option('--log-level <level>', 'fatal|error|warn|info|debug|trace', 'info')
    .option('--log-file <file>', 'write logs to this file instead of stderr');

  p.command('serve')
    .description('run the embedded object server')
    .requiredOption('--data <dir>', 'data directory (index and blobs)')
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0: any free port)', intArg(0, 65535), 9000)
    .option('--region <region>', 'region name', 'us-east-1')
    .option('--bucket <name>', 'a bucket to serve (repeatable)', collect, [] as string[])
    .option('--users <file>', 'users file (default: DATA/users.json)')
    .option('--xml-namespace <uri>', 'XML namespace of response bodies')
    .addHelpText('after', `
Credentials: SVC_ACCESS_KEY_ID and SVC_SECRET_ACCESS_KEY become a user with write access to
every bucket; without them a user is created on first start and its keys printed once.

Example:
  svcfs serve --data /var/lib/svcfs --bucket photos --bucket backup --port 9000`)
    .action(async (o) => {
      if (o.bucket.length === 0) p.error('error: serve needs at least one --bucket NAME', { exitCode: 2 });
      const g = p.opts();
      await serve(o, makeLogger(g.logLevel, g.logFile));
    });

  return p;
}

export function main(argv: string[]): void {
  program()
    .exitOverride((e) => process.exit(e.exitCode === 1 && e.code !== 'commander.error' ? 2 : e.exitCode))
    .parseAsync(argv, { from: 'user' })
    .catch((e: Error) => {
      process.stderr.write(`svcfs: ${e.message}\n`);
      process.exit(1);
    });
}
