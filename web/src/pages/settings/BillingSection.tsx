import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api } from '../../api/client';
import { useServiceConfig } from '../../api/config';
import { formatDate } from '../../components/format';
import { TableScroll } from '../../components/TableScroll';
import { ErrorNotice, fieldError, Loading, ProgressBar, TextField } from '../../components/ui';

const CATEGORIES = ['transactional', 'campaign', 'workflow'] as const;
type Category = (typeof CATEGORIES)[number];
const CATEGORY_NAMES: Record<Category, string> = { transactional: 'Transactional (API sends)', campaign: 'Campaigns', workflow: 'Journeys' };

type Limits = Record<Category, number | null>;

interface Consumption {
  period: { start: string; end: string };
  categories: Record<Category, { used: number; limit: number | null; refused: number }>;
  total: number;
}

interface Invoice {
  id: string;
  number: string | null;
  status: string | null;
  amountDue: number;
  amountPaid: number;
  currency: string;
  created: string;
  hostedInvoiceUrl: string | null;
  pdf: string | null;
}

const base = (projectId: string) => `/users/@me/projects/${projectId}`;

/**
 * Monthly consumption and caps (every deployment), and, when the deployment bills (GET /config),
 * the payment provider's checkout, portal and invoices.
 */
export function BillingSection({ projectId, admin }: { projectId: string; admin: boolean }) {
  const config = useServiceConfig();
  const consumption = useQuery({
    queryKey: ['billing-consumption', projectId],
    queryFn: () => api<Consumption>(`${base(projectId)}/billing-consumption`, { project: null }),
  });
  const limits = useQuery({ queryKey: ['billing-limits', projectId], queryFn: () => api<Limits>(`${base(projectId)}/billing-limits`, { project: null }) });
  const billing = config.data?.features.billing.enabled === true;
  return (
    <section className="card" id="billing" aria-labelledby="billing-heading">
      <h2 id="billing-heading">Usage and limits</h2>
      <ErrorNotice error={consumption.error} />
      {consumption.isPending ? <Loading /> : null}
      {consumption.data ? <Usage consumption={consumption.data} /> : null}
      <ErrorNotice error={limits.error} />
      {limits.data ? <LimitsForm projectId={projectId} limits={limits.data} admin={admin} /> : null}
      {billing ? <Payments projectId={projectId} admin={admin} /> : null}
    </section>
  );
}

