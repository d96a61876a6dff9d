# The image of the Dynamo graph src/disagg.ts#Prefill, written by dynamo-deploy.
# Build it with the project root as context (list node_modules in its .dockerignore):
#   docker build -f <this file> -t <image> <project root>
FROM node:20-bookworm-slim
WORKDIR /app
COPY . .
RUN corepack enable && pnpm install --frozen-lockfile --prod
WORKDIR /app/examples/sdk-disagg
ENV NODE_ENV=production DYN_DISCOVERY_BACKEND=etcd DYN_REQUEST_PLANE=nats
CMD ["node_modules/.bin/dynamo-serve", "src/disagg.ts#Prefill"]
