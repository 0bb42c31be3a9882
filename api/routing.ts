import express, { type NextFunction, type Request, type RequestHandler, type Response, type Router } from 'express';
import type { z } from 'zod';
import type { Project } from '../db/entities/project';
import type { Role } from '../db/accounts/members';
import type { SessionUser } from '../db/accounts/users';
import type { AuthContext, RequestScope } from './context';
import { publicCors } from './cors';
import { parseOrThrow } from './validation';

/**
 * none: open. secret: a secret key, or a session of a project member (project from X-Project-Id
 * or `projectParam`). publicOrSecret: also a public key. session: a signed-in user only.
 */
export type AuthMode = 'none' | 'secret' | 'publicOrSecret' | 'session';
export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';
type Schema = z.ZodType;
type Out<S> = S extends Schema ? z.output<S> : undefined;
type In<S> = S extends Schema ? z.input<S> : never;

export interface RouteContext<A extends AuthMode, B, Q, P> {
  body: B;
  query: Q;
  params: P;
  project: A extends 'none' ? undefined : A extends 'session' ? Project | undefined : Project;
  auth: A extends 'none' ? undefined : A extends 'session' ? AuthContext | undefined : AuthContext;
  /** The signed-in user; always set on session routes, set on key-or-session routes when a session was used. */
  user: A extends 'session' ? SessionUser : SessionUser | undefined;
  scope: RequestScope;
  req: Request;
  res: Response;
}

export interface RouteSpec<A extends AuthMode, B extends Schema | undefined, Q extends Schema | undefined, P extends Schema | undefined> {
  method: HttpMethod;
  /** Full Express path; routes are registered flat so the OpenAPI check can see every one. */
  path: string;
  summary: string;
  /** Longer Markdown for the reference (/docs): what the operation does, its rules and its pitfalls. */
  description?: string;
  tag: string;
  auth: A;
  /** The project comes from this path parameter instead of the X-Project-Id header. */
  projectParam?: string;
  /** Least member role a session needs (OWNER > ADMIN > MEMBER); a secret key counts as ADMIN. */
  role?: Exclude<Role, 'MEMBER'>;
  body?: B;
  query?: Q;
  params?: P;
  /** Schema of the success response, for the OpenAPI document. */
  response?: Schema;
  /** Success status (default 200 with a response, else 204); a raw route sets its own, so there it documents only. */
  status?: number;
  /**
   * Error statuses this route can answer beyond the ones every route of its kind can (400/413 from
   * the body parser, 401/403/429 from the key check, 404, 422): status → Markdown naming the codes.
   * Documentation only; a 403 or 404 given here replaces the generic text.
   */
  errors?: Record<number, string>;
  /** Honours the `Idempotency-Key` header (documented as a header parameter). */
  idempotent?: boolean;
  /** Named examples of the request body and the success response, for the reference. */
  examples?: { request?: Record<string, RouteExample<In<B>>>; response?: Record<string, RouteExample> };
  /** JSON body size limit (body-parser syntax); default 1mb. */
  bodyLimit?: string;
  /** Replies with something other than JSON (HTML pages, the OpenAPI document). */
  raw?: boolean;
  /** Callable from web pages on any origin (CORS, with its OPTIONS preflight): routes taking the public key. */
  cors?: boolean;
  handler: (ctx: RouteContext<A, Out<B>, Out<Q>, Out<P>>) => Promise<unknown> | unknown;
}

export interface RouteExample<T = unknown> {
  summary: string;
  value: T;
}

export type AnyRouteSpec = RouteSpec<AuthMode, Schema | undefined, Schema | undefined, Schema | undefined>;

export interface Guards {
  /** Creates the per-request scope (entity manager fork). */
  scope: RequestHandler;
  authenticate: (spec: Pick<AnyRouteSpec, 'auth' | 'projectParam' | 'role' | 'method'>) => RequestHandler;
  rateLimit: RequestHandler;
}

export const scopeOf = (res: Response): RequestScope => res.locals.scope as RequestScope;

/**
 * Registers routes on the router and remembers them, so the OpenAPI document is generated
 * from the very schemas that validate requests. Per route: auth → rate limit → body → parse → handler.
 */
export class RouteRegistry {
  readonly routes: AnyRouteSpec[] = [];

  constructor(
    readonly router: Router,
    private readonly guards: Guards,
  ) {}

  add<A extends AuthMode, B extends Schema | undefined = undefined, Q extends Schema | undefined = undefined, P extends Schema | undefined = undefined>(
    spec: RouteSpec<A, B, Q, P>,
  ): void {
    // CORS comes first: a preflight carries no key, and the page must be able to read error replies too.
    const corsHandler = spec.cors ? publicCors(spec.method) : undefined;
    const chain: RequestHandler[] = corsHandler ? [corsHandler, this.guards.scope] : [this.guards.scope];
    if (spec.auth !== 'none') chain.push(this.guards.authenticate(spec), this.guards.rateLimit);
    if (spec.body) chain.push(express.json({ limit: spec.bodyLimit ?? '1mb', strict: false }));
    chain.push(async (req: Request, res: Response, next: NextFunction) => {
      try {
        const scope = scopeOf(res);
        const ctx = {
          body: spec.body ? parseOrThrow(spec.body, req.body ?? {}, 'body') : undefined,
          query: spec.query ? parseOrThrow(spec.query, req.query ?? {}, 'query') : undefined,
          params: spec.params ? parseOrThrow(spec.params, req.params, 'params') : undefined,
          project: scope.auth?.project,
          auth: scope.auth,
          user: scope.user,
          scope,
          req,
          res,
        } as RouteContext<A, Out<B>, Out<Q>, Out<P>>;
        const result = await spec.handler(ctx);
        if (spec.raw || res.headersSent) return;
        if (result === undefined) res.status(spec.status ?? 204).end();
        else res.status(res.statusCode !== 200 ? res.statusCode : (spec.status ?? 200)).json(result);
      } catch (err) {
        next(err);
      }
    });
    this.router[spec.method](spec.path, ...chain);
    // The preflight is browser plumbing, not an API operation: served, but left out of `routes`.
    if (corsHandler) this.router.options(spec.path, corsHandler);
    this.routes.push(spec as unknown as AnyRouteSpec);
  }
}
