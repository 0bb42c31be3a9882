/**
 * Every call the dashboard makes goes through `api`: same-origin, the session cookie, the current
 * project in X-Project-Id, and the service's error envelope turned into an ApiError.
 */

export interface FieldError {
  field: string;
  message: string;
  code?: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly suggestion?: string,
    readonly fields: FieldError[] = [],
  ) {
    super(message);
  }
}

let currentProject: string | null = null;

/** Set by the project layout; calls made under it carry the project. */
export function setCurrentProject(projectId: string | null): void {
  currentProject = projectId;
}

export interface CallOptions {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  body?: unknown;
  query?: Record<string, string | number | boolean | undefined | null>;
  /** For multipart uploads: sent as is, without a JSON content type. */
  form?: FormData;
  /** Overrides the current project (pages under /p/:projectId pass it explicitly). */
  project?: string | null;
  signal?: AbortSignal;
}

export function url(path: string, query?: CallOptions['query']): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== '') params.set(key, String(value));
  }
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

export async function api<T>(path: string, options: CallOptions = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  const project = options.project === undefined ? currentProject : options.project;
  if (project) headers['X-Project-Id'] = project;
  let body: BodyInit | undefined;
  if (options.form) body = options.form;
  else if (options.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(options.body);
  }
  const res = await fetch(url(path, options.query), {
    method: options.method ?? 'GET',
    headers,
    body,
    credentials: 'same-origin',
    signal: options.signal,
  });
  const text = await res.text();
  const parsed: unknown = text ? safeJson(text) : undefined;
  if (!res.ok) throw toApiError(res.status, parsed);
  // The public endpoints answer in an envelope; the dashboard endpoints answer the resource itself.
  if (isEnvelope(parsed)) return parsed.data as T;
  return parsed as T;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function isEnvelope(value: unknown): value is { success: true; data: unknown } {
  return typeof value === 'object' && value !== null && (value as { success?: unknown }).success === true && 'data' in value;
}

function toApiError(status: number, body: unknown): ApiError {
  const error = (body as { error?: { code?: string; message?: string; suggestion?: string; errors?: FieldError[] } } | undefined)?.error;
  if (error && typeof error === 'object') {
    return new ApiError(status, error.code ?? 'ERROR', error.message ?? `Request failed (${status})`, error.suggestion, error.errors ?? []);
  }
  return new ApiError(status, 'ERROR', `Request failed (${status})`);
}

/** The cursor-paginated list shape of the dashboard endpoints. */
export interface CursorPage<T> {
  data: T[];
  cursor: string | null;
  hasMore: boolean;
  total: number;
}
