# What the release installers (deploy/agent/install.sh, deploy/control-plane/install.sh)
# share: `npm run release` puts these functions into each installer in place of its
# "@INSTALL_LIB@" line, so an installer stays one file to download. They read the
# installer's PRODUCT (cm-agent, cm-control-plane), VERSION, ROOT, PREFIX, HERE and
# DRY_RUN, and call its restart_service.

say() { printf '%s\n' "$*"; }
ok() { printf '✓ %s\n' "$*"; }
note() { printf '  %s\n' "$*"; }
fail() {
  printf '✗ %s\n' "$1" >&2
  [ $# -lt 2 ] || printf '  fix: %s\n' "$2" >&2
  exit 1
}

# Runs a command, or in a dry run prints it. Every change to the machine goes through it.
step() {
  if [ "$DRY_RUN" = true ]; then
    printf 'would run: %s\n' "$*"
  else
    printf '+ %s\n' "$*"
    "$@"
  fi
}

machine_arch() {
  case "$(uname -m)" in
    x86_64 | amd64) echo x64 ;;
    aarch64 | arm64) echo arm64 ;;
    *) echo "unsupported:$(uname -m)" ;;
  esac
}

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  elif command -v shasum >/dev/null 2>&1; then
    shasum -a 256 "$1" | cut -d' ' -f1
  else
    openssl dgst -sha256 -r "$1" | cut -d' ' -f1
  fi
}

# Whether systemd runs this machine, and the install is for this machine.
have_systemd() {
  [ -z "$ROOT" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1
}

# The link swap: a new link beside current, renamed over it (rename is atomic).
point_current_at() {
  local version="$1"
  step ln -sfn "$version" "$PREFIX/current.new"
  step mv -fT "$PREFIX/current.new" "$PREFIX/current"
}

current_version() {
  if [ -L "$PREFIX/current" ]; then readlink "$PREFIX/current"; fi
}

# The release tarball for this machine: refused, with nothing changed, when it is another
# machine's, missing, or does not match SHA256SUMS beside it.
checked_tarball() {
  local arch="$1" tarball="$2" sums want got name
  case "$arch" in unsupported:*) fail "this machine is ${arch#unsupported:}: $PRODUCT releases exist for x86_64 (x64) and aarch64 (arm64)" ;; esac
  case "$(basename "$tarball")" in
    *-linux-"$arch".tar.gz) ;;
    *-linux-*.tar.gz)
      local theirs="${tarball##*-linux-}"
      fail "$(basename "$tarball") is for ${theirs%.tar.gz}, this machine is $arch ($(uname -m)); nothing was changed" \
        "download $PRODUCT-${VERSION}-linux-${arch}.tar.gz"
      ;;
  esac
  [ -r "$tarball" ] || fail "$tarball was not found; nothing was changed" \
    "download $PRODUCT-${VERSION}-linux-${arch}.tar.gz and SHA256SUMS beside this script, or pass --tarball PATH"
  sums="$(dirname "$tarball")/SHA256SUMS"
  name="$(basename "$tarball")"
  [ -r "$sums" ] || fail "no SHA256SUMS beside $tarball, so its download cannot be checked; nothing was changed" \
    "download SHA256SUMS from the same release into $(dirname "$tarball")"
  want="$(awk -v n="$name" '$2 == n || $2 == "*" n { print $1; exit }' "$sums")"
  [ -n "$want" ] || fail "SHA256SUMS does not list $name; nothing was changed" "download the SHA256SUMS of the release $name comes from"
  got="$(sha256_of "$tarball")"
  [ "$got" = "$want" ] || fail "$name does not match SHA256SUMS (sha256 $got, expected $want): the download is damaged or not the release's; nothing was changed" \
    "download it again"
  ok "$name matches SHA256SUMS"
}

