// A template and its chain of parent layouts in ONE query (a recursive CTE, the same SQL on SQLite
// and PostgreSQL), innermost first. The depth bound stops a chain that loops in stored rows; the
// domain (domain/templates.ts checkLayoutChain) reports loops, gaps and excess length.
import { sql } from 'kysely';
import type { TemplateLevel } from '../domain/templates.ts';
import type { Template } from './schema.ts';
import type { Tx } from './store.ts';

type ChainRow = Pick<Template, 'slug' | 'subject' | 'from_address' | 'text_body' | 'html_body' | 'css' | 'parent_slug'> & { depth: number };

export async function findTemplateChain(db: Tx, projectId: number, slug: string, maxLevels: number): Promise<TemplateLevel[]> {
  const result = await sql<ChainRow>`
    WITH RECURSIVE chain (slug, subject, from_address, text_body, html_body, css, parent_slug, depth) AS (
      SELECT slug, subject, from_address, text_body, html_body, css, parent_slug, 0
        FROM templates WHERE project_id = ${projectId} AND slug = ${slug}
      UNION ALL
      SELECT t.slug, t.subject, t.from_address, t.text_body, t.html_body, t.css, t.parent_slug, chain.depth + 1
        FROM templates t JOIN chain ON t.project_id = ${projectId} AND t.slug = chain.parent_slug
       WHERE chain.depth + 1 < ${maxLevels}
    )
    SELECT * FROM chain ORDER BY depth`.execute(db);
  return result.rows.map((r) => ({
    slug: r.slug,
    parentSlug: r.parent_slug,
    subject: r.subject,
    from: r.from_address,
    text: r.text_body,
    html: r.html_body,
    css: r.css,
  }));
}
