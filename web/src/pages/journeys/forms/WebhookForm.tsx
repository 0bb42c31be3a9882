import { useState } from 'react';
import { fieldError, SelectField, TextArea, TextField } from '../../../components/ui';
import { type FormProps, Frame, str } from './Frame';

const METHODS = ['POST', 'GET', 'PUT', 'PATCH', 'DELETE'];

/** WEBHOOK: URL, method, headers (one per line) and body, the URL and body templated. */
export function WebhookForm(props: FormProps) {
  const c = props.step.config;
  const [url, setUrl] = useState(str(c.url));
  const [method, setMethod] = useState(str(c.method, 'POST'));
  const [headers, setHeaders] = useState(
    Object.entries((c.headers ?? {}) as Record<string, string>)
      .map(([k, v]) => `${k}: ${v}`)
      .join('\n'),
  );
  const [body, setBody] = useState(str(c.body));
  return (
    <Frame
      {...props}
      build={() => {
        const parsed: Record<string, string> = {};
        for (const line of headers.split('\n').map((l) => l.trim()).filter(Boolean)) {
          const colon = line.indexOf(':');
          if (colon < 1) return { error: `Write each header as “Name: value” (line “${line}”).` };
          parsed[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
        }
        const config: Record<string, unknown> = { url: url.trim(), method };
        if (Object.keys(parsed).length > 0) config.headers = parsed;
        if (body.trim()) config.body = body;
        return { config };
      }}
    >
      {(error) => (
        <>
          <TextField label="URL" hint="Templated, e.g. https://example.com/hooks/{{contact.email}}" value={url} onChange={(e) => setUrl(e.target.value)} required error={fieldError(error, 'url')} />
          <SelectField label="Method" value={method} onChange={(e) => setMethod(e.target.value)}>
            {METHODS.map((m) => (
              <option key={m} value={m}>
                {m}
              </option>
            ))}
          </SelectField>
          <TextArea label="Headers" hint="One “Name: value” per line" value={headers} onChange={(e) => setHeaders(e.target.value)} error={fieldError(error, 'headers')} rows={3} />
          <TextArea
            label="Body"
            hint="Templated; empty sends the contact, journey, execution and context as JSON"
            value={body}
            onChange={(e) => setBody(e.target.value)}
            error={fieldError(error, 'body')}
            rows={4}
          />
        </>
      )}
    </Frame>
  );
}
