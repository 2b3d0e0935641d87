# syntax=docker/dockerfile:1
# The same commands .ci/run executes in its "image steps" section (no Docker engine runs in CI):
# install + build, then production dependencies only, then migrate and serve as a non-root user.

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY migrations ./migrations
RUN npm run build

FROM node:20-bookworm-slim AS production-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
# The JavaScript heap is capped well above the server's live data (about 40 MB under load): left
# to size itself on a large machine, V8 grew it to 110 MB of mostly garbage before collecting,
# and the process past 200 MB. Raise it if you run with much larger in-memory state.
ENV NODE_ENV=production \
    NODE_OPTIONS="--max-old-space-size=256" \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/data
WORKDIR /app
COPY --from=production-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY bin ./bin
COPY views ./views
COPY locales ./locales
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# Migrations first (idempotent, and safe with several replicas: Kysely's migrator takes a lock),
# then the server, with MIGRATE_ON_START off because the step above did it.
CMD ["sh", "-c", "node bin/device-auth.js migrate && MIGRATE_ON_START=false exec node dist/src/server.js"]
