import { validationError } from '../errors';
import { contactUrls } from '../mail/links';
import { addTracking } from '../mail/tracking';
import { type CompiledTemplate, compileTemplate, TemplateSyntaxError, templateVariables } from '../mail/render';
import type { ContactDto } from './contacts';

export interface CompiledContent {
  subject: CompiledTemplate;
  body: CompiledTemplate;
}

/** Subject and body compiled once per send; a syntax error is a 422 naming the field. */
export function compileContent(subject: string, body: string): CompiledContent {
  const compile = (source: string, field: 'subject' | 'body') => {
    try {
      return compileTemplate(source, { escapeHtml: field === 'body' });
    } catch (err) {
      if (err instanceof TemplateSyntaxError) {
        throw validationError([{ field, message: `Template syntax error: ${err.message}`, code: 'template_syntax' }]);
      }
      throw err;
    }
  };
  return { subject: compile(subject, 'subject'), body: compile(body, 'body') };
}

/**
 * One recipient's subject, body and headers: the contact's variables (with `extra` per-send
 * data over them) and, for marketing mail, the RFC 8058 one-click unsubscribe headers. With
 * `tracking`, links go through the click tracker and the open pixel is added (mail/tracking.ts);
 * the email's id must then be chosen before rendering.
 */
export function renderForContact(
  content: CompiledContent,
  contact: ContactDto,
  opts: {
    extra: Record<string, unknown>;
    publicUrl: string;
    linkSecret: string;
    marketing: boolean;
    headers?: Record<string, string>;
    tracking?: { emailId: string };
  },
): { subject: string; body: string; headers: Record<string, string> } {
  const urls = contactUrls(opts.publicUrl, opts.linkSecret, contact.id);
  const vars = templateVariables(contact, urls, opts.extra);
  return {
    subject: content.subject.render(vars),
    body: opts.tracking
      ? addTracking(content.body.render(vars), { publicUrl: opts.publicUrl, linkSecret: opts.linkSecret, emailId: opts.tracking.emailId })
      : content.body.render(vars),
    headers: {
      ...opts.headers,
      ...(opts.marketing ? { 'List-Unsubscribe': `<${urls.unsubscribeUrl}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' } : {}),
    },
  };
}
