#!/usr/bin/env bash
# Builds the e2e test bed's toolchain from the Go module proxy (no prebuilt downloads):
#   etcd, kube-apiserver + kube-controller-manager + kube-scheduler + kube-proxy + kubelet +
#   kubectl, pulumi (+ pulumi-language-nodejs, pulumi-language-yaml and the dynamic-provider shim),
#   pulumi-resource-command, pulumi-resource-kubernetes, helm, coredns, crictl, Flux's
#   source-controller (with its CRDs and ClusterRole), Flux's kustomize-controller (with its CRD
#   and RBAC), an OCI registry (distribution) and an S3 stand-in (gofakes3) for Flux's
#   OCIRepository and Bucket, and older pulumi CLIs (oldpulumi-<version>,
#   one per OLD_PULUMI_VERSIONS entry: the stand-in images of older Pulumi releases, e.g. for the
#   PulumiVersionTooLow test).
#
# Usage:
#   e2e/toolchain/build.sh [component...]   build what is missing (default: all components:
#                                           etcd kubernetes pulumi command kubernetes-provider
#                                           helm coredns crictl source-controller
#                                           kustomize-controller distribution gofakes3
#                                           oldpulumi-<version>...;
#                                           `oldpulumi` selects them all)
#   e2e/toolchain/build.sh --print-env      print `export` lines for `eval` (PATH and
#                                           PKO_TOOLCHAIN_* bin dirs); builds nothing
#   e2e/toolchain/build.sh --list           print each component, its bin dir and whether it is built
#   e2e/toolchain/build.sh --force [comp..] rebuild even if up to date (also retries parts the
#                                           proxy did not serve last time)
#
# The cache lives outside the work tree: ${PKO_TOOLCHAIN_DIR:-$HOME/.cache/pko-toolchain}, one
# directory per component and version (e.g. etcd-v3.6.14/bin/etcd). Wrapper modules are written
# to $PKO_TOOLCHAIN_DIR/.scratch, build logs to $PKO_TOOLCHAIN_DIR/.logs. GOMODCACHE and GOCACHE
# are Go's defaults. A component whose stamp matches and whose binaries report the expected
# version is skipped. Versions: e2e/toolchain/versions.env. Details: docs/testbed.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
. "$HERE/versions.env"

# Bump when a recipe changes in a way that needs a rebuild of already built versions.
RECIPE_REVISION=1

TOOLCHAIN_DIR="${PKO_TOOLCHAIN_DIR:-$HOME/.cache/pko-toolchain}"
SCRATCH="$TOOLCHAIN_DIR/.scratch"
LOGS="$TOOLCHAIN_DIR/.logs"
# One oldpulumi-<version> component per OLD_PULUMI_VERSIONS entry (comma-separated).
IFS=, read -ra OLD_PULUMI_LIST <<<"$OLD_PULUMI_VERSIONS"
OLD_PULUMI_COMPONENTS=("${OLD_PULUMI_LIST[@]/#/oldpulumi-}")
ALL_COMPONENTS=(etcd kubernetes pulumi command kubernetes-provider helm coredns crictl source-controller kustomize-controller distribution gofakes3 "${OLD_PULUMI_COMPONENTS[@]}")
# The commands of k8s.io/kubernetes/cmd/ that the kubernetes component builds, in one go build: the
# control plane, and the node (kubelet, kube-proxy) that must match the API server's version.
# A directory built before a binary was added lacks it, fails verify_component and is rebuilt;
# the stamp stays as it was, so an older build.sh still accepts the larger directory.
KUBERNETES_BINARIES="kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl"

export GOTOOLCHAIN=local
export CGO_ENABLED=0
# No DWARF from the compiler: -ldflags -s -w drops it from the binaries anyway, and not generating it
# costs less CPU and build cache (docs/testbed.md, Build times). Binaries built before keep their
# stamp: they differ only in the build info and a few compiler-generated functions. Added to the
# GOFLAGS in effect, which may come from go's own env file.
if command -v go >/dev/null; then GOFLAGS="$(go env GOFLAGS)" && export GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=all=-dwarf=false"; fi
# The checksum database that this machine's proxy serves has no entry for pulumi/pkg/v3 (404): the
# module's hash is taken from the proxy and recorded in the wrapper's go.sum instead.
export GONOSUMDB="${GONOSUMDB:+$GONOSUMDB,}github.com/pulumi/pulumi/pkg"

die() { echo "build.sh: error: $*" >&2; exit 1; }

