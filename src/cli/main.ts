// The `svcfs` command line. Exit codes: 0 success, 1 failure at run time,
// 2 wrong usage (unknown option, missing argument, bad value).
import { Argument, Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { dialectByName } from '../wire/dialect';
import { encodePath, MAX_PRESIGN_EXPIRES, presignedUrlString } from '../wire/signer';
import { MountError } from '../fs/mountpoint';
import { loadConfig, loadCredentials, UsageError } from './config';
import { makeLogger } from './log';
import { mountCommand, parseTarget, statusCommand, unmountCommand } from './mount';

// The server, its SQLite index and the demo load only for the commands that use them: a mount starts sooner.
const admin = () => require('../server/admin') as typeof import('../server/admin');
const server = () => require('./serve') as typeof import('./serve');
const demoRun = () => require('./demo') as typeof import('./demo');
const install = () => require('./install') as typeof import('./install');

function intArg(min: number, max: number) {
  return (v: string) => {
    if (!/^\d+$/.test(v) || +v < min || +v > max) throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}`);
    return +v;
  };
}

const collect = (v: string, prev: string[]) => [...prev, v];

/** `svcfs serve user ...` and `svcfs serve bucket ...`: --data is parsed by `serve` itself. */
function adminCommands(serveCmd: Command): void {
  const data = (cmd: Command) => (cmd.optsWithGlobals() as { data: string }).data;
  const user = serveCmd.command('user').description('the users of a server: keys and per-bucket permissions');
  user.command('add')
    .description('create a user and print its keys (once)')
    .argument('<name>')
    .option('--read <buckets>', 'buckets it may read, comma-separated, or * (writing implies reading)', '')
    .option('--write <buckets>', 'buckets it may write, comma-separated, or *', '')
    .addHelpText('after', '\nExample:\n  svcfs serve user add alice --write photos --read backup --data /var/lib/svcfs')
    .action((name: string, o, cmd: Command) => {
      const u = admin().userAdd(data(cmd), name, o);
      process.stdout.write(`created user "${u.name}" (reads: ${u.read.join(',') || '-'}; writes: ${u.write.join(',') || '-'}):\n  SVC_ACCESS_KEY_ID=${u.accessKeyId}\n  SVC_SECRET_ACCESS_KEY=${u.secretAccessKey}\n`);
    });
  user.command('list')
    .description('users, their access key IDs and permissions (never the secrets)')
    .action((_o, cmd: Command) => {
      for (const u of admin().userList(data(cmd))) process.stdout.write(`${u.name}\t${u.accessKeyId}\treads ${u.read.join(',') || '-'}\twrites ${u.write.join(',') || '-'}\n`);
    });
  user.command('remove')
    .description('delete a user; its keys stop working')
    .argument('<name>')
    .action((name: string, _o, cmd: Command) => {
      admin().userRemove(data(cmd), name);
      process.stdout.write(`removed user "${name}"\n`);
    });
  user.command('rotate')
    .description('give a user new keys (printed once); the old ones stop working')
    .argument('<name>')
    .action((name: string, _o, cmd: Command) => {
      const u = admin().userRotate(data(cmd), name);
      process.stdout.write(`new keys for "${u.name}":\n  SVC_ACCESS_KEY_ID=${u.accessKeyId}\n  SVC_SECRET_ACCESS_KEY=${u.secretAccessKey}\n`);
    });
  const bucket = serveCmd.command('bucket').description('the buckets of a server');
  bucket.command('add').description('create a bucket').argument('<name>').action((name: string, _o, cmd: Command) => {
    process.stdout.write(admin().bucketAdd(data(cmd), name) ? `created bucket "${name}"\n` : `bucket "${name}" exists\n`);
  });
  bucket.command('list').description('the buckets').action((_o, cmd: Command) => {
    for (const b of admin().loadBuckets(data(cmd))) process.stdout.write(`${b}\n`);
  });
  bucket.command('remove').description('delete an empty bucket').argument('<name>').action((name: string, _o, cmd: Command) => {
    admin().bucketRemove(data(cmd), name);
    process.stdout.write(`removed bucket "${name}"\n`);
  });
}

export function program(): Command {
  const p = new Command('svcfs')
    .description('Mount an object storage bucket as a local directory, and serve the object storage interface.')
    .version((require('../../package.json') as { version: string }).version, '-V, --version')
    .showHelpAfterError('(run with --help for usage)')
    .option('--log-level <level>', 'fatal|error|warn|info|debug|trace', 'info')
    .option('--log-file <file>', 'write logs to this file instead of stderr')
    .addOption(new Option('--log-format <format>', 'log lines as sentences (human: the default on a terminal) or JSON objects (json: the default in a log file)').choices(['human', 'json']));

  const serveCmd = p.command('serve')
    .description('run the embedded object server')
    .requiredOption('--data <dir>', 'data directory (index and blobs)')
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0: any free port)', intArg(0, 65535), 9000)
    .option('--region <region>', 'region name', 'us-east-1')
    .option('--bucket <name>', 'a bucket to serve (repeatable)', collect, [] as string[])
    .option('--users <file>', 'users file (default: DATA/users.json)')
    .option('--xml-namespace <uri>', 'XML namespace of response bodies')
    .option('--tls-cert <file>', 'serve HTTPS: the certificate chain (PEM); needs --tls-key')
    .option('--tls-key <file>', 'the private key (PEM) of --tls-cert')
    .option('--metrics <[host:]port>', 'serve Prometheus metrics at /-/metrics (and /-/health) on this address (default host 127.0.0.1; off by default)')
    .addHelpText('after', `
Credentials: SVC_ACCESS_KEY_ID and SVC_SECRET_ACCESS_KEY become a user with write access to
every bucket; without them a user is created on first start and its keys printed once.

Users and buckets (kept in the data directory; a running server picks up changes):
  svcfs serve user add|list|remove|rotate ... --data DIR
  svcfs serve bucket add|list|remove ... --data DIR

Examples:
  svcfs serve --data /var/lib/svcfs --bucket photos --bucket backup --port 9000
  svcfs serve --data /var/lib/svcfs --host 0.0.0.0 --tls-cert cert.pem --tls-key key.pem --metrics 9100`)
    .action(async (o) => {
      const g = p.opts();
      await server().serve(o, makeLogger(g.logLevel, g.logFile, g.logFormat));
    });
  adminCommands(serveCmd);

  p.command('mount')
    .description('mount BUCKET (or a PREFIX inside it) at MOUNTPOINT')
    .argument('<bucket[:prefix]>', 'the bucket, optionally with a key prefix to mount')
    .argument('<mountpoint>', 'an empty directory')
    .option('--endpoint <url>', 'the service, e.g. http://127.0.0.1:9000')
    .option('--region <region>', 'region to sign for (default us-east-1)')
    .addOption(new Option('--dialect <dialect>', 'signing dialect: svc (default), or aws for any S3-compatible store').choices(['svc', 'aws']))
    .addOption(new Option('--signature <v>', 'signature scheme (default v4)').choices(['v4', 'v2']))
    .option('--config <file>', 'config file with defaults (default ~/.config/svcfs/config)')
    .option('-f, --foreground', 'stay attached (default: run in the background once mounted)')
    .option('-o <options>', 'mount options, comma-separated (repeatable)', collect, [] as string[])
    .option('--credentials <file>', 'credentials file (default ~/.config/svcfs/credentials, mode 600)')
    .option('--profile <name>', 'profile in the credentials file', undefined)
    .option('--ca <file>', 'PEM certificates to trust for an https:// endpoint (a private CA or a self-signed server)')
    .addHelpText('after', `
Mount options (-o): allow_other, ro, uid=N, gid=N, umask=022, cache_ttl=SECONDS (30),
  cache_dir=DIR (~/.cache/svcfs), retry_budget=SECONDS (60), write_back=SECONDS (off),
  memory_limit=MIB (64: read-ahead and upload buffers together; the process stays near it plus ~90 MiB),
  conflict_check=on|head|off (on: conditional uploads; head: compare ETags first),
  payload_hash=auto|always|never (sign uploads with their SHA-256; auto: unless https or loopback), nonempty,
  sync_unlink (each unlink waits for its own DELETE; by default an unlink in a directory where one went
  through is answered first and its key sent in a batch; rmdir, fsync of the directory and unmount wait),
  and for mount(8)/fstab: endpoint=URL, region=R, dialect=svc|aws, profile=P, credentials=FILE, ca=FILE

Config file (~/.config/svcfs/config, one [section] per profile), defaults that flags override:
  [default]
  endpoint = http://127.0.0.1:9000
  region = us-east-1
  dialect = svc
  options = cache_ttl=60,write_back=5

Examples:
  svcfs mount photos ~/photos --endpoint http://127.0.0.1:9000
  svcfs mount backup:hosts/web1 /mnt/web1 --endpoint https://s3.example.com --dialect aws -o allow_other,cache_ttl=60
  svcfs mount photos ~/photos --endpoint http://127.0.0.1:9000 --foreground --log-level debug`)
    .action(async (target: string, mountpoint: string, o) => {
      const g = p.opts();
      await mountCommand(target, mountpoint, { ...o, logLevel: g.logLevel, logFile: g.logFile, logFormat: g.logFormat });
    });

  p.command('demo')
    .description('try svcfs: a local server with a sample bucket, mounted at ./mnt (Ctrl-C stops)')
    .argument('[mountpoint]', 'where to mount', 'mnt')
    .option('--data <dir>', 'data directory (default ~/.local/share/svcfs/demo, kept between runs)')
    .option('--port <port>', 'server port (another free one when taken)', intArg(0, 65535), 9000)
    .addHelpText('after', '\nExample:\n  svcfs demo            # then, in another terminal: ls -l mnt')
    .action((mountpoint: string, o) => {
      const g = p.opts();
      return demoRun().demo({ ...o, mountpoint }, makeLogger(g.logLevel === 'info' ? 'warn' : g.logLevel, g.logFile, g.logFormat));
    });

  p.command('unmount')
    .alias('umount')
    .description('upload what is pending, then unmount')
    .argument('<mountpoint>')
    .option('--force', 'unmount at once, without waiting for pending uploads')
    .option('--timeout <seconds>', 'how long to wait for pending uploads', intArg(1, 86400), 600)
    .addHelpText('after', '\nExample:\n  svcfs unmount ~/photos')
    .action((mountpoint: string, o) => unmountCommand(mountpoint, o));

  p.command('install-helper')
    .description('link mount.svcfs where mount(8) looks (for mount -t svcfs and /etc/fstab), and svcfs onto the PATH')
    .option('--dir <dir>', 'where mount(8) looks for helpers', '/sbin')
    .option('--bin <dir>', 'also link svcfs into this directory on the PATH (e.g. /usr/local/bin)')
    .option('--man <dir>', 'also link the manual page svcfs.1 into this directory (e.g. /usr/local/share/man/man1)')
    .addHelpText('after', '\nExamples:\n  sudo svcfs install-helper\n  sudo bin/svcfs.js install-helper --bin /usr/local/bin --man /usr/local/share/man/man1')
    .action((o) => install().installHelper(o));

  p.command('status')
    .description('cache, requests and pending uploads of a running mount')
    .argument('<mountpoint>')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  svcfs status ~/photos')
    .action((mountpoint: string, o) => statusCommand(mountpoint, o));

  p.command('presign')
    .description('print a pre-signed URL for one operation on one object')
    .addArgument(new Argument('<method>', 'GET, PUT, HEAD or DELETE').choices(['GET', 'PUT', 'HEAD', 'DELETE']))
    .argument('<bucket/key>', 'the object')
    .option('--endpoint <url>', 'the service, e.g. http://127.0.0.1:9000 (or from the config file)')
    .option('--region <region>', 'region to sign for (default us-east-1)')
    .option('--expires <seconds>', `validity, 1 to ${MAX_PRESIGN_EXPIRES}`, intArg(1, MAX_PRESIGN_EXPIRES), 3600)
    .addOption(new Option('--dialect <dialect>', 'signing dialect (default svc)').choices(['svc', 'aws']))
    .option('--config <file>', 'config file with defaults')
    .option('--credentials <file>', 'credentials file')
    .option('--profile <name>', 'profile in the credentials file')
    .addHelpText('after', `
Examples:
  svcfs presign GET photos/2024/cat.jpg --endpoint http://127.0.0.1:9000 --expires 600
  curl "$(svcfs presign PUT photos/new.jpg --endpoint http://127.0.0.1:9000)" -T new.jpg`)
    .action((method: string, object: string, o) => {
      const at = object.indexOf('/');
      if (at <= 0 || at === object.length - 1) throw new UsageError('the object must be BUCKET/KEY');
      parseTarget(object.slice(0, at));
      const cfg = loadConfig(o);
      const endpoint = o.endpoint ?? cfg.endpoint;
      if (!endpoint) throw new UsageError('presign needs --endpoint URL (or endpoint = in the config file)');
      let base: URL;
      try {
        base = new URL(endpoint);
      } catch {
        throw new UsageError(`--endpoint must be a URL, got "${endpoint}"`);
      }
      const creds = loadCredentials(o);
      const path = base.pathname.replace(/\/$/, '') + encodePath('/' + object);
      process.stdout.write(presignedUrlString({
        dialect: dialectByName(o.dialect ?? cfg.dialect ?? 'svc'), credentials: creds, region: o.region ?? cfg.region ?? 'us-east-1', method, url: new URL(base.origin), path,
        expiresSeconds: o.expires,
      }) + '\n');
    });

  return p;
}

export function main(argv: string[]): void {
  const p = program();
  p.exitOverride();
  for (const c of p.commands) c.exitOverride();
  p.parseAsync(argv, { from: 'user' }).catch((e: unknown) => {
    if (e instanceof CommanderError) {
      // help and version exit 0; anything commander refused is a usage error
      process.exit(e.exitCode === 0 ? 0 : 2);
    }
    const err = e as Error & { exitCode?: number };
    process.stderr.write(`svcfs: ${err.message}\n`);
    process.exit(err instanceof UsageError || err instanceof MountError ? err.exitCode : 1);
  });
}
