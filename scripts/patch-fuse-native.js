#!/usr/bin/env node
// fuse-native 2.2.6 passes utimens' atime in both the atime and the mtime
// argument (fuse-native.c: FUSE_UINT64_TO_INTS_ARGV(l->atime, 5)), so a program
// that sets only the modification time (rsync, `touch -m`) loses it. Fix that
// one line and rebuild the addon (it is compiled from source at install
// anyway). Idempotent; run by `npm install` (postinstall).
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const dir = path.join(__dirname, '..', 'node_modules', 'fuse-native');
const src = path.join(dir, 'fuse-native.c');
if (!fs.existsSync(src)) process.exit(0);
const text = fs.readFileSync(src, 'utf8');
const bad = 'FUSE_UINT64_TO_INTS_ARGV(l->atime, 5)';
const built = fs.existsSync(path.join(dir, 'build', 'Release', 'fuse.node'));
if (!text.includes(bad) && built) process.exit(0);
fs.writeFileSync(src, text.replace(bad, 'FUSE_UINT64_TO_INTS_ARGV(l->mtime, 5)'));
const gyp = require.resolve('node-gyp/bin/node-gyp.js', { paths: [path.join(__dirname, '..'), dir] });
process.stderr.write('svcfs: patching fuse-native (utimens mtime) and rebuilding it\n');
// Build against the local Node headers, as npm does for install scripts (no download).
const nodedir = process.env.npm_config_nodedir || ['/usr', '/usr/local'].find((d) => fs.existsSync(path.join(d, 'include', 'node', 'node_api.h')));
const args = [gyp, 'rebuild', '--release', '--loglevel=error', ...(nodedir ? [`--nodedir=${nodedir}`] : [])];
execFileSync(process.execPath, args, { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
