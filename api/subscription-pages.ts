import { escapeHtml } from '../mail/html';
import { htmlPage } from './html-page';

const page = (title: string, content: string) =>
  htmlPage(title, content, 'button{font-size:1rem;padding:.5rem 1rem;cursor:pointer}form{display:inline-block;margin-right:.5rem}');

const button = (action: string, label: string) =>
  `<form method="post" action="${escapeHtml(action)}"><button type="submit">${escapeHtml(label)}</button></form>`;

/**
 * Targets relative to the page (every page is /<kind>/<token>): root-relative ones ("/unsubscribe/…")
 * skipped the path of a PUBLIC_URL such as https://example.com/mail, so behind a path-prefix proxy
 * the buttons posted to a URL the service is not reachable at.
 */
const target = (kind: 'unsubscribe' | 'subscribe' | 'manage', token: string) => `../${kind}/${token}`;

/** Who the page is about: the contact's address, its state, and the project whose mail it is. */
export interface PageSubject {
  email: string;
  subscribed: boolean;
  projectName: string;
}

export const subscriptionPages = {
  confirmUnsubscribe: (s: PageSubject, token: string) =>
    page(
      `Unsubscribe from ${s.projectName}`,
      `<p>Stop sending email from <strong>${escapeHtml(s.projectName)}</strong> to <strong>${escapeHtml(s.email)}</strong>?</p>${button(target('unsubscribe', token), 'Unsubscribe')}`,
    ),
  confirmSubscribe: (s: PageSubject, token: string) =>
    page(
      `Subscribe to ${s.projectName}`,
      `<p>Receive email from <strong>${escapeHtml(s.projectName)}</strong> at <strong>${escapeHtml(s.email)}</strong> again?</p>${button(target('subscribe', token), 'Subscribe')}`,
    ),
  done: (s: PageSubject, token: string) =>
    page(
      s.subscribed ? `You are subscribed to ${s.projectName}` : `You are unsubscribed from ${s.projectName}`,
      `<p><strong>${escapeHtml(s.email)}</strong> ${s.subscribed ? 'will receive email from' : 'will no longer receive marketing email from'} <strong>${escapeHtml(s.projectName)}</strong>.</p>
       <p><a href="${escapeHtml(target('manage', token))}">Manage your subscription</a></p>`,
    ),
  manage: (s: PageSubject, token: string) =>
    page(
      `Your subscription to ${s.projectName}`,
      `<p><strong>${escapeHtml(s.email)}</strong> is currently <strong>${s.subscribed ? 'subscribed' : 'unsubscribed'}</strong> to email from <strong>${escapeHtml(s.projectName)}</strong>.</p>
       ${s.subscribed ? button(target('unsubscribe', token), 'Unsubscribe') : button(target('subscribe', token), 'Subscribe again')}`,
    ),
  invalid: () => page('Link not valid', '<p>This link is not valid or the contact no longer exists.</p>'),
};
