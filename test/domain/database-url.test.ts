// Which database a configured URL names (src/domain/database-url.ts): the one test the
// configuration's check, the store and the CLI share, so they never disagree on a URL's case.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isPostgresUrl } from '../../src/domain/database-url.ts';

describe('isPostgresUrl', () => {
  it('names PostgreSQL for postgres:// and postgresql:// in any case, SQLite otherwise', () => {
    for (const url of ['postgres://u@h/db', 'postgresql://u@h:5432/db', 'POSTGRES://u@h/db', 'PostgreSQL://u@h/db']) assert.equal(isPostgresUrl(url), true, url);
    for (const url of [null, undefined, '', 'sqlite:///var/lib/posthorn.db', 'sqlite::memory:', 'postgres:/u@h/db', 'mysql://u@h/db', '/tmp/postgres://x']) {
      assert.equal(isPostgresUrl(url), false, String(url));
    }
  });
});
