// The two templates every new project starts with. Client libraries' own test suites send with
// sample_child_template (compatibility.md), so their shape matters: a layout holding {{*}}, and a
// child that fills it and uses variables. Neither has a From: a message sent with them goes from
// the project's default From, which is noreply@<--mailer-host> of the process that accepts it
// unless the project sets one (operations/projects.ts defaultFromOf), so the host configured when
// mail is sent decides, not the one of the moment the project was made.

/** The fields of one stored template (what storage's insertTemplate takes). */
export interface SampleTemplate {
  slug: string;
  name: string | null;
  subject: string | null;
  from_address: string | null;
  parent_slug: string | null;
  css: string | null;
  text_body: string | null;
  html_body: string | null;
}

export function sampleTemplates(): SampleTemplate[] {
  return [
    {
      slug: 'sample_parent_layout',
      name: 'Sample parent layout',
      subject: null,
      from_address: null,
      parent_slug: null,
      css: 'body { font-family: sans-serif; }',
      text_body: '{{*}}\n\n--\nSent with Posthorn',
      html_body:
        '<html><head><style>body { font-family: sans-serif; }</style></head><body>{{*}}<hr><p>Sent with Posthorn</p></body></html>',
    },
    {
      slug: 'sample_child_template',
      name: 'Sample child template',
      subject: 'Sample message for {{name}}',
      from_address: null,
      parent_slug: 'sample_parent_layout',
      css: null,
      text_body: 'Hello {{name}},\n\nThis is a sample message sent through Posthorn.',
      html_body: '<p>Hello {{name}},</p><p>This is a sample message sent through Posthorn.</p>',
    },
  ];
}
