import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api } from '../../api/client';
import { useMe } from '../../api/session';
import { ErrorNotice, Loading } from '../../components/ui';
import { AuthFrame, sessionChanged } from './AuthFrame';
import { ResendVerification } from './VerifyNotice';

interface VerifiedUser {
  user: { email: string; emailVerified: boolean };
}

/**
 * /verify?token=…, the link of the verification email: the token is posted once, on opening.
 * Without a token it says where the link went and offers a new one.
 */
export default function Verify() {
  const [params] = useSearchParams();
  const token = params.get('token');
  return token ? <VerifyToken token={token} /> : <AwaitingLink />;
}

function VerifyToken({ token }: { token: string }) {
  const client = useQueryClient();
  const me = useMe();
  const verify = useMutation({
    mutationFn: () => api<VerifiedUser>('/auth/verify-email', { method: 'POST', body: { token }, project: null }),
    onSuccess: () => sessionChanged(client),
  });
  // Posted once per token: the token is single use, and React may run an effect twice.
  const posted = useRef<string | null>(null);
  const { mutate } = verify;
  useEffect(() => {
    if (posted.current === token) return;
    posted.current = token;
    mutate();
  }, [token, mutate]);

  if (verify.isSuccess) {
    return (
      <AuthFrame title="Email address confirmed">
        <p role="status" className="notice notice-ok">
          <strong>{verify.data.user.email}</strong> is confirmed.
        </p>
        <p>
          <Link className="button button-primary" to="/">
            Continue to the dashboard
          </Link>
        </p>
      </AuthFrame>
    );
  }
  if (verify.isError) {
    return (
      <AuthFrame title="This link does not work">
        <ErrorNotice error={verify.error} />
        {me.data && !me.data.emailVerified ? (
          <ResendVerification />
        ) : me.data ? (
          <p>
            Your address is confirmed already. <Link to="/">Continue to the dashboard</Link>
          </p>
        ) : (
          <p>
            <Link to="/signin">Sign in</Link> to have a new link sent.
          </p>
        )}
      </AuthFrame>
    );
  }
  return (
    <AuthFrame title="Confirming your email address">
      <Loading label="Confirming…" />
    </AuthFrame>
  );
}

function AwaitingLink() {
  const me = useMe();
  if (me.isPending) return <Loading />;
  if (!me.data) {
    return (
      <AuthFrame title="Confirm your email address">
        <p>Open the link in the email we sent you when you signed up.</p>
        <p>
          <Link to="/signin">Sign in</Link> to have a new link sent.
        </p>
      </AuthFrame>
    );
  }
  if (me.data.emailVerified) {
    return (
      <AuthFrame title="Email address confirmed">
        <p>
          <strong>{me.data.email}</strong> is confirmed. <Link to="/">Continue to the dashboard</Link>
        </p>
      </AuthFrame>
    );
  }
  return (
    <AuthFrame title="Confirm your email address">
      <p>
        We sent a link to <strong>{me.data.email}</strong>. Open it to confirm the address.
      </p>
      <ResendVerification />
      <p>
        <Link to="/">Continue to the dashboard</Link>
      </p>
    </AuthFrame>
  );
}