# Unpacks the tarball aside (STAGING, removed on exit) and sets UNPACKED to it: a
# tarball that is not this product, version and architecture changes nothing.
unpack_aside() {
  local arch="$1" tarball="$2"
  STAGING="$(mktemp -d "${TMPDIR:-/tmp}/$PRODUCT-install.XXXXXX")"
  trap 'rm -rf "$STAGING"' EXIT
  # The archive's owners and modes are not taken (as root, tar takes both): what is installed is
  # root's, with the modes a release packs (directories 0755, files 0644 or 0755), whatever the
  # tarball says. Unpacked in a directory only root reads, so nothing is open before the chmod.
  tar --no-same-owner -xzf "$tarball" -C "$STAGING" || fail "$(basename "$tarball") could not be unpacked; nothing was changed"
  UNPACKED="$STAGING/$PRODUCT-${VERSION}-linux-${arch}"
  [ -f "$UNPACKED/VERSION" ] || fail "$(basename "$tarball") does not hold $PRODUCT ${VERSION} for $arch; nothing was changed"
  chmod -R u=rwX,go=rX,a-st "$UNPACKED" || fail "the modes of the unpacked $(basename "$tarball") could not be set; nothing was changed"
  [ "$(cat "$UNPACKED/ARCH")" = "$arch" ] || fail "$(basename "$tarball") holds a Node runtime for $(cat "$UNPACKED/ARCH"), this machine is $arch; nothing was changed"
}

# Moves the unpacked release to PREFIX/VERSION and points current at it; the version
# it replaces becomes `previous`, what --rollback returns to. Sets PREVIOUS.
place_release() {
  PREVIOUS="$(current_version)"
  step mkdir -p "$PREFIX"
  if [ -e "$PREFIX/$VERSION" ]; then step rm -rf "$PREFIX/$VERSION"; fi
  step mv "$UNPACKED" "$PREFIX/$VERSION"
  point_current_at "$VERSION"
  if [ -n "$PREVIOUS" ] && [ "$PREVIOUS" != "$VERSION" ]; then
    step ln -sfn "$PREVIOUS" "$PREFIX/previous"
  fi
}

rollback() {
  local current previous
  current="$(current_version)"
  [ -L "$PREFIX/previous" ] || fail "there is no previous version in $PREFIX to roll back to${current:+ (current is $current)}"
  previous="$(readlink "$PREFIX/previous")"
  [ -d "$PREFIX/$previous" ] || fail "$PREFIX/$previous is gone: nothing to roll back to"
  # A product's own step before the switch (the control plane's: its database), when it has one.
  if declare -F prepare_rollback >/dev/null; then prepare_rollback "$current" "$previous"; fi
  point_current_at "$previous"
  [ -z "$current" ] || step ln -sfn "$current" "$PREFIX/previous"
  ok "current is $previous again (was $current; --rollback again returns to it)"
  if [ -n "${ROLLBACK_NOTE:-}" ] && ! declare -F prepare_rollback >/dev/null; then note "$ROLLBACK_NOTE"; fi
  restart_service
}

# Removes the unit, the link `$1` (the product's command in /usr/local/bin) and PREFIX; with
# PURGE, /etc/PRODUCT and /var/lib/PRODUCT (settings, secrets, state) too.
remove_installed() {
  local path
  for path in "$ROOT/etc/systemd/system/$PRODUCT.service" "$ROOT/usr/local/bin/$1" "$PREFIX"; do
    if [ -e "$path" ] || [ -L "$path" ]; then step rm -rf "$path"; fi
  done
  if have_systemd; then step systemctl daemon-reload; fi
  if [ "$PURGE" = true ]; then
    for path in "$ROOT/etc/$PRODUCT" "$ROOT/var/lib/$PRODUCT"; do
      if [ -e "$path" ]; then step rm -rf "$path"; fi
    done
  fi
}

# Runs the action main() parsed: as root, unless it is a dry run or under CM_ROOT.
run_action() {
  # Code root runs is writable by root alone, whatever umask sudo or a provisioning tool handed
  # over (under 000, /opt/PRODUCT and the unpacked release came out world-writable).
  umask 022
  if [ "$PURGE" = true ] && [ "$1" != uninstall ]; then fail "--purge goes with --uninstall"; fi
  if [ "$DRY_RUN" = false ] && [ -z "$ROOT" ] && [ "$(id -u)" -ne 0 ]; then
    fail "run as root (sudo bash $0 ...): $PRODUCT is installed under /opt and as a systemd service" "or look first with --dry-run"
  fi
  [ "$DRY_RUN" = false ] || say "Dry run: nothing on this machine is changed."
  case "$1" in
    install) install_release ;;
    rollback) rollback ;;
    uninstall) uninstall ;;
  esac
}
