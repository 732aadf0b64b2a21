# syntax=docker/dockerfile:1
#
# The two images of pulumi-mc-operator, from one build:
#
#   docker build --target hooks -t ghcr.io/pulumi-mc-operator/hooks:v0.1.0 .
#   docker build --target agent -t ghcr.io/pulumi-mc-operator/agent:v0.1.0 .
#
# hooks: the Metacontroller hook server (Deployment pulumi-mc-hooks). Production dependencies only,
#        numeric non-root user, nothing written outside /tmp (runs with a read-only root filesystem).
# agent: `pko-agent` plus the Pulumi CLI with its Node.js and YAML language hosts, git and ssh.
#        The bootstrap and fetch init containers and every operation Job run it; it also holds the
#        self-contained agent (/opt/pko-agent) that the workspace runs in the user's Pulumi image.
#
# Build arguments: NODE_VERSION (a tag of the official node image: 24, 24.21, ...), PULUMI_VERSION
# (a Pulumi CLI release), DEBIAN_RELEASE, and PULUMI_STAGE: where the agent's /pulumi/bin comes
# from. Its default, pulumi-release, is the stage below that downloads the release for
# PULUMI_VERSION; any other value names an image holding /pulumi/bin/* (the e2e test bed, which
# cannot download releases, passes an image of the Pulumi binaries it builds from source:
# e2e/testbed/images/pulumi.ts).
#
# buildah (1.28 at least) skips stages it thinks unused and cannot see that FROM ${PULUMI_STAGE}
# names a stage: a default build then fails with "pulumi-release: image not known". Build with
# `buildah bud --skip-unused-stages=false` (Docker BuildKit resolves the stage by itself).
#
# packaging/dockerfile.test.ts checks the stages, build arguments and build context;
# packaging/images.e2e.ts runs the built images as pods on the e2e test bed's node.

ARG NODE_VERSION=24
ARG PULUMI_VERSION=3.274.1
ARG DEBIAN_RELEASE=bookworm
ARG PULUMI_STAGE=pulumi-release

# ---------------------------------------------------------------------------------------------
# build: compile contract/, schemas/, hooks/ and agent/ into dist/ (npm run build).
FROM node:${NODE_VERSION}-${DEBIAN_RELEASE}-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY contract/ contract/
COPY schemas/ schemas/
COPY hooks/ hooks/
COPY agent/ agent/
COPY bin/ bin/
RUN npm run build

# ---------------------------------------------------------------------------------------------
# prod-deps: node_modules without devDependencies, shared by both images.
FROM node:${NODE_VERSION}-${DEBIAN_RELEASE}-slim AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# ---------------------------------------------------------------------------------------------
# pulumi-release: the official release tarball for PULUMI_VERSION, verified against the release's
# checksums file; only the CLI, the Node.js and YAML language hosts and their helper scripts are kept.
FROM debian:${DEBIAN_RELEASE}-slim AS pulumi-release
ARG PULUMI_VERSION
ARG TARGETARCH
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /tmp/pulumi
RUN set -eu; \
    case "${TARGETARCH:-amd64}" in \
      amd64) arch=x64 ;; \
      arm64) arch=arm64 ;; \
      *) echo "no Pulumi release for architecture ${TARGETARCH}" >&2; exit 1 ;; \
    esac; \
    base="https://github.com/pulumi/pulumi/releases/download/v${PULUMI_VERSION}"; \
    tarball="pulumi-v${PULUMI_VERSION}-linux-${arch}.tar.gz"; \
    sums="pulumi-${PULUMI_VERSION}-checksums.txt"; \
    curl -fsSLO "${base}/${tarball}"; \
    curl -fsSLO "${base}/${sums}"; \
    grep " ${tarball}\$" "${sums}" > tarball.sha256; \
    sha256sum -c tarball.sha256; \
    tar -xzf "${tarball}"; \
    mkdir -p /pulumi/bin; \
    for f in pulumi pulumi-language-nodejs pulumi-language-yaml pulumi-resource-pulumi-nodejs pulumi-analyzer-policy; do \
      install -m 0755 "pulumi/${f}" /pulumi/bin/; \
    done; \
    /pulumi/bin/pulumi version

