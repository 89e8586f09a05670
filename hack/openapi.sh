#!/usr/bin/env bash
# openapi.sh fetches XO's published OpenAPI document (the npm package @xen-orchestra/rest-api,
# file open-api/spec/swagger.json) that the simulator's conformance test validates against.
# The package tarball and the extracted document are pinned by SHA-256. The result is cached:
# a second run only checks the document's checksum and exits at once.
#
#   hack/openapi.sh            fetch if needed, print the path of swagger.json
#   hack/openapi.sh --path     print the path only (no fetch)
#
# Environment: XO_OPENAPI_DIR (cache directory, default
# ${XDG_CACHE_HOME:-$HOME/.cache}/xenorchestra-ccm/openapi/<version>).
# The conformance test reads XO_OPENAPI_SPEC, or swagger.json in that default directory.
set -euo pipefail

PACKAGE=@xen-orchestra/rest-api
VERSION=0.39.0
TARBALL=xen-orchestra-rest-api-$VERSION.tgz
TARBALL_SHA256=dac6e20f3d662e1c57f1401da6eca1b9173b9bf55cada6d008a9e388fbf2ca52
SPEC_SHA256=1b7307e2f34b69fd67e972e827c2e144d3619c65cc23d3b296b71046659c5e62

dir=${XO_OPENAPI_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/xenorchestra-ccm/openapi/$VERSION}
spec=$dir/swagger.json
if [[ "${1:-}" == "--path" ]]; then echo "$spec"; exit 0; fi

log() { echo "openapi: $*" >&2; }

sha256() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$spec" && "$(sha256 "$spec")" == "$SPEC_SHA256" ]]; then
  echo "$spec"
  exit 0
fi

if ! command -v npm >/dev/null; then
  # A fresh machine may lack npm; Debian packages it. As root, install it; otherwise say how.
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    log "installing npm from Debian's packages"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
  else
    log "npm is required: sudo apt-get install npm"
    exit 1
  fi
fi
mkdir -p "$dir"
work=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT

log "fetching $PACKAGE@$VERSION"
(cd "$work" && npm pack --silent "$PACKAGE@$VERSION" >/dev/null)
got=$(sha256 "$work/$TARBALL")
if [[ "$got" != "$TARBALL_SHA256" ]]; then
  log "checksum mismatch for $TARBALL: got $got, want $TARBALL_SHA256"
  exit 1
fi
tar -xzf "$work/$TARBALL" -C "$work" package/open-api/spec/swagger.json
got=$(sha256 "$work/package/open-api/spec/swagger.json")
if [[ "$got" != "$SPEC_SHA256" ]]; then
  log "checksum mismatch for swagger.json: got $got, want $SPEC_SHA256"
  exit 1
fi
mv "$work/package/open-api/spec/swagger.json" "$spec"
log "wrote $spec"
echo "$spec"