# The version of an oldpulumi-<version> component (dies when OLD_PULUMI_VERSIONS does not list it).
old_pulumi_version() {
  local v=${1#oldpulumi-} o
  for o in "${OLD_PULUMI_LIST[@]}"; do [ "$o" = "$v" ] && { echo "$v"; return 0; }; done
  die "unknown component '$1' (OLD_PULUMI_VERSIONS lists: ${OLD_PULUMI_LIST[*]})"
}

# PKO_TOOLCHAIN_<COMPONENT>_BIN, e.g. PKO_TOOLCHAIN_OLDPULUMI_V3_197_0_BIN.
bin_var() { echo "PKO_TOOLCHAIN_$(tr '[:lower:]' '[:upper:]' <<<"$1" | tr -c 'A-Z0-9\n' '_')_BIN"; }

component_dir() {
  case "$1" in
    etcd) echo "$TOOLCHAIN_DIR/etcd-$ETCD_VERSION" ;;
    kubernetes) echo "$TOOLCHAIN_DIR/kubernetes-$KUBERNETES_VERSION" ;;
    pulumi) echo "$TOOLCHAIN_DIR/pulumi-$PULUMI_VERSION" ;;
    command) echo "$TOOLCHAIN_DIR/pulumi-command-$PULUMI_COMMAND_VERSION" ;;
    kubernetes-provider) echo "$TOOLCHAIN_DIR/pulumi-kubernetes-$PULUMI_KUBERNETES_VERSION" ;;
    helm) echo "$TOOLCHAIN_DIR/helm-$HELM_VERSION" ;;
    coredns) echo "$TOOLCHAIN_DIR/coredns-$COREDNS_VERSION" ;;
    crictl) echo "$TOOLCHAIN_DIR/crictl-$CRICTL_VERSION" ;;
    source-controller) echo "$TOOLCHAIN_DIR/source-controller-$SOURCE_CONTROLLER_VERSION" ;;
    kustomize-controller) echo "$TOOLCHAIN_DIR/kustomize-controller-$KUSTOMIZE_CONTROLLER_VERSION" ;;
    distribution) echo "$TOOLCHAIN_DIR/distribution-$DISTRIBUTION_VERSION" ;;
    gofakes3) echo "$TOOLCHAIN_DIR/gofakes3-$GOFAKES3_VERSION" ;;
    oldpulumi-*) local v; v=$(old_pulumi_version "$1") || exit 1; echo "$TOOLCHAIN_DIR/oldpulumi-$v" ;;
    *) die "unknown component '$1' (known: ${ALL_COMPONENTS[*]})" ;;
  esac
}

component_binaries() {
  case "$1" in
    etcd) echo "etcd" ;;
    kubernetes) echo "$KUBERNETES_BINARIES" ;;
    pulumi) echo "pulumi pulumi-language-nodejs pulumi-language-yaml pulumi-resource-pulumi-nodejs" ;;
    command) echo "pulumi-resource-command" ;;
    kubernetes-provider) echo "pulumi-resource-kubernetes" ;;
    helm) echo "helm" ;;
    coredns) echo "coredns" ;;
    crictl) echo "crictl" ;;
    source-controller) echo "source-controller" ;;
    kustomize-controller) echo "kustomize-controller" ;;
    distribution) echo "registry" ;;
    gofakes3) echo "gofakes3" ;;
    oldpulumi-*) echo "pulumi" ;;
  esac
}

# What the stamp file must say; any change of version or recipe triggers a rebuild.
stamp_key() {
  # oldpulumi-<version>: the key of the single oldpulumi component it replaced (its cache stays valid).
  [[ "$1" == oldpulumi-* ]] && { echo "component=oldpulumi recipe=$RECIPE_REVISION pulumi=$(old_pulumi_version "$1")"; return; }
  local key="component=$1 recipe=$RECIPE_REVISION"
  case "$1" in
    etcd) key="$key etcd=$ETCD_VERSION" ;;
    kubernetes) key="$key kubernetes=$KUBERNETES_VERSION" ;;
    pulumi) key="$key pulumi=$PULUMI_VERSION nodejs=$PULUMI_NODEJS_COMMIT yaml=$PULUMI_YAML_VERSION" ;;
    command) key="$key command=$PULUMI_COMMAND_VERSION commit=$PULUMI_COMMAND_COMMIT" ;;
    kubernetes-provider) key="$key kubernetes-provider=$PULUMI_KUBERNETES_VERSION module=$PULUMI_KUBERNETES_MODULE_VERSION" ;;
    helm) key="$key helm=$HELM_VERSION" ;;
    coredns) key="$key coredns=$COREDNS_VERSION" ;;
    crictl) key="$key crictl=$CRICTL_VERSION" ;;
    source-controller) key="$key source-controller=$SOURCE_CONTROLLER_VERSION" ;;
    kustomize-controller) key="$key kustomize-controller=$KUSTOMIZE_CONTROLLER_VERSION" ;;
    distribution) key="$key distribution=$DISTRIBUTION_VERSION" ;;
    gofakes3) key="$key gofakes3=$GOFAKES3_VERSION" ;;
  esac
  echo "$key"
}

