import { appendToBody, escapeHtml } from './html';
import type { ContactUrls } from './links';
import { linkTargets } from './tracking';

/**
 * Marketing mail must show a way out. A rendered body already shows one when one of its `<a href>`
 * links is this contact's unsubscribe or manage URL, i.e. the template links `{{unsubscribeUrl}}`
 * or `{{manageUrl}}`; the URL as plain text, or only in the List-Unsubscribe header, does not
 * count. Any other body gets a short footer naming the project, with the unsubscribe link.
 *
 * Runs on the rendered HTML before tracking is added: tracking leaves these links as they are.
 */
export function withUnsubscribeFooter(html: string, urls: ContactUrls, projectName: string): string {
  const targets = linkTargets(html);
  if (targets.includes(urls.unsubscribeUrl) || targets.includes(urls.manageUrl)) return html;
  return appendToBody(
    html,
    '<p style="margin:24px 0 0;font-size:12px;line-height:1.5;color:#6b7280">' +
      `You are receiving this because you subscribed to ${escapeHtml(projectName)}. ` +
      `<a href="${escapeHtml(urls.unsubscribeUrl)}" style="color:#6b7280">Unsubscribe</a></p>`,
  );
}
