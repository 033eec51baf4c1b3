#!/usr/bin/env node
'use strict';
// mount(8) helper: `mount -t svcfs BUCKET[:PREFIX] DIR -o endpoint=URL,...` and
// fstab lines (BUCKET /mnt/x svcfs endpoint=URL,_netdev,allow_other 0 0) call
//   mount.svcfs SPEC DIR [-sfnv] [-o OPTIONS]
// which runs `svcfs mount SPEC DIR -o OPTIONS` (in the background once mounted).
// Installed through the shell wrapper bin/mount.svcfs (`svcfs install-helper` links it into /sbin).
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const args = process.argv.slice(2);
const pos = [];
const opts = [];
let fake = false;
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '-o') opts.push(args[++i] || '');
  else if (a.startsWith('-o')) opts.push(a.slice(2));
  else if (a === '-t' || a === '-N') i++;
  else if (a === '-f') fake = true;
  else if (/^-[snv]+$/.test(a)) continue;
  else pos.push(a);
}
if (pos.length !== 2) {
  process.stderr.write('usage: mount.svcfs BUCKET[:PREFIX] MOUNTPOINT -o endpoint=URL[,options]\n');
  process.exit(2);
}
if (fake) process.exit(0);
// mount(8) canonicalizes a source that names an existing path relative to the
// current directory ("photos" -> "$PWD/photos"): undo exactly that.
if (pos[0].startsWith('/') && path.dirname(pos[0]) === process.cwd() && /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](:.*)?$/.test(path.basename(pos[0]))) {
  pos[0] = path.basename(pos[0]);
}
// options meant for mount(8) and systemd, not for svcfs
const kept = opts.join(',').split(',').filter((o) => o && !/^(x-|comment=)/.test(o));
const cli = path.join(__dirname, 'svcfs.js');
const r = spawnSync(process.execPath, [cli, 'mount', pos[0], pos[1], ...(kept.length ? ['-o', kept.join(',')] : [])], { stdio: 'inherit' });
process.exit(r.status === null ? 1 : r.status);
