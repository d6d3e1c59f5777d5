#!/usr/bin/env bash
# Sourced by the hack scripts: apt_get runs apt-get as root, and waits while another apt or
# dpkg process holds the package manager's lock instead of failing at once.
#   APT_LOCK_WAIT  seconds to wait for the lock in all (default 1200)
#   APT_LOCK_POLL  seconds between tries (default 5)

apt_sudo=""
[[ $(id -u) -eq 0 ]] || apt_sudo="sudo"
export DEBIAN_FRONTEND=noninteractive

apt_get() {
  local deadline=$((SECONDS + ${APT_LOCK_WAIT:-1200})) errors status
  errors=$(mktemp)
  while :; do
    # DPkg::Lock::Timeout covers dpkg's lock on install; the lists lock of `update` and a
    # lock taken between our tries are caught by the retry below.
    status=0
    $apt_sudo apt-get -o DPkg::Lock::Timeout=60 "$@" 2>"$errors" || status=$?
    cat "$errors" >&2
    if [[ $status -eq 0 ]]; then
      break
    fi
    if ! grep -qE "Could not get lock|Unable to acquire the dpkg|Unable to lock" "$errors" \
        || (( SECONDS >= deadline )); then
      break
    fi
    echo "apt: another package manager holds the lock; trying again in ${APT_LOCK_POLL:-5}s" >&2
    sleep "${APT_LOCK_POLL:-5}"
  done
  rm -f "$errors"
  return "$status"
}
