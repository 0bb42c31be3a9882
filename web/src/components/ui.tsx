import { type ReactNode, useId, type InputHTMLAttributes, type SelectHTMLAttributes, type TextareaHTMLAttributes } from 'react';
import { ApiError } from '../api/client';

/** The page's title and its main actions; every page starts with one (one h1 per page). */
export function PageHeader({ title, children, description }: { title: string; description?: ReactNode; children?: ReactNode }) {
  return (
    <header className="page-header">
      <div>
        <h1>{title}</h1>
        {description ? <p className="muted">{description}</p> : null}
      </div>
      {children ? <div className="actions">{children}</div> : null}
    </header>
  );
}

type FieldProps = { label: string; hint?: ReactNode; error?: string };

export function TextField({ label, hint, error, ...input }: FieldProps & InputHTMLAttributes<HTMLInputElement>) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <input id={id} aria-invalid={error ? true : undefined} aria-describedby={error || hint ? `${id}-note` : undefined} {...input} />
      {error || hint ? (
        <p id={`${id}-note`} className={error ? 'field-error' : 'muted'}>
          {error ?? hint}
        </p>
      ) : null}
    </div>
  );
}

export function TextArea({ label, hint, error, ...input }: FieldProps & TextareaHTMLAttributes<HTMLTextAreaElement>) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <textarea id={id} aria-invalid={error ? true : undefined} aria-describedby={error || hint ? `${id}-note` : undefined} {...input} />
      {error || hint ? (
        <p id={`${id}-note`} className={error ? 'field-error' : 'muted'}>
          {error ?? hint}
        </p>
      ) : null}
    </div>
  );
}

export function SelectField({ label, hint, error, children, ...select }: FieldProps & SelectHTMLAttributes<HTMLSelectElement>) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <select id={id} aria-invalid={error ? true : undefined} {...select}>
        {children}
      </select>
      {error || hint ? <p className={error ? 'field-error' : 'muted'}>{error ?? hint}</p> : null}
    </div>
  );
}

/** What went wrong, in the service's words, with its suggestion and the fields it named. */
export function ErrorNotice({ error }: { error: unknown }) {
  if (!error) return null;
  const apiError = error instanceof ApiError ? error : null;
  const message = apiError?.message ?? (error instanceof Error ? error.message : String(error));
  return (
    <div role="alert" className="notice notice-error">
      <p>{message}</p>
      {apiError?.suggestion ? <p className="muted">{apiError.suggestion}</p> : null}
      {apiError?.fields.length ? (
        <ul>
          {apiError.fields.map((f) => (
            <li key={`${f.field}:${f.message}`}>
              <code>{f.field}</code>: {f.message}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

/** The message of a field the service named in a validation error, if any. */
export function fieldError(error: unknown, field: string): string | undefined {
  return error instanceof ApiError ? error.fields.find((f) => f.field === field || f.field.endsWith(`.${field}`))?.message : undefined;
}

export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <p className="muted" role="status">
      {label}
    </p>
  );
}

export function ProgressBar({ value, max, label }: { value: number; max: number; label: string }) {
  const percent = max > 0 ? Math.min(100, Math.round((value / max) * 100)) : 0;
  return (
    <div className="progress">
      <div className="progress-label">
        <span>{label}</span>
        <span>{percent} %</span>
      </div>
      <div role="progressbar" aria-label={label} aria-valuemin={0} aria-valuemax={100} aria-valuenow={percent} className="progress-track">
        <div className="progress-fill" style={{ width: `${percent}%` }} />
      </div>
    </div>
  );
}

export function EmptyState({ children }: { children: ReactNode }) {
  return <div className="empty">{children}</div>;
}

/** Copies a value to the clipboard and says so to screen readers. */
export function CopyButton({ value, label = 'Copy' }: { value: string; label?: string }) {
  return (
    <button
      type="button"
      className="button-small"
      onClick={(event) => {
        const button = event.currentTarget;
        void navigator.clipboard?.writeText(value).then(
          () => {
            button.textContent = 'Copied';
            setTimeout(() => (button.textContent = label), 1500);
          },
          () => undefined,
        );
      }}
    >
      {label}
    </button>
  );
}
