#!/usr/bin/env bash
# Installs, upgrades, rolls back or removes the control plane from a release tarball:
#
#   sudo bash install-cm-control-plane.sh                      # the embedded database
#   sudo bash install-cm-control-plane.sh --database-url-file /root/cm-database-url   # PostgreSQL
#
# Everything happens inside main(), called on the last line: a download cut short
# defines functions and runs nothing.
set -eu

# Filled in by `npm run release` (scripts/release/release.ts).
PRODUCT=cm-control-plane
VERSION="@VERSION@"
ROLLBACK_NOTE="if the newer version migrated the database more than one release past this one, this one refuses to start (exit 78, its journal says so): restore the backup taken before the upgrade"
# Where the release installed at $PREFIX/<version> records the backup taken before it was installed.
BACKUP_RECORD=upgrade-backup

usage() {
  cat <<USAGE
Usage: install.sh [options]             install or upgrade cm-control-plane ${VERSION}
       install.sh --rollback            switch back to the version installed before
       install.sh --uninstall [--purge] remove it

Install (or upgrade) checks cm-control-plane-${VERSION}-linux-<x64|arm64>.tar.gz against
SHA256SUMS (both beside this script, or --tarball PATH), refuses another machine's
tarball, unpacks it into /opt/cm-control-plane/${VERSION} with its own Node runtime and
points /opt/cm-control-plane/current at it. The first install makes the system user
cm-control-plane and writes /etc/cm-control-plane/control-plane.env (mode 0640, group
cm-control-plane) from the release's example; later ones keep it. Then it enables and
(re)starts cm-control-plane.service. bin/cm-admin is linked into /usr/local/bin.

Options:
  --database-url-file PATH  first install: a file holding the PostgreSQL URL
                            (DATABASE_URL; it carries a password, so never on the
                            command line). Without it: the embedded database under
                            /var/lib/cm-control-plane
  --tarball PATH            the release tarball (default: beside this script)
  --dry-run                 print every step, change nothing
  --rollback                point current back at the previous version and restart
  --uninstall               stop and remove the service and /opt/cm-control-plane;
                            /etc/cm-control-plane (the settings) and
                            /var/lib/cm-control-plane (the embedded database) stay
  --purge                   with --uninstall: remove those too
  -h, --help                this help

A release may migrate the database when it starts. An upgrade on the embedded
database stops the service and backs the database up beside it first
(cm-admin backup, named <database>-before-<version>-<time>.db); --rollback names
that backup, and restores it (the database replaced kept beside it) when the
version rolled back to lacks a migration the newer one ran: the database is as
before the upgrade (the release just before would also run on the migrated one;
one further back refuses it). On PostgreSQL, back it up yourself first: cm-admin backup prints the
pg_dump line.
CM_ROOT=DIR installs under DIR instead of / (an image being built, or a test): the
files only, no system user and no systemd.
USAGE
}

# @INSTALL_LIB@ (deploy/release/install-lib.sh: say, ok, note, fail, step, checked_tarball, unpack_aside, place_release, rollback, remove_installed, run_action)

restart_service() {
  if have_systemd; then
    step systemctl daemon-reload
    step systemctl enable cm-control-plane
    step systemctl restart cm-control-plane
    note "its log: journalctl -u cm-control-plane -f"
  else
    note "systemd is not running here${ROOT:+ (CM_ROOT=$ROOT)}: start it with your init system, as the user cm-control-plane,"
    note "with /etc/cm-control-plane/control-plane.env in its environment: /opt/cm-control-plane/current/bin/cm-control-plane"
  fi
}

# The service's user: the embedded database and the settings' group are its.
ensure_user() {
  if [ -n "$ROOT" ]; then
    note "CM_ROOT=$ROOT: no system user made"
  elif id -u cm-control-plane >/dev/null 2>&1; then
    ok "user cm-control-plane exists"
  else
    step useradd --system --home-dir /var/lib/cm-control-plane --no-create-home --shell /usr/sbin/nologin cm-control-plane
  fi
}

write_env_file() {
  local env_file="$ROOT/etc/cm-control-plane/control-plane.env"
  if [ -e "$env_file" ]; then
    ok "kept $env_file${DATABASE_URL_GIVEN:+ (--database-url-file ignored: edit the file to change it)}"
    return
  fi
  if [ "$DRY_RUN" = true ]; then
    say "would write: $env_file (mode 0640, group cm-control-plane) from the release's control-plane.env${DATABASE_URL_GIVEN:+, with DATABASE_URL=<hidden>}"
    return
  fi
  mkdir -p "$ROOT/etc/cm-control-plane"
  # umask first: a database password is never readable by others, not even for a moment.
  (
    umask 027
    {
      cat "$PREFIX/$VERSION/control-plane.env"
      if [ -n "$DATABASE_URL_GIVEN" ]; then
        printf "\n# Written by install.sh from --database-url-file.\nDATABASE_URL='%s'\n" "$DATABASE_URL_GIVEN"
      fi
    } >"$env_file"
  )
  chmod 640 "$env_file"
  if [ -z "$ROOT" ]; then chgrp cm-control-plane "$env_file"; fi
  ok "wrote $env_file (mode 0640${ROOT:+; CM_ROOT: group unchanged}): edit it for your domain, TLS and Solana settings"
}