# Checks that the binaries in $2/bin report the expected versions (prints why not, on stderr).
verify_component() {
  local c=$1 bin="$2/bin" b out
  for b in $(component_binaries "$c"); do
    is_unavailable "$2" "$b" && continue
    [ -x "$bin/$b" ] || { echo "missing $bin/$b" >&2; return 1; }
  done
  is_unavailable "$2" "$(component_binaries "$c" | cut -d' ' -f1)" && return 0
  case "$c" in
    etcd)
      out=$("$bin/etcd" --version 2>&1) || true
      grep -qx "etcd Version: ${ETCD_VERSION#v}" <<<"$out" || { echo "etcd --version: $out" >&2; return 1; } ;;
    kubernetes)
      for b in $KUBERNETES_BINARIES; do
        if [ "$b" = kubectl ]; then
          out=$("$bin/kubectl" version --client 2>&1) || true
          grep -qx "Client Version: $KUBERNETES_VERSION" <<<"$out" || { echo "kubectl version --client: $out" >&2; return 1; }
        else
          out=$("$bin/$b" --version 2>&1) || true
          [ "$out" = "Kubernetes $KUBERNETES_VERSION" ] || { echo "$b --version: $out" >&2; return 1; }
        fi
      done ;;
    pulumi|oldpulumi-*)
      out=$(PULUMI_SKIP_UPDATE_CHECK=true PULUMI_HOME="$SCRATCH/pulumi-home" "$bin/pulumi" version 2>&1) || true
      if [ "$c" != pulumi ]; then
        [ "$out" = "$(old_pulumi_version "$c")" ] || { echo "pulumi version: $out" >&2; return 1; }
        return 0
      fi
      [ "$out" = "$PULUMI_VERSION" ] || { echo "pulumi version: $out" >&2; return 1; }
      # The plugins have no version flag: read the build info that go embeds.
      has_module "$bin/pulumi-language-yaml" github.com/pulumi/pulumi-yaml "$PULUMI_YAML_VERSION" || return 1 ;;
    command)
      has_module "$bin/pulumi-resource-command" github.com/pulumi/pulumi-command/provider "" || return 1 ;;
    kubernetes-provider)
      has_module "$bin/pulumi-resource-kubernetes" github.com/pulumi/pulumi-kubernetes/provider/v4 \
        "$PULUMI_KUBERNETES_MODULE_VERSION" || return 1
      # The plugin reports its version over gRPC only: look for the schema that
      # build_kubernetes_provider generated, with that version, embedded in the binary.
      grep -aqF "\"name\":\"kubernetes\",\"displayName\":\"Kubernetes\",\"version\":\"${PULUMI_KUBERNETES_VERSION#v}\"" \
        "$bin/pulumi-resource-kubernetes" ||
        { echo "pulumi-resource-kubernetes: no embedded schema of version ${PULUMI_KUBERNETES_VERSION#v}" >&2; return 1; } ;;
    helm)
      out=$("$bin/helm" version --template '{{.Version}}' 2>&1) || true
      [ "$out" = "$HELM_VERSION" ] || { echo "helm version: $out" >&2; return 1; } ;;
    coredns)
      out=$("$bin/coredns" -version 2>&1) || true
      [ "$(head -n 1 <<<"$out")" = "CoreDNS-${COREDNS_VERSION#v}" ] || { echo "coredns -version: $out" >&2; return 1; } ;;
    crictl)
      out=$("$bin/crictl" --version 2>&1) || true
      [ "$out" = "crictl version $CRICTL_VERSION" ] || { echo "crictl --version: $out" >&2; return 1; } ;;
    source-controller)
      # No version flag: the build info names the module; the CRDs and the ClusterRole came with it.
      has_module "$bin/source-controller" github.com/fluxcd/source-controller "$SOURCE_CONTROLLER_VERSION" || return 1
      [ -f "$2/crds/source.toolkit.fluxcd.io_gitrepositories.yaml" ] && [ -f "$2/rbac/role.yaml" ] ||
        { echo "source-controller: no crds/ or rbac/role.yaml next to bin/" >&2; return 1; } ;;
    kustomize-controller)
      has_module "$bin/kustomize-controller" github.com/fluxcd/kustomize-controller "$KUSTOMIZE_CONTROLLER_VERSION" || return 1
      [ -f "$2/crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml" ] && [ -f "$2/rbac/role.yaml" ] ||
        { echo "kustomize-controller: no crds/ or rbac/role.yaml next to bin/" >&2; return 1; } ;;
    distribution)
      out=$("$bin/registry" --version 2>&1) || true
      [ "$out" = "$bin/registry github.com/distribution/distribution/v3 $DISTRIBUTION_VERSION" ] ||
        { echo "registry --version: $out" >&2; return 1; } ;;
    gofakes3)
      # No version flag: the build info names the module.
      has_module "$bin/gofakes3" github.com/johannesboyne/gofakes3 "$GOFAKES3_VERSION" || return 1 ;;
  esac
}

# <dir>/.unavailable lists binaries that were not built ("name: reason" lines): the Go module proxy
# refused them, or versions.env names no source for them.
is_unavailable() { [ -f "$1/.unavailable" ] && grep -q "^$2: " "$1/.unavailable"; }

mark_unavailable() { # dir binary reason
  echo "$2: $3" >>"$1/.unavailable"
  WARNINGS+=("$2 was NOT built: $3")
}

# Checks a binary's embedded build info: built from module at version ("" = any). (With -trimpath
# go does not record -ldflags there, so the -X version stamp itself is not checked.)
has_module() {
  local info
  info=$(go version -m "$1" 2>&1) || { echo "go version -m $1: $info" >&2; return 1; }
  grep -Eq "^[[:space:]]+(mod|dep)[[:space:]]+$2[[:space:]]+${3:-[^[:space:]]+}([[:space:]]|$)" <<<"$info" ||
    { echo "$1 was not built from $2 ${3}" >&2; return 1; }
}

