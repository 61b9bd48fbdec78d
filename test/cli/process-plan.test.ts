// Which processes `serve` starts (cli/supervisor.ts planProcesses; docs/operations.md, "Processes"):
// on SQLite every core by default (a delivery process and an API process per other core; with
// --role api an API process per core); on PostgreSQL a delivery process and one API process.
import assert from 'node:assert/strict';
import os from 'node:os';
import { describe, it } from 'node:test';
import { parseArgv, parseConfig } from '../../src/config.ts';
import { planProcesses } from '../../src/cli/supervisor.ts';

const plan = (...args: string[]) => planProcesses(parseConfig(parseArgv(args).flags, {}));
const PG = ['--database-url', 'postgres://u@127.0.0.1:5432/db'];
const cores = os.availableParallelism();

describe('serve: the processes it starts', () => {
  it('on SQLite by default: every core (one of them for delivery with --role all)', () => {
    assert.deepEqual(plan(), cores >= 2 ? { api: Math.max(1, cores - 1), worker: true, lowerApi: false, relayWakes: true } : null);
    assert.deepEqual(plan('--role', 'api'), cores >= 2 ? { api: cores, worker: false, lowerApi: false, relayWakes: false } : null);
  });

  it('API processes as many as the cores, beside the delivery process: below its priority', () => {
    assert.deepEqual(plan('--api-processes', String(cores)), { api: cores, worker: true, lowerApi: true, relayWakes: true });
    assert.deepEqual(plan('--api-processes', String(cores + 1)), { api: cores + 1, worker: true, lowerApi: true, relayWakes: true });
    assert.deepEqual(plan('--role', 'api', '--api-processes', String(cores + 1)), { api: cores + 1, worker: false, lowerApi: false, relayWakes: false });
  });

  it('as asked: --api-processes, --processes 1, --processes 2', () => {
    assert.deepEqual(plan('--api-processes', '3'), { api: 3, worker: true, lowerApi: cores <= 3, relayWakes: true });
    assert.deepEqual(plan('--role', 'api', '--api-processes', '2'), { api: 2, worker: false, lowerApi: false, relayWakes: false });
    assert.equal(plan('--role', 'api', '--api-processes', '1'), null);
    assert.equal(plan('--processes', '1', '--api-processes', '3'), null);
    assert.deepEqual(plan('--processes', '2', '--api-processes', '1'), { api: 1, worker: true, lowerApi: cores <= 1, relayWakes: true });
  });

  it('a worker is one process; on PostgreSQL one API process and the delivery process unless asked', () => {
    assert.equal(plan('--role', 'worker'), null);
    assert.equal(plan('--role', 'worker', '--api-processes', '4'), null);
    assert.deepEqual(plan(...PG), cores >= 2 ? { api: 1, worker: true, lowerApi: false, relayWakes: false } : null);
    assert.equal(plan(...PG, '--processes', '1'), null);
    assert.equal(plan(...PG, '--role', 'api'), null);
    assert.deepEqual(plan(...PG, '--processes', '2'), { api: 1, worker: true, lowerApi: cores <= 1, relayWakes: false });
    assert.deepEqual(plan(...PG, '--role', 'api', '--api-processes', '4'), { api: 4, worker: false, lowerApi: false, relayWakes: false });
    assert.deepEqual(plan(...PG, '--api-processes', '2'), { api: 2, worker: true, lowerApi: cores <= 2, relayWakes: false });
  });
});
