#!/usr/bin/env node
// Write the manual page svcfs(1) from the command line's own definitions (the
// text `svcfs --help` and `svcfs COMMAND --help` print), so that there is no
// second copy to keep in step. Needs the compiled dist/. Output: man/svcfs.1,
// generated at setup and before `npm pack` (not kept in git).
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { program } = require('../dist/cli/main.js');

const root = path.join(__dirname, '..');
const version = require('../package.json').version;
const p = program();
p.configureHelp({ helpWidth: 78 });

/** roff needs backslashes and leading dots or quotes escaped. */
const esc = (s) => s.replace(/\\/g, '\\e').split('\n').map((l) => (/^[.']/.test(l) ? `\\&${l}` : l)).join('\n');
const block = (text) => ['.nf', esc(text.trimEnd()), '.fi'].join('\n');
/** What `--help` prints for a command, examples included (commander adds those while printing). */
const help = (cmd) => {
  let text = '';
  cmd.configureOutput({ writeOut: (s) => (text += s), writeErr: (s) => (text += s) });
  cmd.outputHelp();
  return text;
};

const out = [];
out.push(`.TH SVCFS 1 "" "svcfs ${version}" "User Commands"`);
out.push('.SH NAME', `svcfs \\- ${esc(p.description())}`);
out.push('.SH SYNOPSIS', `.B svcfs`, '[\\fIoptions\\fR] \\fIcommand\\fR [\\fIargs\\fR]');
out.push('.SH DESCRIPTION', block(help(p)));
out.push('.SH COMMANDS');
const walk = (cmd, prefix) => {
  for (const c of cmd.commands) {
    const name = `${prefix} ${c.name()}`.trim();
    out.push(`.SS ${esc(name)}`, block(help(c)));
    walk(c, name);
  }
};
walk(p, 'svcfs');
out.push('.SH FILES', block([
  '~/.config/svcfs/credentials   access keys, one [profile] per section (mode 600)',
  '~/.config/svcfs/config        defaults for mount and presign',
  '~/.cache/svcfs/               staging area of mounts, and their logs',
  'DATA/users.json, DATA/buckets.json, DATA/index.sqlite3   a server\'s users, buckets and index',
].join('\n')));
out.push('.SH SEE ALSO', 'mount(8), fusermount(1), fstab(5)');
fs.mkdirSync(path.join(root, 'man'), { recursive: true });
fs.writeFileSync(path.join(root, 'man', 'svcfs.1'), out.join('\n') + '\n');
