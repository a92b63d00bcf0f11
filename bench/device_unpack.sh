# bench/device_unpack.sh - sourced by the device scripts that continue an
# earlier call's runs (device_train.sh, device_resume_ab.sh):
#   unpack_archives DIR ARCHIVES
# unpacks each .tgz of the space-separated ARCHIVES into DIR, and the pieces
# of one split archive (NAME.tgz.part-aa, -ab, ...; device_train.sh returns
# an archive above 16 MB that way) joined in order. Returns 0, or 1 after
# printing which archive could not be unpacked.
unpack_archives() {
  local dir=$1 f parts
  parts=$(for f in $2; do case "$f" in *.part-*) echo "$f" ;; esac; done | sort)
  for f in $2; do
    case "$f" in *.part-*) continue ;; esac
    tar xzf "$f" -C "$dir" || { echo "cannot unpack $f"; return 1; }
  done
  # shellcheck disable=SC2086
  [ -z "$parts" ] || cat $parts | tar xz -C "$dir" || { echo "cannot unpack $parts"; return 1; }
}
