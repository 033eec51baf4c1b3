#!/usr/bin/env node
'use strict';
// Thin launcher: the compiled CLI lives in dist/ (npm run build).
const argv = process.argv.slice(2);
// The process that serves a mount compiles its modules from a code cache
// (src/cli/codecache.ts): installed before anything else loads, to cover it all.
if (argv.includes('mount') && (argv.includes('--foreground') || argv.includes('-f'))) {
  const { enableCodeCache } = require('../dist/cli/codecache.js');
  const { cacheDir } = require('../dist/cli/config.js');
  enableCodeCache(require('node:path').join(cacheDir(), 'code'), 'mount');
}
require('../dist/cli/main.js').main(argv);
