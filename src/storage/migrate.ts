// Runs the migrations in storage/migrations/ (files named NNN-subject.ts, applied in name order;
// NNN-subject.js in the compiled dist/, under the same names).
// Each migration module exports `up(db, dialect)`; the dialect supplies what differs (id columns,
// integer widths), so one set of migrations serves SQLite and PostgreSQL.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Migrator, type Kysely, type Migration, type MigrationProvider } from 'kysely';
import type { StoreDialect } from './dialect.ts';

export interface MigrationModule {
  up(db: Kysely<any>, dialect: StoreDialect): Promise<void>;
}

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

class DirectoryProvider implements MigrationProvider {
  constructor(private readonly dialect: StoreDialect) {}
  async getMigrations(): Promise<Record<string, Migration>> {
    const out: Record<string, Migration> = {};
    const files = fs.readdirSync(dir).filter((f) => /^\d{3}-.*\.[jt]s$/.test(f) && !f.endsWith('.d.ts')).sort();
    for (const file of files) {
      const mod = (await import(pathToFileURL(path.join(dir, file)).href)) as MigrationModule;
      out[file.replace(/\.[jt]s$/, '')] = { up: (db) => mod.up(db, this.dialect) };
    }
    return out;
  }
}

/** Applies every pending migration; returns the names applied. */
export async function migrateToLatest(dialect: StoreDialect): Promise<string[]> {
  const migrator = new Migrator({
    db: dialect.migrationDb ?? dialect.db,
    provider: new DirectoryProvider(dialect),
    migrationTableName: 'posthorn_migrations',
    migrationLockTableName: 'posthorn_migrations_lock',
    // Features land in parallel with their own numbered migrations; apply any not yet applied.
    allowUnorderedMigrations: true,
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
