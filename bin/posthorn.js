#!/usr/bin/env node
// The installed entry point: runs the TypeScript sources through tsx's loader,
// so `npx posthorn` works in a checkout right after `npm install`, with no build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/main.ts');
process.exitCode = await main(process.argv.slice(2));
