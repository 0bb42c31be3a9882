import './keys.css';
import { CopyButton } from '../../components/ui';

/** A project's keys, right after they were made: the service never shows them again. */
export function KeysOnce({ secretKey, publicKey }: { secretKey: string; publicKey: string }) {
  return (
    <div className="notice keys-once" role="status">
      <p>
        <strong>Copy these keys now: they are shown only this once.</strong> Keep the secret key on your servers; the public key may
        go in web pages (it can only track events).
      </p>
      <dl className="key-list">
        <div>
          <dt>Secret key</dt>
          <dd>
            <code data-testid="secret-key">{secretKey}</code>
            <CopyButton value={secretKey} label="Copy secret key" />
          </dd>
        </div>
        <div>
          <dt>Public key</dt>
          <dd>
            <code data-testid="public-key">{publicKey}</code>
            <CopyButton value={publicKey} label="Copy public key" />
          </dd>
        </div>
      </dl>
    </div>
  );
}
