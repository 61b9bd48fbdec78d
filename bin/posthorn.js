#!/usr/bin/env node
// The installed entry point: plain Node running the compiled service in dist/ (built by
// scripts/build.js, which npm runs at install through the `prepare` script).
let main;
try {
  ({ main } = await import('../dist/main.js'));
} catch (error) {
  if (error?.code === 'ERR_MODULE_NOT_FOUND' && String(error.message).includes('dist/main.js')) {
    process.stderr.write('posthorn: the service is not built (dist/main.js is missing): run npm install, or npm run build\n');
    process.exit(1);
  }
  throw error;
}
process.exitCode = await main(process.argv.slice(2));
