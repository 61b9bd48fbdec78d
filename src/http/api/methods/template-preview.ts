// preview_template (either key kind, as the template methods): renders a stored template, or
// content given inline, with sample variables, as delivery would (operations/template-preview.ts).
// docs/api/preview-template.md describes the arguments and the answer.
import { Type } from '@sinclair/typebox';
import { ApiError } from '../../../domain/errors.ts';
import { previewTemplateFor } from '../../../operations/template-preview.ts';
import { nullable } from '../data-schemas.ts';
import { any, anyOf, map, obj, optional, str, text } from '../schema.ts';
import { defineMethods } from './types.ts';

const Part = optional(text());

export const PREVIEW_TEMPLATE_ARGS = obj({
  template: optional(str({ description: "slug of one of the project's templates: it and its layouts are rendered" })),
  content: optional(
    anyOf([Type.String(), obj({ 'text/plain': Part, 'text/html': Part, 'text/css': Part })], 'a string or an object {"text/plain", "text/html", "text/css"}', {
      description: "a message's own content, as send_message takes it (innermost, inside the template's {{*}})",
    }),
  ),
  subject: optional(str({ description: 'a subject, as the Subject header of send_message' })),
  from: optional(str({ description: 'a From, as the From header of send_message' })),
  variables: optional(map(any(), { description: 'sample variables, as send_message\'s arguments.variables' })),
  project_uid: optional(str({ description: 'required with an account key: the project whose templates are used' })),
});

export const PreviewData = Type.Object({
  preview: Type.Object({
    subject: nullable(Type.String()),
    from: nullable(Type.String()),
    text: nullable(Type.String()),
    html: nullable(Type.String({ description: 'attacker-controlled markup: show it only in a sandboxed frame' })),
    missing: Type.Array(Type.String(), { description: 'names of {{variables}} substituted without a value (rendered empty)' }),
    errors: Type.Record(Type.String(), Type.String(), { description: 'per field, what keeps it from being sent (template syntax, unknown layout); empty when none' }),
  }),
});

export const templatePreviewMethods = defineMethods([
  {
    name: 'preview_template',
    key: 'any',
    summary: 'Renders a template (or inline content) with sample variables as it would be sent; names the variables that had no value.',
    args: PREVIEW_TEMPLATE_ARGS,
    data: PreviewData,
    async run({ services, caller, args }) {
      const slug = args.string('template');
      const raw = args.value('content');
      const content =
        typeof raw === 'string'
          ? { text: raw }
          : raw && typeof raw === 'object' && !Array.isArray(raw)
            ? { text: (raw['text/plain'] as string | null) ?? null, html: (raw['text/html'] as string | null) ?? null, css: (raw['text/css'] as string | null) ?? null }
            : {};
      const subject = args.string('subject');
      const from = args.string('from');
      if (!slug && raw == null && subject === undefined && from === undefined) {
        throw new ApiError('bad_request', 'Missing required argument "template" (or "content"): what to preview.');
      }
      const projectUid = args.string('project_uid');
      if (caller.keyKind === 'account' && !projectUid) {
        throw new ApiError('bad_request', 'Missing required argument "project_uid": an account key must name the project.');
      }
      const variables = (args.value('variables') ?? {}) as Record<string, unknown>;
      const preview = await previewTemplateFor(services, caller, projectUid || undefined, {
        slug: slug || null,
        content: { ...content, subject: subject || null, from: from || null },
        variables,
      });
      return { data: { preview } };
    },
  },
]);