function Usage({ consumption }: { consumption: Consumption }) {
  const month = new Date(consumption.period.start).toLocaleDateString(undefined, { month: 'long', year: 'numeric', timeZone: 'UTC' });
  return (
    <>
      <p>
        Emails written in {month} (UTC): <strong>{consumption.total.toLocaleString()}</strong>.
      </p>
      <TableScroll label="Emails per category this month">
        <table>
          <caption className="visually-hidden">Emails per category this month</caption>
          <thead>
            <tr>
              <th scope="col">Category</th>
              <th scope="col">Used</th>
              <th scope="col">Monthly cap</th>
              <th scope="col">Refused by the cap</th>
            </tr>
          </thead>
          <tbody>
            {CATEGORIES.map((c) => {
              const row = consumption.categories[c];
              return (
                <tr key={c}>
                  <th scope="row">{CATEGORY_NAMES[c]}</th>
                  <td>{row.used.toLocaleString()}</td>
                  <td>{row.limit === null ? 'No cap' : row.limit.toLocaleString()}</td>
                  <td>{row.refused.toLocaleString()}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </TableScroll>
      {CATEGORIES.filter((c) => consumption.categories[c].limit !== null).map((c) => (
        <ProgressBar key={c} value={consumption.categories[c].used} max={consumption.categories[c].limit!} label={`${CATEGORY_NAMES[c]}: share of the cap used`} />
      ))}
    </>
  );
}

function LimitsForm({ projectId, limits, admin }: { projectId: string; limits: Limits; admin: boolean }) {
  const client = useQueryClient();
  const [values, setValues] = useState<Record<Category, string>>(() => ({
    transactional: limits.transactional?.toString() ?? '',
    campaign: limits.campaign?.toString() ?? '',
    workflow: limits.workflow?.toString() ?? '',
  }));
  const save = useMutation({
    mutationFn: () =>
      api<Limits>(`${base(projectId)}/billing-limits`, {
        method: 'PUT',
        // An empty field removes the cap; anything else is sent as written, for the service to judge.
        body: Object.fromEntries(CATEGORIES.map((c) => [c, values[c].trim() === '' ? null : Number(values[c])])),
        project: null,
      }),
    onSuccess: async () => {
      await Promise.all([
        client.invalidateQueries({ queryKey: ['billing-limits', projectId] }),
        client.invalidateQueries({ queryKey: ['billing-consumption', projectId] }),
      ]);
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    save.mutate();
  };
  return (
    <form onSubmit={submit} noValidate aria-labelledby="limits-heading">
      <h3 id="limits-heading">Monthly caps</h3>
      <p className="muted">Emails per calendar month (UTC). Empty: no cap; 0 stops the category. Over a cap, sends are refused.</p>
      <fieldset className="plain" disabled={!admin}>
        <div className="inline-form limits">
          {CATEGORIES.map((c) => (
            <TextField
              key={c}
              label={CATEGORY_NAMES[c]}
              type="number"
              inputMode="numeric"
              min={0}
              step={1}
              value={values[c]}
              onChange={(e) => setValues((v) => ({ ...v, [c]: e.target.value }))}
              error={fieldError(save.error, c)}
            />
          ))}
          <button type="submit" disabled={save.isPending}>
            {save.isPending ? 'Saving…' : 'Save caps'}
          </button>
        </div>
      </fieldset>
      {admin ? null : <p className="muted">Owners and admins can change the caps.</p>}
      {save.isSuccess ? (
        <p role="status" className="notice notice-ok">
          Caps saved.
        </p>
      ) : null}
      <ErrorNotice error={save.error} />
    </form>
  );
}

function Payments({ projectId, admin }: { projectId: string; admin: boolean }) {
  const invoices = useQuery({
    queryKey: ['billing-invoices', projectId],
    queryFn: () => api<{ data: Invoice[] }>(`${base(projectId)}/billing-invoices`, { project: null }),
  });
  const here = `${window.location.origin}/app/p/${projectId}/settings`;
  // Both answer a page of the payment provider to go to.
  const go = useMutation({
    mutationFn: (kind: 'checkout' | 'billing-portal') =>
      api<{ url: string }>(`${base(projectId)}/${kind}`, {
        method: 'POST',
        body: kind === 'checkout' ? { successUrl: `${here}?billing=success`, cancelUrl: `${here}?billing=cancelled` } : { returnUrl: here },
        project: null,
      }),
    onSuccess: ({ url }) => window.location.assign(url),
  });
  return (
    <div aria-labelledby="payments-heading" role="group">
      <h3 id="payments-heading">Subscription and invoices</h3>
      <div className="actions">
        <button type="button" className="button-primary" disabled={!admin || go.isPending} onClick={() => go.mutate('checkout')}>
          Subscribe
        </button>
        <button type="button" disabled={!admin || go.isPending} onClick={() => go.mutate('billing-portal')}>
          Manage billing
        </button>
        {admin ? null : <span className="muted">Owners and admins manage the subscription.</span>}
      </div>
      <ErrorNotice error={go.error} />
      <ErrorNotice error={invoices.error} />
      {invoices.data && invoices.data.data.length === 0 ? <p className="muted">No invoices yet.</p> : null}
      {invoices.data && invoices.data.data.length > 0 ? (
        <TableScroll label="Invoices">
          <table>
            <caption className="visually-hidden">Invoices</caption>
            <thead>
              <tr>
                <th scope="col">Invoice</th>
                <th scope="col">Date</th>
                <th scope="col">Status</th>
                <th scope="col">Amount</th>
              </tr>
            </thead>
            <tbody>
              {invoices.data.data.map((invoice) => (
                <tr key={invoice.id}>
                  <td>{invoice.hostedInvoiceUrl ? <a href={invoice.hostedInvoiceUrl}>{invoice.number ?? invoice.id}</a> : (invoice.number ?? invoice.id)}</td>
                  <td>{formatDate(invoice.created)}</td>
                  <td>{invoice.status ?? '—'}</td>
                  <td>{money(invoice.amountDue, invoice.currency)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      ) : null}
    </div>
  );
}

/** An amount in the currency's smallest unit, as the browser's locale writes it. */
function money(amount: number, currency: string): string {
  try {
    const format = new Intl.NumberFormat(undefined, { style: 'currency', currency: currency.toUpperCase() });
    const digits = format.resolvedOptions().maximumFractionDigits ?? 2;
    return format.format(amount / 10 ** digits);
  } catch {
    return `${amount} ${currency}`;
  }
}
