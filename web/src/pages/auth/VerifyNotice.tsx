import { useMutation } from '@tanstack/react-query';
import { api } from '../../api/client';
import { type Me } from '../../api/session';
import { ErrorNotice } from '../../components/ui';

/** POST /auth/request-verification: a new link (earlier ones stop working), limited per minute. */
export function ResendVerification() {
  const resend = useMutation({
    mutationFn: () => api<{ message: string }>('/auth/request-verification', { method: 'POST', project: null }),
  });
  return (
    <>
      <button type="button" className="button-small" onClick={() => resend.mutate()} disabled={resend.isPending}>
        {resend.isPending ? 'Sending…' : 'Send the link again'}
      </button>
      {resend.data ? (
        <p role="status" className="notice notice-ok">
          {resend.data.message}
        </p>
      ) : null}
      <ErrorNotice error={resend.error} />
    </>
  );
}

/** Shown while the signed-in user's address is not confirmed yet. */
export function VerifyNotice({ me }: { me: Me }) {
  if (me.emailVerified) return null;
  return (
    <section className="notice verify-notice" aria-label="Email address not confirmed">
      <p>
        Confirm your email address: we sent a link to <strong>{me.email}</strong>.
      </p>
      <ResendVerification />
    </section>
  );
}
