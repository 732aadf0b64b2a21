#!/usr/bin/env bash
# The hook server's credentials for manifests/install.yaml, printed as two Secrets:
#
#   <service>-tls   tls.crt, tls.key  the hook server's certificate, for <service>.<namespace>
#                                     (the host Metacontroller calls) and <service>.<namespace>.svc
#                   ca.crt            the CA that signed it (its key is thrown away), which
#                                     Metacontroller checks the hook server against (caBundle)
#   <service>-auth  token             the bearer token Metacontroller sends (authorization) and
#                                     the hook routes require
#
# Make them before the controllers of install.yaml (Metacontroller reads them when it starts a
# controller):
#
#   kubectl create namespace pulumi-system
#   bash manifests/hooks-credentials.sh | kubectl apply -f -
#   kubectl apply --server-side -f manifests/install.yaml
#
# Settings (environment): NAMESPACE (pulumi-system), SERVICE (pulumi-mc-hooks), DAYS the
# certificates are valid (3650), EXTRA_SANS more names of the certificate, OpenSSL's syntax
# ("IP:127.0.0.1,DNS:localhost"). Needs bash and openssl. Rotation: docs/security.md.
set -euo pipefail

namespace=${NAMESPACE:-pulumi-system}
service=${SERVICE:-pulumi-mc-hooks}
days=${DAYS:-3650}
host="$service.$namespace"
sans="DNS:$host,DNS:$host.svc,DNS:$host.svc.cluster.local${EXTRA_SANS:+,$EXTRA_SANS}"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"

# Own configuration files: the extensions do not depend on the system's openssl.cnf.
cat >ca.cnf <<EOF
[req]
distinguished_name = dn
prompt = no
x509_extensions = ext
[dn]
CN = $service CA
[ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EOF
cat >server.cnf <<EOF
[req]
distinguished_name = dn
prompt = no
[dn]
CN = $host
[ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = $sans
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF

openssl req -x509 -config ca.cnf -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days "$days" 2>/dev/null
openssl req -new -config server.cnf -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr 2>/dev/null
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
  -extfile server.cnf -extensions ext -out tls.crt 2>/dev/null
openssl rand -hex 32 | tr -d '\n' >token

b64() { openssl base64 -A -in "$1"; }

cat <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: $service-tls
  namespace: $namespace
  labels:
    app.kubernetes.io/name: pulumi-operator
    app.kubernetes.io/component: hooks
type: kubernetes.io/tls
data:
  ca.crt: $(b64 ca.crt)
  tls.crt: $(b64 tls.crt)
  tls.key: $(b64 tls.key)
---
apiVersion: v1
kind: Secret
metadata:
  name: $service-auth
  namespace: $namespace
  labels:
    app.kubernetes.io/name: pulumi-operator
    app.kubernetes.io/component: hooks
type: Opaque
data:
  token: $(b64 token)
EOF