# ---------------------------------------------------------------------------------------------
# pulumi: the Pulumi binaries the agent copies (/pulumi/bin), from PULUMI_STAGE.
FROM ${PULUMI_STAGE} AS pulumi

# ---------------------------------------------------------------------------------------------
# injected-agent: what the workspace pod's `bootstrap` init container copies into /share, so that
# the workspace runs in the user's image (docs/design.md, "The workspace pod"): /opt/pko-agent/tini
# (static) and /opt/pko-agent/agent/{node, agent.js, lib/}: Node.js (stripped) with the agent as one
# bundled file (npm run build:bundles). node finds libstdc++ and libgcc_s in its own lib/ (RUNPATH
# $ORIGIN/lib, set with patchelf), so the workspace image needs only glibc 2.28+ and the Pulumi CLI.
FROM node:${NODE_VERSION}-${DEBIAN_RELEASE}-slim AS injected-agent
RUN apt-get update \
 && apt-get install -y --no-install-recommends binutils patchelf tini \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/dist/bundles/pko-agent.js /opt/pko-agent/agent/agent.js
RUN set -eu; \
    dir=/opt/pko-agent/agent; \
    mkdir -p "$dir/lib"; \
    cp /usr/local/bin/node "$dir/node"; \
    strip "$dir/node"; \
    for lib in libstdc++.so.6 libgcc_s.so.1; do \
      cp -L "$(ldd /usr/local/bin/node | awk -v l="$lib" '$1 == l { print $3 }')" "$dir/lib/"; \
    done; \
    patchelf --set-rpath '$ORIGIN/lib' "$dir/node"; \
    install -m 0755 /usr/bin/tini-static /opt/pko-agent/tini; \
    ldd "$dir/node" | grep -q "libstdc++.so.6 => $dir/lib/"; \
    "$dir/node" "$dir/agent.js" version

# ---------------------------------------------------------------------------------------------
# hooks: `node --max-semi-space-size=16 dist/hooks/src/main.js` on port 8080.
FROM node:${NODE_VERSION}-${DEBIAN_RELEASE}-slim AS hooks
# npm, npx, corepack and yarn are not needed at run time.
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /opt/yarn-*
ENV NODE_ENV=production
WORKDIR /app
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/dist ./dist
USER 65532:65532
EXPOSE 8080
ENTRYPOINT []
# The node flags are HOOKS_NODE_FLAGS (hooks/src/config.ts: why).
CMD ["node", "--max-semi-space-size=16", "dist/hooks/src/main.js"]

# ---------------------------------------------------------------------------------------------
# agent: `pko-agent fetch|serve|update`. uid/gid 1000 (the image's `node` user, home /home/node),
# which is what the workspace pods' restricted security profile runs as.
FROM node:${NODE_VERSION}-${DEBIAN_RELEASE}-slim AS agent
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git openssh-client tini \
 && rm -rf /var/lib/apt/lists/*
COPY --from=pulumi /pulumi/bin /pulumi/bin
WORKDIR /app
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/dist ./dist
COPY --from=build /src/bin/pko-agent ./bin/pko-agent
# `pko-agent` on PATH: puts tini in front of the agent when it is PID 1 (see the script).
COPY packaging/docker/pko-agent /usr/local/bin/pko-agent
# The workspace's injected agent, copied into /share by the `bootstrap` init container.
COPY --from=injected-agent /opt/pko-agent /opt/pko-agent
ENV PATH=/pulumi/bin:/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/home/node \
    PULUMI_SKIP_UPDATE_CHECK=true
USER 1000:1000
WORKDIR /home/node
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["pko-agent", "serve"]
