// What /readyz answers (docs/operations.md, "Health"): the database answers within
// PING_TIMEOUT_MS (and, after a write failed as unavailable, takes a write again), every migration of this build is applied, and the background loops of the
// process's role are running. /healthz only says the process is alive.
//
// The loops' state is set by the operations service (http/ops/listener.ts), which is the last of
// the background services to start and the first to stop: when it starts every loop before it has
// started, and from the moment shutdown begins /readyz says so, so a load balancer drains the
// process before its loops stop. A process started without background loops (role api, or tests of
// the API alone) has no loop to wait for.
//
// An API process of a serve that supervises a delivery process beside it (cli/supervisor.ts) also
// reports that process's state as the supervisor last told it (`delivery`): for the operator, who
// sees the whole service on --port. It never makes the API process not ready: while the delivery
// process restarts the API still accepts and stores mail durably, and a load balancer must not
// drop it for that (docs/operations.md, "Health").
import type { Services } from '../services.ts';
import { listPendingMigrations, pingDatabase } from '../storage/ops-stats.ts';
import { isStoreUnavailable, type Store } from '../storage/store.ts';

/** A database that takes longer than this to answer a trivial query is not ready. */
export const PING_TIMEOUT_MS = 2000;

export type LoopState = 'starting' | 'running' | 'stopping';

const loopStates = new WeakMap<Store, LoopState>();
const deliveryProcessStates = new WeakMap<Store, string>();
/** Stores found fully migrated: migrations are never un-applied, so it is checked until true. */
const migrated = new WeakSet<Store>();

export function setLoopState(services: Services, state: LoopState): void {
  loopStates.set(services.store, state);
}

/** The supervised delivery process's state, as the supervisor tells this API process: running, starting, restarting (...), stopping. */
export function setDeliveryProcessState(services: Services, state: string): void {
  deliveryProcessStates.set(services.store, state);
}

export interface Readiness {
  ready: boolean;
  checks: {
    database: string;
    migrations: string;
    loops: string;
    /** informational: the supervised delivery process beside this API process, where there is one */
    delivery?: string;
  };
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ReadinessTimeout(`${what} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * One short line about a failure, for an unauthenticated probe: the kind of the cause (a
 * StoreUnavailableError's reason: unreachable and why, read-only, disk full, locked), or our own
 * timeout, or an error's code; never a message that may name the server's address or a file.
 */
function describe(error: unknown): string {
  if (isStoreUnavailable(error)) return error.reason;
  if (error instanceof ReadinessTimeout) return error.message;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,40}$/.test(code) ? `error ${code}` : 'error';
}

/** A check that took longer than PING_TIMEOUT_MS. */
class ReadinessTimeout extends Error {}

export async function checkReadiness(services: Services): Promise<Readiness> {
  const { store } = services;
  const checks: Readiness['checks'] = { database: 'ok', migrations: 'ok', loops: 'none' };
  let ready = true;
  try {
    await withTimeout(pingDatabase(store.db), PING_TIMEOUT_MS, 'the database');
    // A database that answers reads and cannot write (a full disk, the write lock held by another
    // connection past its wait) is not ready either: asked again by a write while it lasts.
    const cannotWrite = await withTimeout(store.checkWritable(), PING_TIMEOUT_MS, 'a write to the database');
    if (cannotWrite) throw cannotWrite;
  } catch (error) {
    checks.database = `unavailable: ${describe(error)}`;
    // Once passed the migrations are not asked again (migrated), outage or not.
    if (!migrated.has(store)) checks.migrations = 'unknown';
    ready = false;
  }
  if (ready && !migrated.has(store)) {
    try {
      const pending = await withTimeout(listPendingMigrations(store.db), PING_TIMEOUT_MS, 'the database');
      if (pending.length === 0) migrated.add(store);
      else {
        checks.migrations = `pending: ${pending.join(', ')}`;
        ready = false;
      }
    } catch (error) {
      checks.migrations = `unknown: ${describe(error)}`;
      ready = false;
    }
  }
  const loops = loopStates.get(store);
  if (loops !== undefined) {
    checks.loops = loops;
    if (loops !== 'running') ready = false;
  }
  const delivery = deliveryProcessStates.get(store);
  if (delivery !== undefined) checks.delivery = delivery;
  return { ready, checks };
}
