import { escapeHtml } from '../mail/html';
import { htmlPage } from './html-page';

const page = (title: string, content: string) =>
  htmlPage(title, content, 'input,button{font-size:1rem;padding:.5rem}button{cursor:pointer}');

/**
 * The pages behind the links in account mail. The reset link only shows a form: following it
 * (a mail scanner prefetching it, say) spends nothing; the form posts the token and the new
 * password as JSON to POST /auth/reset-password, relative to this page so a path prefix still works.
 */
export const authPages = {
  verified: (email: string) => page('Email address confirmed', `<p><strong>${escapeHtml(email)}</strong> is confirmed. You can close this page.</p>`),
  invalidLink: (message: string) => page('Link not valid', `<p>${escapeHtml(message)}</p>`),
  resetForm: (token: string) =>
    page(
      'Choose a new password',
      `<form id="reset" data-token="${escapeHtml(token)}">
<p><label>New password (8 to 200 characters)<br><input type="password" name="password" minlength="8" maxlength="200" required autocomplete="new-password"></label></p>
<p><button type="submit">Set password</button></p></form><p id="result" role="status"></p>
<script>
document.getElementById('reset').addEventListener('submit', async (e) => {
  e.preventDefault();
  const form = e.target;
  const res = await fetch('reset-password', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token: form.dataset.token, password: form.password.value }) });
  const body = await res.json().catch(() => ({}));
  document.getElementById('result').textContent = res.ok ? 'Your password is changed. Sign in with it.' : (body.message || 'Something went wrong.');
  if (res.ok) form.remove();
});
</script>`,
    ),
};
