// Checks that a packaged .vsix holds the bundled extension and its manifest, and nothing else
// large: a broken .vscodeignore or a missing bundle fails `npm test`.
const { execFileSync } = require('child_process');
const path = process.argv[2];
const listing = execFileSync('python3', ['-c', 'import sys, zipfile; print("\\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))', path])
  .toString()
  .split('\n')
  .filter(Boolean);
// The wheels `./dev vsix` puts in wheels/ ship inside (the extension installs memlens from them).
const fs = require('fs');
const wheels = fs.existsSync('wheels') ? fs.readdirSync('wheels').filter((f) => f.endsWith('.whl')) : [];
const required = ['extension/dist/extension.js', 'extension/package.json', 'extension.vsixmanifest', ...wheels.map((w) => `extension/wheels/${w}`)];
const missing = required.filter((f) => !listing.includes(f));
const stray = listing.filter((f) => f.startsWith('extension/node_modules/') || f.startsWith('extension/src/'));
if (missing.length || stray.length) {
  console.error(`bad vsix ${path}: missing ${missing.join(', ') || '-'}; stray ${stray.slice(0, 5).join(', ') || '-'}`);
  process.exit(1);
}
console.log(`vsix ok: ${listing.length} files, ${wheels.length} wheel(s)`);
