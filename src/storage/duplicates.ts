// An insert that hits a unique constraint reports the duplicate as a value, not as a database
// error: only the constraint is race-free (a SELECT beforehand can miss a concurrent insert), and
// which error a duplicate raises is the dialect's business, kept inside storage/
// (docs/decisions/0001-storage.md). After a duplicate the transaction takes no further statement
// (PostgreSQL has aborted it): the caller ends its unit, usually with its own error.
import { isUniqueViolationError } from './dialect.ts';

export interface Duplicate {
  readonly duplicate: true;
}

export function isDuplicate<T>(inserted: T | Duplicate): inserted is Duplicate {
  return (inserted as Partial<Duplicate> | null)?.duplicate === true;
}

/** The insert's row, or `{ duplicate: true }` when a unique constraint refused it. */
export async function insertedOrDuplicate<T>(insert: Promise<T>): Promise<T | Duplicate> {
  try {
    return await insert;
  } catch (error) {
    if (isUniqueViolationError(error)) return { duplicate: true };
    throw error;
  }
}