is_current() {
  local c=$1 dir
  dir=$(component_dir "$c")
  [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$(stamp_key "$c")" ] && verify_component "$c" "$dir" 2>/dev/null
}

fmt_duration() { local s=$1; if [ "$s" -ge 60 ]; then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi; }

# --- running go -------------------------------------------------------------------------------

LOG=/dev/null
NETWORK_ERROR_RE='dial tcp|no such host|connection refused|connection reset|i/o timeout|TLS handshake|network is unreachable|proxyconnect|server misbehaving|Client.Timeout|unexpected EOF|: EOF$'

# Explains a failed step from the log: a proxy that cannot be reached, or the log's tail.
fail_step() {
  local what=$1 netline
  netline=$(grep -E "$NETWORK_ERROR_RE" "$LOG" | tail -n 1 || true)
  if [ -n "$netline" ]; then
    die "cannot reach the Go module proxy ($(go env GOPROXY)): $netline
(while running: $what; full log: $LOG)"
  fi
  echo "build.sh: step failed: $what; last lines of $LOG:" >&2
  tail -n 40 "$LOG" >&2
  exit 1
}

run() {
  printf '$ %s\n' "$*" >>"$LOG"
  "$@" >>"$LOG" 2>&1 || fail_step "$*"
}

# Downloads module@version (proxy reachability check) and sets MOD_GOMOD, MOD_DIR, MOD_TIME.
# Dies when the proxy cannot be reached. When the proxy answers that the version is not
# available (403/404/unknown revision: a final answer), returns 1 with the answer in MOD_ERROR if
# called as `fetch_module --optional spec`, and dies otherwise.
fetch_module() {
  local optional=false spec json err
  [ "$1" = --optional ] && { optional=true; shift; }
  spec=$1
  MOD_ERROR=""
  printf '$ go mod download -json %s\n' "$spec" >>"$LOG"
  if ! json=$(cd "$SCRATCH" && go mod download -json "$spec" 2>>"$LOG"); then
    echo "$json" >>"$LOG"
    err=$(sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p' <<<"$json" | head -n 1 | sed 's/\\"/"/g; s/\\n\\t/ /g')
    [ -n "$err" ] || err=$(tail -n 1 "$LOG")
    if grep -Eq "$NETWORK_ERROR_RE" <<<"$err"; then
      die "cannot reach the Go module proxy ($(go env GOPROXY)): $err"
    fi
    if $optional && grep -Eq '403 Forbidden|404 Not Found|410 Gone|not available|unknown revision|invalid version' <<<"$err"; then
      MOD_ERROR=$err
      return 1
    fi
    die "cannot download $spec from the Go module proxy ($(go env GOPROXY)): $err"
  fi
  echo "$json" >>"$LOG"
  MOD_GOMOD=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
  MOD_DIR=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
  local info
  info=$(sed -n 's/^[[:space:]]*"Info": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
  [ -n "$MOD_GOMOD" ] && [ -n "$MOD_DIR" ] && [ -f "$info" ] || die "unexpected output of go mod download -json $spec (see $LOG)"
  # The .info file holds the version's commit time: a reproducible build date.
  MOD_TIME=$(sed -n 's/.*"Time"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$info" | head -n 1)
}

# A fresh wrapper module in the scratch dir; prints its path.
new_wrapper() {
  local w="$SCRATCH/$1"
  rm -rf "$w" && mkdir -p "$w"
  (cd "$w" && go mod init "local/pko-toolchain-$1" >>"$LOG" 2>&1) || fail_step "go mod init in $w"
  echo "$w"
}

# `go install pkg@version` is avoided even where the module allows it: it asks the proxy for the
# module's version list (to report deprecations) and fails when the proxy refuses that list, as
# this machine's proxy does for pulumi-yaml (403). A wrapper module with `go get -tool` does not
# need the list, and with no requires of its own it selects the same versions.
build_with_wrapper() { # name module@version ldflags outdir package...
  local name=$1 spec=$2 ld=$3 outdir=$4 w
  shift 4
  w=$(new_wrapper "$name")
  run go -C "$w" get -tool "${@/%/@${spec#*@}}"
  run go -C "$w" build -trimpath -ldflags "$ld" -o "$outdir/" "$@"
}

# --- recipes (each builds into "$1/bin") ------------------------------------------------------

build_etcd() {
  local out=$1 w
  fetch_module "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  w=$(new_wrapper etcd)
  # server/go.mod replaces its siblings with ../api etc., so `go install pkg@v` is refused; as a
  # dependency its requires (siblings at the same tag) apply and its replaces are ignored.
  run go -C "$w" get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  # The version is a source constant (api/version.Version): no ldflags needed.
  run go -C "$w" build -trimpath -ldflags "-s -w" -o "$out/bin/etcd" go.etcd.io/etcd/server/v3
}

build_kubernetes() {
  local out=$1 v=$KUBERNETES_VERSION w minor staging m gd ld p
  minor=$(cut -d. -f2 <<<"$v")
  staging="v0.${v#v1.}"
  fetch_module "k8s.io/kubernetes@$v"
  local gomod=$MOD_GOMOD builddate=$MOD_TIME
  [ -n "$builddate" ] || die "cannot read the commit time of k8s.io/kubernetes@$v"
  w=$(new_wrapper kubernetes)
  # k8s.io/kubernetes replaces every staging module with ./staging/src/k8s.io/X, which its module
  # zip does not contain: point each at its published version v0.<minor>.<patch>.
  for m in $(awk '$2=="=>" && $3 ~ /^\.\/staging\// {print $1}' "$gomod"); do
    run go -C "$w" mod edit -replace="$m=$m@$staging"
  done
  # A dependency's godebug lines do not apply: copy upstream's runtime defaults.
  for gd in $(awk '$1=="godebug" && $2!="(" {print $2} /^godebug \(/ {b=1; next} b && /^\)/ {b=0} b {print $1}' "$gomod"); do
    run go -C "$w" mod edit -godebug="$gd"
  done
  local pkgs=()
  for p in $KUBERNETES_BINARIES; do pkgs+=("k8s.io/kubernetes/cmd/$p"); done
  run go -C "$w" get -tool "${pkgs[@]/%/@$v}"
  # Version stamps as hack/lib/version.sh sets them (the module zip has no git commit:
  # gitCommit stays empty, tree state "archive" as for upstream's tarball builds). kubectl reports
  # its client version from client-go's copy. All six are static (CGO_ENABLED=0); upstream links
  # kubelet with cgo where it can (hack/lib/golang.sh), which changes no behaviour used here.
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitCommit="
    ld="$ld -X $p.gitTreeState=archive -X $p.buildDate=$builddate"
  done
  run go -C "$w" build -trimpath -ldflags "$ld" -o "$out/bin/" "${pkgs[@]}"
}

# Copies the replaces of go.mod $2 that name a module version (not a directory) into wrapper $1:
# a dependency's replaces are ignored, the main module's apply.
copy_replaces() { # wrapper go.mod
  local r
  for r in $(awk '$1=="replace" && $3=="=>" && $4 !~ /^\./ && NF==5 {print $2"="$4"@"$5}' "$2"); do
    run go -C "$1" mod edit -replace="$r"
  done
}

# A wrapper module requiring pkg/v3 cmd/pulumi and sdk/v3 at version $2; prints its path. pkg's
# go.mod replaces sdk/v3 => ../sdk (so no `go install`); its other replaces (forks such as
# atotto/clipboard's, older pins such as sergi/go-diff's) are copied into the wrapper.
pulumi_cli_wrapper() { # name version
  local name=$1 v=$2 w
  fetch_module "github.com/pulumi/pulumi/pkg/v3@$v"
  w=$(new_wrapper "$name")
  copy_replaces "$w" "$MOD_GOMOD"
  run go -C "$w" get -tool "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi@$v"
  run go -C "$w" get "github.com/pulumi/pulumi/sdk/v3@$v"
  echo "$w"
}

# Checks that the wrapper $1 resolved pkg/v3 and sdk/v3 to version $2.
check_pulumi_wrapper() { # wrapper version
  local got
  got=$(go -C "$1" list -m -f '{{.Version}}' github.com/pulumi/pulumi/pkg/v3 github.com/pulumi/pulumi/sdk/v3 | sort -u)
  [ "$got" = "$2" ] || die "pulumi wrapper resolved pkg/sdk to '$got', expected $2 (see $1/go.mod)"
}

pulumi_ldflags() { echo "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$1"; }

build_pulumi() {
  local out=$1 w ld nodejs=true
  w=$(pulumi_cli_wrapper pulumi "$PULUMI_VERSION")
  # The Node.js language host has no tags: pin the commit of the CLI's tag. It asks for an older
  # pkg/sdk; minimal version selection keeps both at $PULUMI_VERSION. Optional: a proxy that only
  # serves modules it has cached may not have this commit (then only YAML projects and inline
  # Automation API programs work). PULUMI_NODEJS_COMMIT=unknown skips it the same way.
  if [ "$PULUMI_NODEJS_COMMIT" = unknown ]; then
    nodejs=false
    mark_unavailable "$out" pulumi-language-nodejs "the commit of tag pkg/$PULUMI_VERSION is not known (versions.env)"
  elif fetch_module --optional "github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3@$PULUMI_NODEJS_COMMIT"; then
    run go -C "$w" get -tool "github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3@$PULUMI_NODEJS_COMMIT"
  else
    nodejs=false
    mark_unavailable "$out" pulumi-language-nodejs "$MOD_ERROR"
  fi
  check_pulumi_wrapper "$w" "$PULUMI_VERSION"
  ld=$(pulumi_ldflags "$PULUMI_VERSION")
  local pkgs=(github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
  $nodejs && pkgs+=(github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3)
  run go -C "$w" build -trimpath -tags osusergo,grpcnotrace -ldflags "$ld" -o "$out/bin/" "${pkgs[@]}"

  # pulumi-language-yaml, in its own wrapper with the pulumi pkg/sdk its go.mod asks for (a
  # plugin talks to the CLI over gRPC only). Installed next to pulumi because bundled plugins are
  # looked up beside the pulumi binary.
  fetch_module "github.com/pulumi/pulumi-yaml@$PULUMI_YAML_VERSION"
  [ -f "$MOD_DIR/pkg/version/version.go" ] || die "pulumi-yaml $PULUMI_YAML_VERSION has no pkg/version (recipe outdated)"
  build_with_wrapper pulumi-yaml "github.com/pulumi/pulumi-yaml@$PULUMI_YAML_VERSION" \
    "-s -w -X github.com/pulumi/pulumi-yaml/pkg/version.Version=$PULUMI_YAML_VERSION" "$out/bin" \
    github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml

  write_dynamic_provider_shim "$out/bin/pulumi-resource-pulumi-nodejs"
}

# An older pulumi CLI alone (oldpulumi-<version>), the recipe of build_pulumi without the plugins:
# the stand-in image of an older release takes its language hosts from the pulumi component.
build_oldpulumi() { # out version
  local out=$1 v=$2 w
  w=$(pulumi_cli_wrapper "oldpulumi-$v" "$v")
  check_pulumi_wrapper "$w" "$v"
  run go -C "$w" build -trimpath -tags osusergo,grpcnotrace -ldflags "$(pulumi_ldflags "$v")" \
    -o "$out/bin/" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
}

# The provider plugin behind pulumi.dynamic.Resource: pulumi starts it in the program's
# directory; it runs the dynamic provider of the @pulumi/pulumi that the program uses.
write_dynamic_provider_shim() {
  cat >"$1" <<'SHIM'
#!/bin/sh
# pulumi-resource-pulumi-nodejs (pko e2e toolchain): resource provider for pulumi.dynamic.Resource.
# Runs the dynamic provider entry point of the @pulumi/pulumi package installed in the program's
# node_modules (resolved from the working directory pulumi starts the plugin in).
entry=$(node -e 'process.stdout.write(require.resolve("@pulumi/pulumi/cmd/dynamic-provider", { paths: [process.cwd()] }))') || {
  echo "pulumi-resource-pulumi-nodejs: cannot resolve @pulumi/pulumi/cmd/dynamic-provider from $(pwd); is @pulumi/pulumi installed?" >&2
  exit 1
}
exec node "$entry" "$@"
SHIM
  chmod 0755 "$1"
}

build_command() {
  local out=$1 spec
  spec="github.com/pulumi/pulumi-command/provider@$PULUMI_COMMAND_COMMIT"
  if ! fetch_module --optional "$spec"; then
    mark_unavailable "$out" pulumi-resource-command "$MOD_ERROR"
    return 0
  fi
  [ -f "$MOD_DIR/pkg/version/version.go" ] || die "pulumi-command provider has no pkg/version (recipe outdated)"
  # No provider/v* tags, so by commit. Version without the leading v, as upstream's release
  # builds link it.
  build_with_wrapper pulumi-command "$spec" \
    "-s -w -X github.com/pulumi/pulumi-command/provider/pkg/version.Version=${PULUMI_COMMAND_VERSION#v}" "$out/bin" \
    github.com/pulumi/pulumi-command/provider/cmd/pulumi-resource-command
}

# The Pulumi Kubernetes provider. Its main package embeds schema-embed.json and
# terraform-mapping-embed.json, which upstream's Makefile generates (`VERSION=<version> go generate`
# runs the package's generate.go: schema.json with its version set, both files re-serialized) and
# git ignores, so the module zip lacks them; and go refuses -overlay files in the module cache. So
# the wrapper gets a writable copy of that package directory (main.go, generate.go and the two
# source files) as its own main package, runs the same go generate in it and builds it.
build_kubernetes_provider() {
  local out=$1 mod cmd w main v=${PULUMI_KUBERNETES_VERSION#v} f
  mod=github.com/pulumi/pulumi-kubernetes/provider/v4
  fetch_module "$mod@$PULUMI_KUBERNETES_MODULE_VERSION"
  cmd="$MOD_DIR/cmd/pulumi-resource-kubernetes"
  for f in main.go generate.go schema.json terraform-mapping.json; do
    [ -f "$cmd/$f" ] || die "pulumi-kubernetes provider: no cmd/pulumi-resource-kubernetes/$f in the module (recipe outdated)"
  done
  [ -f "$MOD_DIR/pkg/version/version.go" ] || die "pulumi-kubernetes provider has no pkg/version (recipe outdated)"
  w=$(new_wrapper pulumi-kubernetes)
  run go -C "$w" get "$mod/cmd/pulumi-resource-kubernetes@$PULUMI_KUBERNETES_MODULE_VERSION"
  # provider/go.mod replaces sdk/v4 with ../sdk (the same commit's SDK), a replace that does not
  # apply to a dependency: require the SDK of the same release instead.
  run go -C "$w" get "github.com/pulumi/pulumi-kubernetes/sdk/v4@$PULUMI_KUBERNETES_VERSION"
  main="$w/cmd/pulumi-resource-kubernetes"
  mkdir -p "$main"
  for f in main.go generate.go schema.json terraform-mapping.json; do cp "$cmd/$f" "$main/"; done
  chmod -R u+w "$main"
  VERSION=$v run go -C "$w" generate ./cmd/pulumi-resource-kubernetes
  # Version without the leading v, as upstream's Makefile links it (VERSION_GENERIC).
  run go -C "$w" build -trimpath \
    -ldflags "-s -w -X $mod/pkg/version.Version=$v" -o "$out/bin/" ./cmd/pulumi-resource-kubernetes
}

build_helm() {
  local out=$1 clientgo kmaj kmin ld
  fetch_module "helm.sh/helm/v3@$HELM_VERSION"
  # Upstream derives the default KubeVersion from the k8s.io/client-go it is built with (v0.X.Y -> 1.X).
  clientgo=$(awk '$1=="k8s.io/client-go" {print $2; exit}' "$MOD_GOMOD")
  [[ "$clientgo" =~ ^v0\.([0-9]+)\. ]] || die "cannot read k8s.io/client-go from $MOD_GOMOD"
  kmaj=1 kmin=${BASH_REMATCH[1]}
  HELM_KUBE_MINOR=$kmin
  ld="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.metadata="
  ld="$ld -X helm.sh/helm/v3/internal/version.gitTreeState=archive"
  ld="$ld -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$kmaj -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$kmin"
  ld="$ld -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$kmaj -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$kmin"
  build_with_wrapper helm "helm.sh/helm/v3@$HELM_VERSION" "$ld" "$out/bin" helm.sh/helm/v3/cmd/helm
  # -X on a variable that does not exist is silently ignored: check the default KubeVersion.
  local chart="$SCRATCH/helm-kubeversion-chart" kv
  rm -rf "$chart" && mkdir -p "$chart/templates"
  printf 'apiVersion: v2\nname: kv\nversion: 0.1.0\n' >"$chart/Chart.yaml"
  printf 'kubeVersion: {{ .Capabilities.KubeVersion.Version }}\n' >"$chart/templates/kv.yaml"
  kv=$(HELM_CACHE_HOME="$SCRATCH/helm-home" HELM_CONFIG_HOME="$SCRATCH/helm-home" HELM_DATA_HOME="$SCRATCH/helm-home" \
    "$out/bin/helm" template kv "$chart" 2>&1 | sed -n 's/^kubeVersion: //p')
  [ "$kv" = "v$kmaj.$kmin.0" ] || die "helm's default KubeVersion is '$kv', expected v$kmaj.$kmin.0 (ldflags outdated?)"
}

build_coredns() {
  local out=$1 w
  fetch_module "github.com/coredns/coredns@$COREDNS_VERSION"
  # The plugin list and the directives are generated from plugin.cfg and committed: no go generate.
  [ -f "$MOD_DIR/core/plugin/zplugin.go" ] && [ -f "$MOD_DIR/core/dnsserver/zdirectives.go" ] ||
    die "coredns $COREDNS_VERSION has no generated core/plugin/zplugin.go (recipe outdated)"
  w=$(new_wrapper coredns)
  run go -C "$w" get -tool "github.com/coredns/coredns@$COREDNS_VERSION"
  # As upstream's Makefile: the module root, CGO off, tag grpcnotrace, GitCommit = `git describe
  # --dirty --always`, which is the tag on a clean checkout of it. The version is a source
  # constant (coremain.CoreVersion).
  run go -C "$w" build -trimpath -tags grpcnotrace \
    -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" \
    -o "$out/bin/coredns" github.com/coredns/coredns
}

build_crictl() {
  local out=$1
  fetch_module "sigs.k8s.io/cri-tools@$CRICTL_VERSION"
  [ -f "$MOD_DIR/pkg/version/version.go" ] || die "cri-tools $CRICTL_VERSION has no pkg/version (recipe outdated)"
  # Upstream builds from its vendor directory, which the module zip leaves out: the wrapper
  # resolves the same versions from cri-tools' go.mod. Version with the leading v, as
  # hack/release.sh links it (`crictl --version` -> "crictl version v1.36.0").
  build_with_wrapper crictl "sigs.k8s.io/cri-tools@$CRICTL_VERSION" \
    "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" "$out/bin" \
    sigs.k8s.io/cri-tools/cmd/crictl
}

# Flux's source-controller, as its Dockerfile builds it (CGO off, -trimpath; the Makefile's static
# tags). Its go.mod replaces ./api (the published api module of the same tag is required instead)
# and opencontainers/go-digest with a fork that adds BLAKE3: that one is copied. The CRDs
# (config/crd/bases) and the controller's ClusterRole (config/rbac/role.yaml) come from the same
# module zip, next to bin/, so that the test bed installs what this binary serves.
build_source_controller() {
  local out=$1 w mod=github.com/fluxcd/source-controller
  fetch_module "$mod@$SOURCE_CONTROLLER_VERSION"
  [ -f "$MOD_DIR/config/crd/bases/source.toolkit.fluxcd.io_gitrepositories.yaml" ] && [ -f "$MOD_DIR/config/rbac/role.yaml" ] ||
    die "source-controller $SOURCE_CONTROLLER_VERSION has no config/crd/bases or config/rbac/role.yaml (recipe outdated)"
  w=$(new_wrapper source-controller)
  copy_replaces "$w" "$MOD_GOMOD"
  run go -C "$w" get -tool "$mod@$SOURCE_CONTROLLER_VERSION"
  run go -C "$w" build -trimpath -tags netgo,osusergo,static_build -ldflags "-s -w" -o "$out/bin/source-controller" "$mod"
  mkdir -p "$out/crds" "$out/rbac"
  cp "$MOD_DIR"/config/crd/bases/*.yaml "$out/crds/"
  cp "$MOD_DIR/config/rbac/role.yaml" "$out/rbac/"
  chmod -R u+w "$out/crds" "$out/rbac"
}

# Flux's kustomize-controller, as its Dockerfile builds it (CGO off, -trimpath). Its go.mod has
# replaces in blocks too (kustomize/api and kyaml pinned, go-digest's BLAKE3 fork, yaml.v3): every
# one with a version is copied, `./api` left out as for source-controller. The CRD and the RBAC
# its config/rbac/kustomization.yaml installs (role, role_binding, cluster_role_binding: the
# ClusterRole and cluster-admin, bound to the controller's ServiceAccount) come from the module zip.
build_kustomize_controller() {
  local out=$1 w r mod=github.com/fluxcd/kustomize-controller
  fetch_module "$mod@$KUSTOMIZE_CONTROLLER_VERSION"
  [ -f "$MOD_DIR/config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml" ] && [ -f "$MOD_DIR/config/rbac/role.yaml" ] ||
    die "kustomize-controller $KUSTOMIZE_CONTROLLER_VERSION has no config/crd/bases or config/rbac/role.yaml (recipe outdated)"
  w=$(new_wrapper kustomize-controller)
  for r in $(go mod edit -json "$MOD_GOMOD" | jq -r '.Replace[]? | select(.New.Version) | "\(.Old.Path)=\(.New.Path)@\(.New.Version)"'); do
    run go -C "$w" mod edit -replace="$r"
  done
  run go -C "$w" get -tool "$mod@$KUSTOMIZE_CONTROLLER_VERSION"
  run go -C "$w" build -trimpath -ldflags "-s -w" -o "$out/bin/kustomize-controller" "$mod"
  mkdir -p "$out/crds" "$out/rbac"
  cp "$MOD_DIR"/config/crd/bases/*.yaml "$out/crds/"
  cp "$MOD_DIR"/config/rbac/{role,role_binding,cluster_role_binding}.yaml "$out/rbac/"
  chmod -R u+w "$out/crds" "$out/rbac"
}

# distribution's registry (the reference OCI registry, Docker's `registry:2`), as its Makefile
# builds cmd/registry: the version linked into version.version (`registry --version`), no extra
# build tags (the Makefile's optional ones add storage drivers the test bed does not use), CGO off.
build_distribution() {
  local out=$1 mod=github.com/distribution/distribution/v3
  fetch_module "$mod@$DISTRIBUTION_VERSION"
  build_with_wrapper distribution "$mod@$DISTRIBUTION_VERSION" \
    "-s -w -X $mod/version.version=$DISTRIBUTION_VERSION -X $mod/version.mainpkg=$mod" "$out/bin" \
    "$mod/cmd/registry"
}

# gofakes3, a small S3 server written for tests: a stand-in for an S3-compatible store (MinIO, AWS)
# behind Flux's Bucket with the `generic` provider (docs/testbed.md says why not MinIO).
build_gofakes3() {
  local out=$1 mod=github.com/johannesboyne/gofakes3
  fetch_module "$mod@$GOFAKES3_VERSION"
  build_with_wrapper gofakes3 "$mod@$GOFAKES3_VERSION" "-s -w" "$out/bin" "$mod/cmd/gofakes3"
}

# --- driver -----------------------------------------------------------------------------------

unavailable_note() { # dir
  [ -f "$1/.unavailable" ] || return 0
  echo " WITHOUT $(cut -d: -f1 "$1/.unavailable" | paste -sd, -) (see $1/.unavailable)"
}

build_component() {
  local c=$1 dir partial start secs version
  dir=$(component_dir "$c")
  version=$(basename "$dir")
  if ! $FORCE && is_current "$c"; then
    echo "==> $version: up to date ($dir)$(unavailable_note "$dir")"
    if [ -f "$dir/.unavailable" ]; then
      while IFS= read -r line; do WARNINGS+=("${line%%:*} is not built (${line#*: }); rebuild with --force to retry"); done <"$dir/.unavailable"
    fi
    return 0
  fi
  mkdir -p "$SCRATCH" "$LOGS"
  LOG="$LOGS/$c.log"
  : >"$LOG"
  echo "==> building $version (log: $LOG)"
  start=$(date +%s)
  partial="$dir.partial"
  CURRENT_PARTIAL=$partial
  rm -rf "$partial" && mkdir -p "$partial/bin"
  case "$c" in
    oldpulumi-*) build_oldpulumi "$partial" "$(old_pulumi_version "$c")" ;;
    *) "build_${c//-/_}" "$partial" ;;
  esac
  stamp_key "$c" >"$partial/.stamp"
  if ! verify_component "$c" "$partial" 2>>"$LOG"; then
    echo "build.sh: $version was built but does not report the expected version:" >&2
    tail -n 3 "$LOG" >&2
    exit 1
  fi
  secs=$(($(date +%s) - start))
  echo "$secs" >"$partial/.build-seconds"
  rm -rf "$dir" && mv "$partial" "$dir"
  CURRENT_PARTIAL=""
  echo "==> built $version in $(fmt_duration "$secs") ($(du -sh "$dir/bin" | cut -f1))$(unavailable_note "$dir")"
  BUILT_SUMMARY+=("$version: $(fmt_duration "$secs")")
}

print_env() {
  local c dir var path=""
  printf 'export PKO_TOOLCHAIN_DIR=%q\n' "$TOOLCHAIN_DIR"
  # pulumi first: its bundled plugins must be the ones next to it. The older CLIs are not on PATH
  # (each would be a second `pulumi`): only images copy them.
  for c in pulumi command kubernetes-provider kubernetes etcd helm coredns crictl source-controller kustomize-controller distribution gofakes3 "${OLD_PULUMI_COMPONENTS[@]}"; do
    dir=$(component_dir "$c")/bin
    var=$(bin_var "$c")
    printf 'export %s=%q\n' "$var" "$dir"
    [[ "$c" == oldpulumi-* ]] || path="$path${path:+:}$dir"
    [ -f "$(component_dir "$c")/.stamp" ] || echo "build.sh: warning: $c is not built yet (run $HERE/build.sh $c)" >&2
  done
  # shellcheck disable=SC2016
  printf 'export PATH=%q"${PATH:+:$PATH}"\n' "$path"
}

FORCE=false
CURRENT_PARTIAL=""
WARNINGS=()
trap '[ -z "$CURRENT_PARTIAL" ] || rm -rf "$CURRENT_PARTIAL"' EXIT

main() {
  local components=() c
  while [ $# -gt 0 ]; do
    case "$1" in
      --print-env) print_env; return 0 ;;
      --list)
        for c in "${ALL_COMPONENTS[@]}"; do
          if is_current "$c"; then s=built; else s=missing; fi
          printf '%-18s %-8s %s%s\n' "$c" "$s" "$(component_dir "$c")/bin" "$(unavailable_note "$(component_dir "$c")")"
        done
        return 0 ;;
      --force) FORCE=true ;;
      -h|--help) sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; return 0 ;;
      -*) die "unknown option $1 (see --help)" ;;
      oldpulumi) components+=("${OLD_PULUMI_COMPONENTS[@]}") ;;
      *) component_dir "$1" >/dev/null; components+=("$1") ;;
    esac
    shift
  done
  [ ${#components[@]} -gt 0 ] || components=("${ALL_COMPONENTS[@]}")
  command -v go >/dev/null || die "go is not on PATH (needs Go >= 1.26)"
  echo "toolchain cache: $TOOLCHAIN_DIR ($(go version | cut -d' ' -f3), GOPROXY=$(go env GOPROXY))"
  local total_start; total_start=$(date +%s)
  BUILT_SUMMARY=()
  for c in "${components[@]}"; do
    build_component "$c"   # one at a time: each go build already uses every core
  done
  if [ ${#BUILT_SUMMARY[@]} -gt 0 ]; then
    echo "==> built: ${BUILT_SUMMARY[*]}; total $(fmt_duration $(($(date +%s) - total_start)))"
  else
    echo "==> toolchain up to date ($(fmt_duration $(($(date +%s) - total_start))))"
  fi
  for c in "${WARNINGS[@]}"; do echo "build.sh: WARNING: $c" >&2; done
}

main "$@"
