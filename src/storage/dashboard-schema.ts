// Row types of the tables of migration 100 (the dashboard's users and sessions, docs/dashboard.md).
// Kept beside schema.ts so that file's Database interface only names them.
import type { Generated, Selectable } from 'kysely';

export interface DashboardUsersTable {
  id: Generated<number>;
  account_id: number;
  /** null: every project of the account; else the only project this user sees */
  project_id: number | null;
  /** lower-cased */
  email: string;
  /** scrypt$N$r$p$salt$hash (operations/users.ts) */
  password_hash: string;
  created_at: number;
  updated_at: number;
  signed_in_at: number | null;
}

export interface DashboardSessionsTable {
  id: Generated<number>;
  user_id: number;
  /** hex SHA-256 of the cookie's token: the token itself is never stored */
  token_hash: string;
  /** the token every state-changing form of this session carries */
  csrf_token: string;
  created_at: number;
  expires_at: number;
}

export type DashboardUser = Selectable<DashboardUsersTable>;
export type DashboardSession = Selectable<DashboardSessionsTable>;

/** Sign-in failures in the current window of one key (migration 170, operations/users.ts). */
export interface SignInFailuresTable {
  /** "a:" or "e:" and the hex HMAC-SHA-256 (a key derived from the secret key) of the client address or the email typed */
  key: string;
  count: number;
  /** when the key's window began (its first failure in it) */
  since: number;
}

/** A one-time form token that was used (migration 220, operations/form-tokens.ts). */
export interface DashboardFormUsesTable {
  /** the token's random part (the token is signed; this alone submits nothing) */
  nonce: string;
  /** when the token stops being accepted: the row is not needed after that */
  expires_at: number;
}
