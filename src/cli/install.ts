// `svcfs install-helper`: put the commands where the system looks for them.
// mount(8) runs /sbin/mount.TYPE for `mount -t svcfs` and fstab lines; a shell
// finds `svcfs` on its PATH. Links point into this installation, so an upgrade
// in place (git pull, npm install -g) keeps them valid.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { UsageError } from './config';

const ROOT = path.resolve(__dirname, '..', '..');

/** Make `dir/name` a symlink to `target`; an existing symlink is replaced, anything else is refused. */
function link(target: string, dir: string, name: string): string {
  const at = path.join(dir, name);
  fs.mkdirSync(dir, { recursive: true });
  let st: fs.Stats | undefined;
  try {
    st = fs.lstatSync(at);
  } catch {
    st = undefined;
  }
  if (st && !st.isSymbolicLink()) throw new UsageError(`${at} exists and is not a link; move it away first`, 1);
  if (st && fs.readlinkSync(at) === target) return `${at} -> ${target} (already there)`;
  try {
    if (st) fs.unlinkSync(at);
    fs.symlinkSync(target, at);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EACCES' || (e as NodeJS.ErrnoException).code === 'EPERM') {
      throw new UsageError(`cannot write ${dir}: run as root (sudo svcfs install-helper)`, 1);
    }
    throw e;
  }
  return `${at} -> ${target}`;
}

export function installHelper(o: { dir: string; bin?: string; man?: string }): void {
  const lines = [link(path.join(ROOT, 'bin', 'mount.svcfs'), o.dir, 'mount.svcfs')];
  if (o.bin) lines.push(link(path.join(ROOT, 'bin', 'svcfs.js'), o.bin, 'svcfs'));
  if (o.man) {
    const page = path.join(ROOT, 'man', 'svcfs.1');
    if (!fs.existsSync(page)) throw new UsageError(`${page} is missing: node scripts/manpage.js makes it`, 1);
    lines.push(link(page, o.man, 'svcfs.1'));
  }
  process.stdout.write(lines.map((l) => `linked ${l}\n`).join(''));
}