# The embedded database the installed settings name, as a path under ROOT, as config.ts and
# database-location.ts read DATABASE_URL and CM_HOME; "postgres" for PostgreSQL; nothing
# before a first install. The env file is read as cm-admin's wrapper reads it: as shell.
embedded_database() {
  local env_file="$ROOT/etc/cm-control-plane/control-plane.env"
  [ -r "$env_file" ] || return 0
  (
    set +u
    DATABASE_URL="" CM_HOME=""
    # shellcheck disable=SC1090
    . "$env_file"
    url="${DATABASE_URL:-file:./data/marketplace.db}"
    case "$url" in postgres://* | postgresql://*)
      echo postgres
      exit 0
      ;;
    esac
    file="${url#file:}"
    case "$file" in /*) ;; *) file="${CM_HOME:-/var/lib/cm-control-plane}/${file#./}" ;; esac
    printf '%s\n' "$ROOT$file"
  )
}

# cm-admin of the release at $1, on the embedded database $2 alone (not the settings' other
# values, whose paths under CM_ROOT are not this root's), with the arguments that follow.
admin_on() {
  local release="$1" db="$2"
  shift 2
  step env CM_CONTROL_PLANE_ENV=/dev/null DATABASE_URL="file:$db" "$release/bin/cm-admin" "$@"
}

service_active() {
  have_systemd && systemctl is-active --quiet cm-control-plane
}

# Before the new version migrates the embedded database: a backup beside it, with the service
# stopped so that no write lands between the backup and the migration, taken by the new
# release's cm-admin (an older one may have no backup command). Sets BACKUP.
backup_before_upgrade() {
  local db was_active=false
  BACKUP=""
  [ -n "$(current_version)" ] || return 0
  db="$(embedded_database)"
  if [ "$db" = postgres ]; then
    note "the database is PostgreSQL: this upgrade takes no backup of it; cm-admin backup prints the pg_dump line to run before one"
    return 0
  fi
  if [ -z "$db" ] || [ ! -f "$db" ]; then return 0; fi
  BACKUP="${db%.db}-before-${VERSION}-$(date -u +%Y%m%dT%H%M%SZ).db"
  if service_active; then
    was_active=true
    step systemctl stop cm-control-plane
  fi
  if ! admin_on "$UNPACKED" "$db" backup "$BACKUP"; then
    local restarted=""
    if [ "$was_active" = true ]; then
      step systemctl start cm-control-plane
      restarted=" (the running version was started again)"
    fi
    fail "the backup of $db before the upgrade failed; nothing was changed$restarted" \
      "see cm-admin's message above; the upgrade goes on only with a backup"
  fi
}

# How many SQLite migrations the installed release $1 ships (0 where it has no list).
migrations_of() {
  awk '/"tag"/ { n++ } END { print n + 0 }' "$PREFIX/$1/migrations/sqlite/meta/_journal.json" 2>/dev/null || echo 0
}

# --rollback from $1 to $2: names the backup taken when $1 was installed, and restores it
# when $1 ran a migration $2 lacks ($2 refuses such a database). Migrations are only ever
# added, so $1's list being longer than $2's is that.
prepare_rollback() {
  local current="$1" previous="$2" db backup newer older
  db="$(embedded_database)"
  if [ ! -r "$PREFIX/$current/$BACKUP_RECORD" ]; then
    if [ "$db" = postgres ]; then
      note "the database is PostgreSQL: if $current migrated it more than one release past $previous, $previous refuses it (exit 78): restore the dump taken before the upgrade (pg_restore)"
    else
      note "no backup was taken when $current was installed; $ROLLBACK_NOTE"
    fi
    return 0
  fi
  backup="$ROOT$(cat "$PREFIX/$current/$BACKUP_RECORD")"
  ok "the database was backed up before $current was installed: $backup"
  newer="$(migrations_of "$current")"
  older="$(migrations_of "$previous")"
  if [ "$newer" -le "$older" ]; then
    note "$previous knows every migration $current has: the database stays as it is (the backup stays too)"
    return 0
  fi
  [ -f "$backup" ] || fail "$current ran migrations $previous lacks, and the backup taken before them, $backup, is gone; nothing was changed" \
    "restore another backup of the database with cm-admin restore FILE, or stay on $current"
  note "$current ran migrations $previous lacks ($newer against $older): restoring the backup; what was written since the upgrade stays only in the database set aside"
  if service_active; then step systemctl stop cm-control-plane; fi
  admin_on "$PREFIX/$current" "$db" restore "$backup" || fail "the backup could not be restored; nothing was rolled back" \
    "see cm-admin's message above; with the control plane stopped, cm-admin restore $backup"
}

install_release() {
  local arch tarball
  arch="$(machine_arch)"
  tarball="${TARBALL:-$HERE/cm-control-plane-${VERSION}-linux-${arch}.tar.gz}"
  checked_tarball "$arch" "$tarball"
  if [ -n "$DATABASE_URL_GIVEN" ]; then
    case "$DATABASE_URL_GIVEN" in postgres://* | postgresql://*) ;; *) fail "the database URL must be a postgres:// URL; nothing was changed" ;; esac
    # It becomes a line of the env file in single quotes, which systemd and cm-admin's shell both read
    # literally (a bare & or ; would be a command to the shell): only a quote or a space could break out.
    case "$DATABASE_URL_GIVEN" in *[[:space:]\']*) fail "the database URL holds spaces or single quotes; nothing was changed" "percent-encode them (%20, %27)" ;; esac
  fi

  # Unpacked and tried aside first: a tarball that does not run here changes nothing.
  unpack_aside "$arch" "$tarball"
  local ran
  ran="$("$UNPACKED/node/bin/node" --version 2>&1)" || fail "the release's Node runtime does not run on this machine: $ran; nothing was changed"
  [ -f "$UNPACKED/lib/control-plane.mjs" ] || fail "$(basename "$tarball") holds no lib/control-plane.mjs; nothing was changed"
  ok "cm-control-plane ${VERSION} unpacked; its own Node $ran runs on this machine"

  ensure_user
  backup_before_upgrade
  place_release
  if [ -n "$BACKUP" ]; then
    if [ "$DRY_RUN" = true ]; then
      say "would record the backup in $PREFIX/$VERSION/$BACKUP_RECORD"
    else
      printf '%s\n' "${BACKUP#"$ROOT"}" >"$PREFIX/$VERSION/$BACKUP_RECORD"
    fi
  fi
  step mkdir -p "$ROOT/etc/systemd/system" "$ROOT/usr/local/bin"
  step cp "$PREFIX/$VERSION/cm-control-plane.service" "$ROOT/etc/systemd/system/cm-control-plane.service"
  step ln -sfn /opt/cm-control-plane/current/bin/cm-admin "$ROOT/usr/local/bin/cm-admin"
  write_env_file
  if [ "$DRY_RUN" = false ]; then
    ok "cm-control-plane ${VERSION} installed in $PREFIX/$VERSION${PREVIOUS:+ (was $PREVIOUS; --rollback goes back)}"
  fi
  restart_service
}

uninstall() {
  if have_systemd; then step systemctl disable --now cm-control-plane || true; fi
  remove_installed cm-admin
  if [ "$DRY_RUN" = true ]; then
    say "Dry run: nothing was removed."
  elif [ "$PURGE" = true ]; then
    ok "cm-control-plane removed, with its settings and its embedded database (the user cm-control-plane stays: userdel cm-control-plane)"
  else
    ok "cm-control-plane removed; kept $ROOT/etc/cm-control-plane (the settings) and $ROOT/var/lib/cm-control-plane (the embedded database; --purge removes them)"
  fi
}

main() {
  HERE="$(cd "$(dirname "$0")" && pwd)"
  ROOT="${CM_ROOT:-}"
  ROOT="${ROOT%/}"
  PREFIX="$ROOT/opt/cm-control-plane"
  DRY_RUN=false PURGE=false
  local action=install url_file=""
  TARBALL="" DATABASE_URL_GIVEN="" STAGING="" UNPACKED="" PREVIOUS="" BACKUP=""
  while [ $# -gt 0 ]; do
    case "$1" in
      -h | --help) usage; return 0 ;;
      --dry-run) DRY_RUN=true ;;
      --rollback) action=rollback ;;
      --uninstall) action=uninstall ;;
      --purge) PURGE=true ;;
      --database-url-file | --tarball)
        [ $# -ge 2 ] || fail "$1 needs a value"
        case "$1" in
          --database-url-file) url_file="$2" ;;
          --tarball) TARBALL="$2" ;;
        esac
        shift
        ;;
      --database-url-file=*) url_file="${1#*=}" ;;
      --tarball=*) TARBALL="${1#*=}" ;;
      --database-url | --database-url=*) fail "the database URL is not taken on the command line, where every user of this machine reads it (ps)" \
        "pass --database-url-file PATH (a file of mode 0600)" ;;
      *) fail "unknown option $1 (install.sh --help lists them)" ;;
    esac
    shift
  done
  if [ -n "$url_file" ]; then
    [ -r "$url_file" ] || fail "cannot read the database URL file $url_file"
    DATABASE_URL_GIVEN="$(tr -d ' \t\r\n' <"$url_file")"
    [ -n "$DATABASE_URL_GIVEN" ] || fail "$url_file is empty"
  fi
  run_action "$action"
}

main "$@"
