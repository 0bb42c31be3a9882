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

export const subscriptionPages = {
  confirmUnsubscribe: (email: string, token: string) =>
    page('Unsubscribe', `<p>Stop sending email to <strong>${escapeHtml(email)}</strong>?</p>${button(target('unsubscribe', token), 'Unsubscribe')}`),
  confirmSubscribe: (email: string, token: string) =>
    page('Subscribe', `<p>Receive email at <strong>${escapeHtml(email)}</strong> again?</p>${button(target('subscribe', token), 'Subscribe')}`),
  done: (email: string, subscribed: boolean, token: string) =>
    page(
      subscribed ? 'You are subscribed' : 'You are unsubscribed',
      `<p><strong>${escapeHtml(email)}</strong> ${subscribed ? 'will receive our email.' : 'will no longer receive our marketing email.'}</p>
       <p><a href="${escapeHtml(target('manage', token))}">Manage your subscription</a></p>`,
    ),
  manage: (email: string, subscribed: boolean, token: string) =>
    page(
      'Your subscription',
      `<p><strong>${escapeHtml(email)}</strong> is currently <strong>${subscribed ? 'subscribed' : 'unsubscribed'}</strong>.</p>
       ${subscribed ? button(target('unsubscribe', token), 'Unsubscribe') : button(target('subscribe', token), 'Subscribe again')}`,
    ),
  invalid: () => page('Link not valid', '<p>This link is not valid or the contact no longer exists.</p>'),
};
