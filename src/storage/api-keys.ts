import { CompiledQuery, type InferResult } from 'kysely';
import { preparedOnServer } from './dialect.ts';
import type { Tx } from './store.ts';
import type { Account, ApiKey, Project } from './schema.ts';

export async function insertApiKey(
  db: Tx,
  row: { accountId: number; projectId: number | null; keyHash: string; keyPrefix: string; now: number },
): Promise<ApiKey> {
  return db
    .insertInto('api_keys')
    .values({
      account_id: row.accountId,
      project_id: row.projectId,
      key_hash: row.keyHash,
      key_prefix: row.keyPrefix,
      status: 'active',
      created_at: row.now,
      revoked_at: null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export interface KeyLookup {
  key: ApiKey;
  account: Account;
  project: Project | null;
}

function keyLookupQuery(db: Tx, keyHash: string) {
  return db
    .selectFrom('api_keys as k')
    .innerJoin('accounts as a', 'a.id', 'k.account_id')
    .leftJoin('projects as p', 'p.id', 'k.project_id')
    .select([
      'k.id as k_id', 'k.account_id as k_account_id', 'k.project_id as k_project_id', 'k.key_hash as k_key_hash',
      'k.key_prefix as k_key_prefix', 'k.status as k_status', 'k.created_at as k_created_at', 'k.revoked_at as k_revoked_at',
      'a.id as a_id', 'a.uid as a_uid', 'a.name as a_name', 'a.status as a_status', 'a.settings as a_settings',
      'a.created_at as a_created_at', 'a.updated_at as a_updated_at',
      'p.id as p_id', 'p.account_id as p_account_id', 'p.uid as p_uid', 'p.name as p_name', 'p.status as p_status',
      'p.settings as p_settings', 'p.created_at as p_created_at', 'p.updated_at as p_updated_at',
    ])
    .where('k.key_hash', '=', keyHash);
}

/**
 * The lookup's SQL, compiled once per dialect instance: every API request runs it, and building
 * this 23-column join through Kysely each time was ~10% of a send_message's CPU (bench/,
 * docs/decisions/0003-performance.md). Its one parameter is the key hash.
 */
const keyLookupSql = new WeakMap<object, string>();

/**
 * Found keys are kept this long in this process (every API request looks its key up: on
 * PostgreSQL that lookup was one of the two round trips of a send_message, and each round trip
 * costs both processes CPU on a shared machine; docs/decisions/0003-performance.md). A change made
 * through this process (a rotated key, a disabled project or account, new project settings)
 * forgets every kept lookup at once (forgetKeyLookups); one made by another process (another API
 * process, the CLI) is seen within this time. Unknown keys are never kept.
 */
export const KEY_LOOKUP_TTL_MS = 1000;
const KEPT_KEYS_MAX = 10_000;
const keptKeys = new Map<string, { lookup: KeyLookup; until: number; adapter: object }>();
/** Lookups in flight, by key hash: their callers and those that come meanwhile share the answer. */
const lookingUp = new Map<string, { found: Promise<KeyLookup | undefined>; adapter: object; generation: number }>();
/** Moved on by every forgetKeyLookups: a lookup begun before a write is neither kept nor shared after it. */
let keyGeneration = 0;

/** Forgets every kept key lookup: called by each storage write of keys, projects and accounts. */
export function forgetKeyLookups(): void {
  keptKeys.clear();
  keyGeneration++;
}

/** The key with this hash, its account, and its project (for project keys). One query, or none within KEY_LOOKUP_TTL_MS of the last. */
export async function findKeyByHash(db: Tx, keyHash: string): Promise<KeyLookup | undefined> {
  const adapter = db.getExecutor().adapter;
  const now = performance.now();
  const kept = keptKeys.get(keyHash);
  if (kept && kept.until > now && kept.adapter === adapter) return kept.lookup;
  // The requests that find the kept lookup expired together (every one in flight when it expires)
  // share one query, not one each.
  const pending = lookingUp.get(keyHash);
  if (pending && pending.adapter === adapter && pending.generation === keyGeneration) return pending.found;
  const generation = keyGeneration;
  const found = lookUpKey(db, adapter, keyHash);
  const entry = { found, adapter, generation };
  lookingUp.set(keyHash, entry);
  try {
    const lookup = await found;
    // A write of keys, projects or accounts since the query began may have changed its answer.
    if (lookup && generation === keyGeneration) {
      if (keptKeys.size >= KEPT_KEYS_MAX) keptKeys.clear();
      keptKeys.set(keyHash, { lookup, until: now + KEY_LOOKUP_TTL_MS, adapter });
    }
    return lookup;
  } finally {
    if (lookingUp.get(keyHash) === entry) lookingUp.delete(keyHash);
  }
}

async function lookUpKey(db: Tx, adapter: object, keyHash: string): Promise<KeyLookup | undefined> {
  let sqlText = keyLookupSql.get(adapter);
  if (sqlText === undefined) keyLookupSql.set(adapter, (sqlText = preparedOnServer(keyLookupQuery(db, keyHash).compile().sql)));
  const result = await db.executeQuery<InferResult<ReturnType<typeof keyLookupQuery>>[number]>(CompiledQuery.raw(sqlText, [keyHash]));
  const row = result.rows[0];
  if (!row) return undefined;
  return {
    key: {
      id: row.k_id, account_id: row.k_account_id, project_id: row.k_project_id, key_hash: row.k_key_hash,
      key_prefix: row.k_key_prefix, status: row.k_status, created_at: row.k_created_at, revoked_at: row.k_revoked_at,
    },
    account: {
      id: row.a_id, uid: row.a_uid, name: row.a_name, status: row.a_status, settings: row.a_settings,
      created_at: row.a_created_at, updated_at: row.a_updated_at,
    },
    project:
      row.p_id === null
        ? null
        : {
            id: row.p_id, account_id: row.p_account_id!, uid: row.p_uid!, name: row.p_name!, status: row.p_status!,
            settings: row.p_settings!, created_at: row.p_created_at!, updated_at: row.p_updated_at!,
          },
  };
}

/** Marks every active key of the project inactive (rotation); they stop working at once. */
export async function revokeProjectKeys(db: Tx, projectId: number, now: number): Promise<void> {
  forgetKeyLookups();
  await db
    .updateTable('api_keys')
    .set({ status: 'inactive', revoked_at: now })
    .where('project_id', '=', projectId)
    .where('status', '=', 'active')
    .execute();
}

export async function activeKeyPrefix(db: Tx, where: { projectId: number | null; accountId: number }): Promise<string | null> {
  let q = db.selectFrom('api_keys').select('key_prefix').where('account_id', '=', where.accountId).where('status', '=', 'active');
  q = where.projectId === null ? q.where('project_id', 'is', null) : q.where('project_id', '=', where.projectId);
  const row = await q.orderBy('id', 'desc').executeTakeFirst();
  return row?.key_prefix ?? null;
}

/** The newest active key prefix of each project of the account (one query), keyed by project id. */
export async function activeProjectKeyPrefixes(db: Tx, accountId: number): Promise<Map<number, string>> {
  const rows = await db
    .selectFrom('api_keys')
    .select(['project_id', 'key_prefix'])
    .where('account_id', '=', accountId)
    .where('status', '=', 'active')
    .where('project_id', 'is not', null)
    .orderBy('id')
    .execute();
  // Ordered by id, so a later (newer) key overwrites an older one.
  return new Map(rows.map((r) => [r.project_id!, r.key_prefix]));
}
