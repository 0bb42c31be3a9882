import { AlertDialog } from 'radix-ui';
import { type ReactElement, type ReactNode, useState } from 'react';
import { ErrorNotice } from './ui';
import './ConfirmDialog.css';

/**
 * The question asked before an action that cannot be taken back (delete, send, hand over). The
 * trigger opens a modal alert dialog with focus on the safe choice; Escape or Cancel closes it and
 * focus returns to the trigger. Confirming runs `onConfirm`; when it returns a promise the dialog
 * waits: it closes once the action succeeded, and if the service refuses it stays open with the
 * service's error, so the refusal is read where the question was asked.
 */
export function ConfirmDialog({
  trigger,
  title,
  description,
  confirmLabel,
  pendingLabel,
  cancelLabel = 'Cancel',
  destructive = true,
  onConfirm,
}: {
  /** The button that opens the dialog. */
  trigger: ReactElement;
  title: string;
  /** What confirming does: a sentence, or richer content such as the list of what would be affected. */
  description: ReactNode;
  confirmLabel: string;
  /** The confirm button's text while the action runs ("Deleting…"). */
  pendingLabel?: string;
  cancelLabel?: string;
  /** The danger style for what destroys or cuts off; the primary style for what goes ahead (send, schedule). */
  destructive?: boolean;
  onConfirm: () => unknown;
}) {
  const [open, setOpen] = useState(false);
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<unknown>(null);

  const confirm = async () => {
    if (pending) return;
    setPending(true);
    setError(null);
    try {
      await onConfirm();
      setOpen(false);
    } catch (err) {
      setError(err);
    } finally {
      setPending(false);
    }
  };

  const onOpenChange = (next: boolean) => {
    // Once the action is under way, closing would hide its outcome without stopping it.
    if (pending) return;
    if (next) setError(null);
    setOpen(next);
  };

  return (
    <AlertDialog.Root open={open} onOpenChange={onOpenChange}>
      <AlertDialog.Trigger asChild>{trigger}</AlertDialog.Trigger>
      <AlertDialog.Portal>
        <AlertDialog.Overlay className="dialog-overlay" />
        <AlertDialog.Content className="dialog">
          <AlertDialog.Title className="dialog-title">{title}</AlertDialog.Title>
          <AlertDialog.Description asChild>
            <div className="dialog-description">{typeof description === 'string' ? <p>{description}</p> : description}</div>
          </AlertDialog.Description>
          <ErrorNotice error={error} />
          <div className="actions dialog-actions">
            <AlertDialog.Cancel asChild>
              <button type="button">{cancelLabel}</button>
            </AlertDialog.Cancel>
            {/*
              Not AlertDialog.Action, which closes at once, before the outcome is known. aria-disabled
              rather than disabled while pending: a disabled button drops the focus out of the dialog.
            */}
            <button
              type="button"
              className={destructive ? 'button-danger' : 'button-primary'}
              aria-disabled={pending || undefined}
              onClick={() => void confirm()}
            >
              {pending && pendingLabel ? pendingLabel : confirmLabel}
            </button>
          </div>
        </AlertDialog.Content>
      </AlertDialog.Portal>
    </AlertDialog.Root>
  );
}
