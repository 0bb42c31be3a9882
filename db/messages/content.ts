import type { EntityManager } from '@mikro-orm/postgresql';
import { validationError } from '../../errors';
import { withUnsubscribeFooter } from '../../mail/footer';
import { contactUrls } from '../../mail/links';
import { markdownToHtmlTemplate } from '../../mail/markdown';
import { addTracking } from '../../mail/tracking';
import { type CompiledTemplate, compileTemplate, TemplateSyntaxError, templateVariables } from '../../mail/render';
import type { ContactDto } from '../contacts/contacts';
import { queryOne } from '../sql';

export interface CompiledContent {
  subject: CompiledTemplate;
  body: CompiledTemplate;
}

export type BodyFormat = 'html' | 'markdown';

/**
 * Subject and body compiled once per send; a syntax error is a 422 naming the field. A Markdown
 * body is checked as written (so an error's line and column point into it), then turned into HTML
 * (mail/markdown.ts) and compiled as such.
 */
export function compileContent(subject: string, body: string, format: BodyFormat = 'html'): CompiledContent {
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
  const compiledSubject = compile(subject, 'subject');
  const compiledBody = compile(body, 'body');
  return { subject: compiledSubject, body: format === 'markdown' ? compile(markdownToHtmlTemplate(body), 'body') : compiledBody };
}

/** What marketing mail needs besides the contact: the project's name, for the unsubscribe footer. */
export interface MarketingContext {
  projectName: string;
}

/** Loaded once per send (or per campaign batch), never per email. */
export async function marketingContext(em: EntityManager, projectId: string): Promise<MarketingContext> {
  const row = await queryOne<{ name: string }>(em, 'select name from projects where id = ?', [projectId]);
  return { projectName: row?.name ?? '' };
}

/**
 * One recipient's subject, body and headers: the contact's variables (with `extra` per-send
 * data over them) and, for marketing mail, the RFC 8058 one-click unsubscribe headers and, when
 * the body links to no unsubscribe or manage page, a footer that does (mail/footer.ts). With
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
    /** `false` for transactional mail. */
    marketing: MarketingContext | false;
    headers?: Record<string, string>;
    tracking?: { emailId: string };
  },
): { subject: string; body: string; headers: Record<string, string> } {
  const urls = contactUrls(opts.publicUrl, opts.linkSecret, contact.id);
  const vars = templateVariables(contact, urls, opts.extra);
  const html = content.body.render(vars);
  const body = opts.marketing ? withUnsubscribeFooter(html, urls, opts.marketing.projectName) : html;
  return {
    subject: content.subject.render(vars),
    body: opts.tracking ? addTracking(body, { publicUrl: opts.publicUrl, linkSecret: opts.linkSecret, emailId: opts.tracking.emailId }) : body,
    headers: {
      ...opts.headers,
      ...(opts.marketing ? { 'List-Unsubscribe': `<${urls.unsubscribeUrl}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' } : {}),
    },
  };
}
