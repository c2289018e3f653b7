"""The POSIX sh scripts nodes run for transfers: operands arrive as positional parameters, never
pasted into the text, and a script never leaves a half-written file under the final name.

A single file that would not compress travels as itself ("raw": no tar, no second copy on disk),
checked by its sha256 like any other."""

from __future__ import annotations

# sha256 of the files a manifest names, compared with it: OpenSSL's (4x coreutils' sha256sum where
# the CPU has SHA instructions) unless a name needed sha256sum's escaping, then `sha256sum -c`.
_SUMS = r"""
sums() {
  if command -v openssl >/dev/null 2>&1 && ! grep -q '^\\' "$1"; then
    # each name as ./NAME, so that a file called -out or -hex is a file, never an openssl option
    sed 's/^[0-9a-f]\{64\}  /.\//' "$1" | tr '\n' '\0' | xargs -0 -r openssl dgst -sha256 -r |
      sed 's/ \*\.\//  /' > "$1.got"
    cmp -s "$1" "$1.got" || { diff "$1" "$1.got" | head -n 4; return 1; }
  else
    sha256sum --quiet --strict -c "$1"
  fi
}
"""

# $1 the destination directory $2 "create" to make it (mkdir -p) when missing. Runs before anything
# is packed or sent, so a missing directory refuses the whole copy instead of failing every node
# after the transfer. Exit 4: missing (or not a directory), 5: could not be created.
DEST_READY = r"""
set -u
dest=$1
[ -d "$dest" ] && exit 0
if [ -e "$dest" ] || [ -L "$dest" ]; then echo "gpunet: $dest is not a directory" >&2; exit 4; fi
[ "$2" = create ] || { echo "gpunet: no directory $dest" >&2; exit 4; }
err=$(mkdir -p -- "$dest" 2>&1) || { echo "gpunet: cannot create $dest: ${err##*: }" >&2; exit 5; }
"""

# $1 archive (as it arrived) $2 destination directory $3 name $4 compression (raw: the file
# itself) $5 its sha256, $6 mode and $7 mtime when raw. Unpacks beside the destination (same
# filesystem: the final step is one rename), checks every file's sha256, then renames; a
# directory replaced is first moved aside.
SHARED_DESTINATION = "already in place (a destination other nodes share)"
COPY_FINISH = _SUMS + r"""
set -u
archive=$1 dest=$2 name=$3 compress=$4 digest=$5 mode=$6 mtime=$7
work=$archive.d
fail() { rm -rf -- "$work" "$archive"; echo "gpunet: $*" >&2; exit 1; }
[ -d "$dest" ] || fail "no directory $dest here"
[ -f "$archive" ] || fail "the archive did not arrive"
find "$dest" -maxdepth 1 -name ".gpunet-copy-*" -mmin +1440 -exec rm -rf -- {} + 2>/dev/null
mkdir -m 700 -- "$work" || fail "cannot create $work"
if [ "$compress" = raw ]; then
  mkdir -- "$work/payload" && mv -- "$archive" "$work/payload/$name" || fail "cannot move the file into $work"
  printf '%s  %s\n' "$digest" "$name" > "$work/manifest.sha256"
  chmod "$mode" "$work/payload/$name" && touch -m -d "@$mtime" "$work/payload/$name"
else
  case $compress in
    zstd) command -v zstd >/dev/null 2>&1 || fail "zstd is not installed here (use --compress gzip)"
          set -- zstd -q -d -c ;;
    gzip) set -- gzip -d -c ;;
    *) set -- cat ;;
  esac
  "$@" < "$archive" | tar -x --no-same-owner -f - -C "$work" || fail "the archive could not be unpacked"
  rm -f -- "$archive"
fi
sums=$(cd "$work/payload" && sums ../manifest.sha256 2>&1) || fail "checksum mismatch: $sums"
new=$work/payload/$name
final=$dest/$name
install() {
  if [ -d "$new" ] || { [ -d "$final" ] && [ ! -L "$final" ]; }; then
    # where nodes share the destination (an NFS home) another node may move it first: the rename decides
    if [ -e "$final" ] || [ -L "$final" ]; then mv -T -- "$final" "$work/old" 2>/dev/null; fi
  fi
  err=$(mv -T -- "$new" "$final" 2>&1) && return 0
  [ -e "$work/old" ] && [ ! -e "$final" ] && [ ! -L "$final" ] && mv -T -- "$work/old" "$final"
  rm -rf -- "$work/old"
  return 1
}
# exactly the files sent, no more: another node sharing the destination landed the same tree
identical() {
  (cd "$dest" && sums "$work/manifest.sha256" >/dev/null 2>&1) &&
    [ "$(find "$final" -type f | wc -l)" -eq "$(wc -l < "$work/manifest.sha256")" ]
}
tries=0
until install; do
  if identical; then
    echo "gpunet: an identical $name was """ + SHARED_DESTINATION + r"""" >&2
    break
  fi
  # a node between moving the tree aside and renaming its own in leaves nothing to compare: again
  tries=$((tries + 1))
  [ "$tries" -lt 20 ] || fail "cannot rename into $final: ${err##*: }"
  sleep 0.1
done
rm -rf -- "$work"
echo "$final"
"""

