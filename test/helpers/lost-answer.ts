// A store whose next write is committed while its caller is told the database is unavailable, as
// when the connection is cut after the server took the statement (a partition, a frozen server:
// test/reliability/postgres-frozen.test.ts proves the same through a real proxy on PostgreSQL).
import { StoreUnavailableError, type Store } from '../../src/storage/store.ts';

/** Until the next store.write or store.writeStatement has run: that one answers unavailable. */
export function loseNextAnswer(store: Store): { restore(): void } {
  const { write, writeStatement } = store;
  const restore = () => Object.assign(store, { write, writeStatement });
  const losing =
    <F extends (...args: never[]) => Promise<unknown>>(real: F) =>
    async (...args: Parameters<F>) => {
      restore();
      await real.apply(store, args);
      throw new StoreUnavailableError('database unreachable (timeout): no answer', { reason: 'database unreachable (timeout)', mayHaveWritten: true });
    };
  Object.assign(store, { write: losing(write), writeStatement: losing(writeStatement) });
  return { restore };
}