# $1 what to gather $2 compression (auto: zstd where the node has it, none for a single file
# whose first 4 MiB gzip does not shrink by a tenth). Prints archive=, compress= and top= lines,
# then the sha256 of every file (OpenSSL's or sha256sum's lines), taken before tar or the copy
# reads them: a file that changes in between fails the check on the admin host; tar's own status
# catches a file that vanishes. A raw file is fetched where it is (archive= names it). Symlinks,
# devices and sockets on the node are left out (the sums and the archive list regular files).
GATHER_PACK = r"""
set -u
archive=
fail() { [ -n "$archive" ] && [ "$compress" != raw ] && rm -f -- "$archive"; echo "gpunet: $*" >&2; exit 1; }
compress=$2
[ -e "$1" ] || fail "no $1 here"
real=$(readlink -f -- "$1") || fail "cannot resolve $1"
incompressible() {
  n=$(head -c 4194304 -- "$real" | wc -c) && z=$(head -c 4194304 -- "$real" | gzip -1 | wc -c) &&
    [ $((z * 10)) -gt $((n * 9)) ]
}
if [ -f "$real" ] && { [ "$compress" = none ] || { [ "$compress" = auto ] && incompressible; }; }; then
  compress=raw
elif [ "$compress" = auto ]; then
  if command -v zstd >/dev/null 2>&1; then compress=zstd; else compress=gzip; fi
fi
case $compress in
  zstd) command -v zstd >/dev/null 2>&1 || fail "zstd is not installed here (use --compress gzip)"
        set -- zstd -q -T0 -1 -c ;;
  gzip) set -- gzip -1 -c ;;
  *) set -- cat ;;
esac
cd -- "$(dirname -- "$real")" || fail "cannot enter the directory of $real"
top=$(basename -- "$real")
if [ "$compress" = raw ]; then archive=$real
else archive=$(mktemp "${TMPDIR:-/tmp}/gpunet-gather.XXXXXXXX") || fail "cannot create a temporary file"
fi
echo "archive=$archive"
echo "compress=$compress"
echo "top=$top"
if command -v openssl >/dev/null 2>&1; then
  find "./$top" -type f -exec openssl dgst -sha256 -r {} + || fail "cannot read every file of $real"
else
  find "./$top" -type f -exec sha256sum -- {} + || fail "cannot read every file of $real"
fi
[ "$compress" = raw ] && exit 0
# regular files and directories only: the admin host refuses an archive holding anything else
rc=$( { { find "./$top" \( -type f -o -type d \) -print0 | tar -c --null --no-recursion -T - -f -; echo $? >&4; } |
        "$@" > "$archive"; } 4>&1 )
[ "$rc" = 0 ] || fail "tar exit $rc: files changed or vanished while they were read"
"""

REMOVE = 'rm -rf -- "$@"'
